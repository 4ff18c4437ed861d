#!/usr/bin/env python3
"""Generate pipeline-placed LLaMA-style training programs with real PaddlePaddle 3.3.1 (CPU).

The model of gen_llm.py (embedding, decoder layers with RMSNorm, causal attention, SwiGLU MLP, lm
head; q/k/v/gate/up/head column-parallel, o/down row-parallel over `mp` where the mesh has it) with
its layers on DIFFERENT meshes: the embedding and the first half of the layers on pipeline stage 0,
the second half, the final norm and the head on stage 1, the activations moved between the
stages with `dist.reshard` (auto-parallel "pipeline" placement without a pipeline scheduler).
The stage meshes are `mesh.get_mesh_with_dim("pp", i)` of a global mesh with dims pp,dp[,mp];
the input ids live on stage 0, the labels on stage 1 (`dist.shard_dataloader(meshes=[m0, m1])`).
AdamW + ClipGradByGlobalNorm(1.0) + CosineAnnealingDecay (gen_llm.py's `clip` config);
stage 0 = `dist.shard_optimizer(opt)`, stage 1 = `dist.shard_optimizer(opt, ShardingStage1("dp", mesh))`.

Names and snapshots as gen_llm.py: clip/CASE.sN.rR.SNAPSHOT.ir (SNAPSHOT in before_partition,
after_reshard, dense, startup_after_remove, startup_final) or clip/CASE.sN.rR.error.txt.
The schedule cases (--sched): sched/CASE.MODE.aK.sN.rR.SNAPSHOT with SNAPSHOT in before_partition,
dist_final (the engine's dist program after gradient merge), dense (after the scheduler pass),
startup_after_remove, startup_final, jobs.txt (the plan's job list: "TYPE MICRO_BATCH" a line,
schedule order) and job.TYPE.ir (each job program, plan.ir_program(TYPE)); Paddle's refusals as
error.txt.

Usage (/work/paddle/bin/python):
  python gen_pp.py --out DIR [-j N] [--all-ranks] [FILTER...]   # FILTER: CONFIG/CASE.sN[.rR] prefixes;
                                                # --all-ranks: every rank of the mesh, not JOBS's;
                                                # --more: the MORE table (stage 3, AMP) instead of JOBS
  python gen_pp.py --pack DIR DEST                # DEST/store/HASH.gz + DEST/MANIFEST.tsv (gen_llm.pack)
  python gen_pp.py --pack-more DIR DEST           # the KEEP subset of a --more output into DEST
  python gen_pp.py --out DIR --sched [--resume] [FILTER...]   # the SCHED table (pipeline schedules,
                                                # gradient merge), every rank: DIR/sched/CASE.MODE.aK.sN.rR.*
  python gen_pp.py --pack-sched DIR DEST          # DIR/sched -> DEST/CASE.tar.xz (one xz archive a mesh)
  python gen_pp.py --unpack DEST OUT

Each (case, stage, rank) runs in a fresh Python process with PYTHONHASHSEED=0, OMP_NUM_THREADS=1,
PADDLE_TRAINER_ID=rank and PADDLE_TRAINERS_NUM=8 (--sched: the mesh's world size) set before
`import paddle`.  OMP_NUM_THREADS=1 matters: a process takes ~5-10 s at idle with it, 30-70 s without
(and ~10x more again on a loaded machine: a pp4 rank took 20 min at load 14).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_llm import BATCH, HIDDEN, SNAPSHOTS, VOCAB, llama_layers, pack, unpack  # noqa: E402
from oracle_capture import command_line, refusal, run_jobs, write_crash, write_snapshot  # noqa: E402

LAYERS = 2  # one decoder layer per pipeline stage
MESHES = {
    "llama_pp2dp2": ([[0, 1], [2, 3]], ["pp", "dp"]),
    "llama_pp2dp2mp2": ([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], ["pp", "dp", "mp"]),
}
JOBS = [  # (config, case, stages, ranks)
    ("clip", "llama_pp2dp2", ["s0", "s1"], [0, 1, 2, 3]),
    ("clip", "llama_pp2dp2mp2", ["s0", "s1"], [0, 3, 4, 7]),
]
MORE = [  # --more: stage 3, AMP (strategy.amp bfloat16 O2, as gen_llm.py's `amp`)
    ("clip", "llama_pp2dp2", ["s3"], [0, 1, 2, 3]),
    ("amp", "llama_pp2dp2", ["s0", "s1"], [0, 1, 2, 3]),
]
# what of the --more output is stored (--pack-more): (config, case, stage, ranks), each with its
# rank's stage-0 inputs (before_partition, startup_after_remove); Paddle's errors kept as they are
KEEP = [("amp", "llama_pp2dp2", "s1", [0, 3]), ("clip", "llama_pp2dp2", "s3", [0, 1, 2, 3])]

# --sched: pipeline schedules and gradient merge (strategy.pipeline / strategy.gradient_merge) on the
# `clip` config, every rank; 2 decoder layers per stage (VPP puts one in each of its 2 chunks), global
# batch SCHED_BATCH (a micro-batch is SCHED_BATCH / ACC).  (mode, case, accumulate steps, stages).
MESHES["llama_pp4"] = ([[0], [1], [2], [3]], ["pp", "dp"])
SCHED_BATCH = 8
SCHED_CASES = ["llama_pp2dp2", "llama_pp2dp2mp2", "llama_pp4"]
SCHED = [  # in the order generated (each (case, stage, rank) is one Paddle process, ~5-10 s at idle)
    ("FThenB", "llama_pp2dp2", 2, ["s0", "s1"]), ("FThenB", "llama_pp2dp2", 4, ["s0"]),
    ("1F1B", "llama_pp2dp2", 4, ["s0", "s1"]), ("1F1B", "llama_pp2dp2", 2, ["s1"]),
    ("VPP", "llama_pp2dp2", 4, ["s0", "s1"]), ("GM", "llama_pp2dp2", 2, ["s0"]), ("GM", "llama_pp2dp2", 4, ["s1"]),
    ("Eager1F1B", "llama_pp2dp2", 4, ["s0"]), ("ZBH1", "llama_pp2dp2", 4, ["s0"]),
    ("1F1B", "llama_pp2dp2mp2", 4, ["s0"]), ("VPP", "llama_pp2dp2mp2", 4, ["s1"]),
    ("1F1B", "llama_pp4", 4, ["s0"]), ("1F1B", "llama_pp4", 2, ["s0"]), ("VPP", "llama_pp4", 4, ["s1"]),
    ("FThenB", "llama_pp4", 2, ["s1"]),
    # (added later: VPP on pp4 at stage 0 (refused as at stage 1), 1F1B on pp4 at stage 1, gradient
    # merge alone on pp2 x dp2 x mp2)
    ("VPP", "llama_pp4", 4, ["s0"]), ("1F1B", "llama_pp4", 4, ["s1"]), ("GM", "llama_pp2dp2mp2", 4, ["s0"]),
    # (third session: pp2 x dp2 x mp2 at stage 1 with 2 micro-batches, FThenB on pp2 x dp2 x mp2)
    ("1F1B", "llama_pp2dp2mp2", 2, ["s1"]), ("FThenB", "llama_pp2dp2mp2", 2, ["s0"]),
    ("FThenB", "llama_pp2dp2mp2", 4, ["s1"]),
    # (the rest of the matrix mesh x stage x accumulate steps x schedule, in this order, a
    # configuration's ranks in order; the third session stored the pp2 x dp2 ones, the fourth the rest)
    ("FThenB", "llama_pp2dp2", 4, ["s1"]), ("1F1B", "llama_pp2dp2", 2, ["s0"]), ("VPP", "llama_pp2dp2", 2, ["s0", "s1"]),
    ("GM", "llama_pp2dp2", 2, ["s1"]), ("GM", "llama_pp2dp2", 4, ["s0"]),
    ("FThenB", "llama_pp4", 4, ["s0", "s1"]), ("FThenB", "llama_pp4", 2, ["s0"]), ("GM", "llama_pp4", 4, ["s0", "s1"]),
    ("1F1B", "llama_pp2dp2mp2", 4, ["s1"]), ("VPP", "llama_pp2dp2mp2", 4, ["s0"]), ("FThenB", "llama_pp2dp2mp2", 4, ["s0"]),
    ("1F1B", "llama_pp2dp2mp2", 2, ["s0"]), ("GM", "llama_pp2dp2mp2", 4, ["s1"]), ("FThenB", "llama_pp2dp2mp2", 2, ["s1"]),
    # (fourth session: the cells of the matrix not in the table before)
    ("1F1B", "llama_pp4", 2, ["s1"]), ("VPP", "llama_pp4", 2, ["s0", "s1"]), ("GM", "llama_pp4", 2, ["s0", "s1"]),
    ("VPP", "llama_pp2dp2mp2", 2, ["s0", "s1"]), ("GM", "llama_pp2dp2mp2", 2, ["s0", "s1"]),
]
# what each schedule case writes (besides Paddle's error, where it refuses)
SCHED_SNAPSHOTS = ["before_partition", "dist_final", "dense", "startup_after_remove", "startup_final"]


def select_more(src, out):
    import re
    import shutil
    n = 0
    for c in sorted(os.listdir(src)):
        for f in sorted(os.listdir(os.path.join(src, c))):
            m = re.match(r"(\w+)\.(s\d)\.r(\d+)\.(\w+)\.(ir|txt)$", f)
            if not m:
                continue
            case, stage, r, snap = m.group(1), m.group(2), int(m.group(3)), m.group(4)
            kept = any((c, case) == k[:2] and r in k[3] and (stage == k[2] or (
                stage == "s0" and snap in ("before_partition", "startup_after_remove"))) for k in KEEP)
            if kept:
                os.makedirs(os.path.join(out, c), exist_ok=True)
                shutil.copyfile(os.path.join(src, c, f), os.path.join(out, c, f))
                n += 1
    print(f"{n} files selected", flush=True)



def ranks_of(case):
    ids = MESHES[case][0]
    while isinstance(ids[0], list):
        ids = [r for row in ids for r in row]
    return ids


def build_and_capture(config, case, stage, snapshot_cb, sched=None):
    """``sched``: (MODE, ACC) for the schedule cases (SCHED): MODE FThenB/1F1B/VPP/Eager1F1B/ZBH1 is
    ``strategy.pipeline`` (VPP: vpp_degree 2, vpp_seg_method "Block"), GM ``strategy.gradient_merge``
    alone; their model has 2 decoder layers per stage and a global batch of 8."""
    import numpy as np
    import paddle
    import paddle.distributed as dist

    # distc/capture/hooks.py's, through gen_stage1 (looked up when called: gen_fusion.py wraps it there)
    from gen_stage1 import run_engine

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[case]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    npp = len(ids)
    stages = [mesh.get_mesh_with_dim("pp", i) for i in range(npp)]
    layers, batch = (LAYERS, BATCH) if sched is None else (2 * npp, SCHED_BATCH)
    sdims = dims[1:]
    has_mp = "mp" in sdims

    def place(shard_dim=None):
        pl = [dist.Replicate() for _ in sdims]
        if has_mp and shard_dim is not None:
            pl[sdims.index("mp")] = dist.Shard(shard_dim)
        return pl

    def act():  # activations between the stages: batch over dp
        pl = [dist.Replicate() for _ in sdims]
        pl[sdims.index("dp")] = dist.Shard(0)
        return pl

    RMSNorm, Block, Loss, DS, linear = llama_layers(VOCAB)

    def stage_of(i):
        return i * npp // layers

    class LLaMA(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = paddle.nn.Embedding(VOCAB, HIDDEN)
            self.embed.weight = dist.shard_tensor(self.embed.weight, stages[0], place(1))
            self.blocks = paddle.nn.LayerList([Block(stages[stage_of(i)]) for i in range(layers)])
            self.norm = RMSNorm(stages[-1])
            self.head = linear(stages[-1], HIDDEN, VOCAB, 1)

        def forward(self, ids):
            h = self.embed(ids)
            for i, b in enumerate(self.blocks):
                if i > 0 and stage_of(i) != stage_of(i - 1):
                    h = dist.reshard(h, stages[stage_of(i)], act())
                h = b(h)
            return self.head(self.norm(h))

    model = LLaMA()
    clip = paddle.nn.ClipGradByGlobalNorm(1.0)
    lr = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.01, T_max=10)
    opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), grad_clip=clip)
    strategy = dist.Strategy()
    if config == "amp":
        lr = 0.01
        opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), grad_clip=clip)
        strategy.amp.enable = True
        strategy.amp.dtype = "bfloat16"
        strategy.amp.level = "O2"
    if sched is not None:
        mode, acc = sched
        if mode == "GM":
            strategy.gradient_merge.enable = True
            strategy.gradient_merge.k_steps = acc
            strategy.gradient_merge.avg = True
        else:
            strategy.pipeline.enable = True
            strategy.pipeline.schedule_mode = mode
            strategy.pipeline.accumulate_steps = acc
            strategy.pipeline.pp_degree = npp
            if mode == "VPP":
                strategy.pipeline.vpp_degree = 2
                strategy.pipeline.vpp_seg_method = "Block"
    if stage == "s0":
        opt = dist.shard_optimizer(opt)
    else:
        fn = {"s1": dist.ShardingStage1, "s3": dist.ShardingStage3}[stage]
        opt = dist.shard_optimizer(opt, fn("dp", mesh))
    loader = paddle.io.DataLoader(DS(4 * batch), batch_size=batch)
    dloader = dist.shard_dataloader(loader, meshes=[stages[0], stages[-1]], shard_dims="dp")

    def jobs(programs, job_list):  # the schedule cases: the job plan (schedule order), each job's program
        snapshot_cb("jobs", "".join(f"{t} {m}\n" for t, m in job_list))
        for t, program in programs.items():
            snapshot_cb("job." + t, program)

    # run_engine (distc/capture/hooks.py) also gives `startup_before_remove` (the startup program
    # before RemovePasses prunes it for the rank: every stage's values) and `dist_final` (the dist
    # program at the end of _parallel_pir: after gradient merge)
    run_engine(model, dloader, Loss(), opt, snapshot_cb, strategy=strategy, **({"job_cb": jobs} if sched else {}))


def sched_name(mode, case, acc):
    """The directory and case name of a schedule case: sched/CASE.MODE.aACC"""
    return "sched", f"{case}.{mode}.a{acc}"


def worker(config, case, stage, rank, outdir, sched=None):
    assert os.environ.get("PADDLE_TRAINER_ID") == str(rank)
    if sched is not None:
        config, name = sched_name(sched[0], case, sched[1])
    else:
        name = case
    base = os.path.join(outdir, config, f"{name}.{stage}.r{rank}")
    got = {}

    def cb(name, program):
        got.setdefault(name, str(program))

    try:
        build_and_capture(config, case, stage, cb, sched)
    except Exception as e:  # Paddle refused: only its message is kept
        with open(base + ".error.txt", "w", encoding="utf-8") as f:
            f.write(refusal(e) + "\n")
        return
    names = SNAPSHOTS + ["startup_before_remove"] if sched is None else \
        SCHED_SNAPSHOTS + sorted(k for k in got if k.startswith("job"))
    for s in names:
        write_snapshot(f"{base}.{s}.{'txt' if s == 'jobs' else 'ir'}", got[s])


def run_worker(job):
    config, case, stage, rank, outdir = job[:5]
    sched = job[5] if len(job) > 5 else None  # (mode, acc): a schedule case
    name = case
    # a schedule needs the world size: Paddle's pipeline stage of a rank is rank // (world / pp degree)
    world = "8" if sched is None else str(len(ranks_of(case)))
    extra = [] if sched is None else [sched[0], str(sched[1])]
    if sched is not None:
        config, name = sched_name(sched[0], case, sched[1])
    os.makedirs(os.path.join(outdir, config), exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank),
               PADDLE_TRAINERS_NUM=world, GLOG_minloglevel="2")
    err = os.path.join(outdir, config, f"{name}.{stage}.r{rank}.error.txt")
    for attempt in range(3):  # dy2static's temporary module files can clash between parallel processes
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", config, case, stage, str(rank),
                            outdir] + extra, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if attempt == 2 or not (os.path.exists(err) and "transformed from AST" in open(err, encoding="utf-8").read()):
            break
        os.remove(err)
    tag = f"{config}/{name}.{stage}.r{rank}"
    if p.returncode != 0:
        print(f"  CRASH {tag}: {p.stdout.strip()[-2000:]}", flush=True)
        write_crash(os.path.join(outdir, config, f"{name}.{stage}.r{rank}.error.txt"), p.stdout)
    else:
        print("  done", tag, flush=True)


def pack_sched(src, dest):
    """src/sched/NAME -> dest/CASE.tar.xz, one archive for each mesh (CASE): the files of a case
    differ little between ranks, schedules and stages, so one solid xz stream stores them ~300x
    smaller than one gzip a file (deterministic: sorted names, no times or owners)."""
    import io
    import lzma
    import tarfile
    os.makedirs(dest, exist_ok=True)
    names = sorted(os.listdir(os.path.join(src, "sched")))
    for case in sorted({n.split(".")[0] for n in names}):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for n in names:
                if n.split(".")[0] != case:
                    continue
                data = open(os.path.join(src, "sched", n), "rb").read()
                info = tarfile.TarInfo(n)
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                tar.addfile(info, io.BytesIO(data))
        out = os.path.join(dest, case + ".tar.xz")
        with open(out, "wb") as f:
            f.write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
        print(f"{out}: {os.path.getsize(out)} bytes", flush=True)


def _pack_more(args, j):  # SRC DEST: the KEEP subset of SRC into DEST's store
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        select_more(args[0], tmp)
        pack(tmp, args[1])


def _out(args, j):  # DIR [--all-ranks] [--more] [--sched] [--resume] [FILTER ...]
    every = "--all-ranks" in args  # every rank of the mesh, not only JOBS's (for distc verify)
    table = MORE if "--more" in args else JOBS
    if "--sched" in args:  # every rank of each schedule case
        jobs = [("clip", case, s, r, args[0], (mode, acc)) for mode, case, acc, ss in SCHED for s in ss
                for r in ranks_of(case)]
    else:
        jobs = [(c, case, s, r, args[0]) for c, case, ss, rs in table for s in ss
                for r in (ranks_of(case) if every else rs)]

    def tag(jb):
        c, n = sched_name(jb[5][0], jb[1], jb[5][1]) if len(jb) > 5 else (jb[0], jb[1])
        return f"{c}/{n}.{jb[2]}.r{jb[3]}"
    if "--resume" in args:  # leave out what an earlier run wrote
        jobs = [jb for jb in jobs if not any(os.path.exists(os.path.join(args[0], tag(jb) + f))
                                             for f in (".dense.ir", ".error.txt", ".after_reshard.ir"))]
    run_jobs(run_worker, jobs, j, [a for a in args[1:] if a not in ("--all-ranks", "--more", "--sched", "--resume")],
             tag)


def main(argv):
    return command_line(argv, __doc__, {
        "--worker": lambda a, j: worker(a[0], a[1], a[2], int(a[3]), a[4], (a[5], int(a[6])) if len(a) > 6 else None),
        "--pack": lambda a, j: pack(a[0], a[1]),
        "--pack-sched": lambda a, j: pack_sched(a[0], a[1]),  # SRC DEST: SRC/sched/* -> DEST/CASE.tar.xz
        "--pack-more": _pack_more,
        "--unpack": lambda a, j: unpack(a[0], a[1]),
        "--out": _out,
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
