#!/usr/bin/env python3
"""Generate ZeRO tensor-fusion and MoE training programs with real PaddlePaddle 3.3.1 (CPU).

Tensor fusion (`fusion/`): the MLP of gen_stage1.py and the LLaMA-style decoder of gen_llm.py
(`clip` config: AdamW + ClipGradByGlobalNorm + cosine LR) with `strategy.sharding.enable_tensor_fusion`
and `dist.ShardingStage1("dp", mesh)` (Paddle's ShardingOptimizerStage1), in the variants

  s0       dist.shard_optimizer(opt): the plain stage-0 program (distc's input)
  s1       ShardingStage1 without fusion (the unfused ZeRO-1 program, for comparison)
           (the LLaMA's s0 and s1 are gen_llm.py's, in tests/data/oracle/llm: not made here)
  fuse     enable_tensor_fusion (comm_buffer_size_MB 256: one buffer)
  overlap  + enable_overlap
  release  + release_gradients
  buf0     comm_buffer_size_MB = 0 (one buffer per parameter)
  ovrel    enable_overlap + release_gradients

The CPU wheel stops tensor fusion at a device check (`tensor fusion helper now only support
['gpu','npu','xpu'], but got device unknown`); the worker sets the helper's cached device type
to "gpu" first (`tensor_fusion_helper.__current_device_type__`), which changes only the
alignment table looked up (256 bytes), not the program.

MoE (`moe/`): a small expert-parallel model on the 2x2 mesh [[0,1],[2,3]] (dims dp, ep): a
replicated gate, the tokens resharded over ep ([Shard(0), Shard(2)] -> [Shard(0), Shard(1)]: an
n-d shard-to-shard reshard), `dist.auto_parallel.api.moe_sub_mesh_tensors` onto the expert
meshes [[0],[2]] and [[1],[3]] (one Linear expert each), `moe_global_mesh_tensor` back, a
replicated head, MSE loss; AdamW.  Variants s0, s1, s3 (ShardingStage1/3 over dp), each without
and with FLAGS_enable_moe_utils=true (`s0u`, `s1u`, `s3u`; Paddle then lowers the n-d
shard-to-shard reshard through all_to_all); `s1f`: ShardingStage1 with enable_tensor_fusion.

Pipeline stages (`pp/`, PP_CASES): gen_pp.py's LLaMA on pp2 x dp2 and pp2 x dp2 x mp2 with
ShardingStage1("dp") and enable_tensor_fusion, every rank: `fuse` (no schedule); on pp2 x dp2
`FThenB.a2.fuse`, `1F1B.a2.fuse` (strategy.pipeline, accumulate_steps 2), `GM.a2.fuse`
(strategy.gradient_merge, k_steps 2), `VPP.a4.fuse`, `Eager1F1B.a4.fuse`, `ZBH1.a4.fuse` (the last two
Paddle refuses); on pp2 x dp2 x mp2 `1F1B.a4.fuse`; every snapshot the engine hooks give (dist_final,
jobs.txt, job.TYPE.ir with a schedule).

Names as gen_llm.py: GROUP/CASE.VARIANT.rR.SNAPSHOT.ir with SNAPSHOT in before_partition,
after_reshard, dense, startup_after_remove, startup_final (and startup.before; MoE: after_remove), or
GROUP/CASE.VARIANT.rR.error.txt where Paddle fails.

Usage (/tmp/paddle/bin/python):
  python gen_fusion.py --out DIR [-j N] [FILTER...]   # every job (FILTER: GROUP/CASE.VARIANT[.rR] prefixes)
  python gen_fusion.py --pack DIR DEST                # MoE: DEST/store/HASH.gz + DEST/MANIFEST.tsv (gen_llm.pack)
  python gen_fusion.py --pack-fusion DIR DEST         # fusion/, pp/: DEST/CASE.tar.xz (one xz archive a case)
  python gen_fusion.py --unpack DEST OUT

The engine steps and snapshots are gen_stage1.run_engine's (wrapped here only to pass the
strategy); each (group, case, variant, rank) runs in a fresh process with PYTHONHASHSEED=0,
PADDLE_TRAINER_ID=rank, PADDLE_TRAINERS_NUM=8.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_llm import pack, unpack  # noqa: E402
from oracle_capture import command_line, refusal, run_jobs, write_crash, write_snapshot  # noqa: E402

SNAPSHOTS = ["startup.before", "before_partition", "after_reshard", "dense", "startup_after_remove",
             "startup_final"]

# case -> (model, mesh, dims, mp): model "mlp" is gen_stage1's MLP (16-32-16), "llama" gen_llm's
# decoder (config clip)
FUSION_CASES = {
    "mlp_dp2": ("mlp", [0, 1], ["dp"]),
    "mlp_dp4": ("mlp", [0, 1, 2, 3], ["dp"]),
    "mlp_dp2mp2": ("mlp", [[0, 1], [2, 3]], ["dp", "mp"]),
    "llama_dp2": ("llama", [0, 1], ["dp"]),
    "llama_dp4": ("llama", [0, 1, 2, 3], ["dp"]),
    "llama_dp2mp2": ("llama", [[0, 1], [2, 3]], ["dp", "mp"]),
}
FUSION_VARIANTS = {  # variant -> strategy.sharding settings (None: no fusion)
    "s0": None,
    "s1": None,
    "fuse": {},
    "overlap": {"enable_overlap": True},
    "release": {"release_gradients": True},
    "buf0": {"comm_buffer_size_MB": 0},
    "ovrel": {"enable_overlap": True, "release_gradients": True},
}
MOE_CASES = {"moe_dp2ep2": ([[0, 1], [2, 3]], ["dp", "ep"])}
# pipeline (`pp/`): gen_pp.py's LLaMA on pp2 x dp2 ([[0,1],[2,3]], dims pp,dp), ShardingStage1("dp")
# with enable_tensor_fusion, every rank; variant = [MODE.aACC.]fuse: no schedule (gen_pp.py's JOBS
# model: one decoder layer a stage) or gen_pp.py's SCHED model with strategy.pipeline (FThenB, 1F1B)
# or strategy.gradient_merge (GM) at ACC accumulate steps
PP_CASES = {"llama_pp2dp2": [0, 1, 2, 3], "llama_pp2dp2mp2": list(range(8))}
PP_VARIANTS = {"llama_pp2dp2": ["fuse", "FThenB.a2.fuse", "1F1B.a2.fuse", "GM.a2.fuse",
                                "VPP.a4.fuse", "Eager1F1B.a4.fuse", "ZBH1.a4.fuse"],
               "llama_pp2dp2mp2": ["fuse", "1F1B.a4.fuse"]}  # (pp2 x dp2 x mp2: [[[0,1],[2,3]],[[4,5],[6,7]]])
PP_KEEP = ("before_partition", "after_reshard", "dense", "startup_final", "dist_final", "jobs")  # (and job.*)
MOE_VARIANTS = ["s0", "s1", "s3", "s0u", "s1u", "s3u", "s1f"]


def flat(ids):
    while isinstance(ids[0], list):
        ids = [r for row in ids for r in row]
    return ids


# the LLaMA programs without fusion (stage 0: distc's input; stage 1 unfused) are gen_llm.py's
# (tests/data/oracle/llm: clip/llama_dp2, llama_dp4, llama_dp2mp2), not made again here
LLAMA_SKIP = ("s0", "s1")


def jobs(outdir):
    """MoE first, then the MLP, then the LLaMA decoder (slowest)."""
    out = []
    for case, ranks in PP_CASES.items():
        for v in PP_VARIANTS[case]:
            out += [("pp", case, v, r, outdir) for r in ranks]
    for case, (ids, _) in MOE_CASES.items():
        for v in MOE_VARIANTS:
            out += [("moe", case, v, r, outdir) for r in flat(ids)]
    for model in ("mlp", "llama"):
        for case, (m, ids, _) in FUSION_CASES.items():
            for v in FUSION_VARIANTS:
                if m == model and not (m == "llama" and v in LLAMA_SKIP):
                    out += [("fusion", case, v, r, outdir) for r in flat(ids)]
    return out


def kept(group, case, variant, rank, snap) -> bool:
    """What is stored (tests/data/oracle/fusion): the MoE programs but the snapshots no test reads
    (startup.before, after_remove); every fusion file but startup.before and the LLaMA's unfused
    programs (gen_llm.py's, in llm/)."""
    if snap == "startup.before":
        return False
    if group == "pp":  # distc's inputs are gen_pp.py's (pp/, sched/): Paddle's results only
        return snap in PP_KEEP or snap.startswith("job.")
    if group == "moe":
        return snap != "after_remove"
    return not (case.startswith("llama") and variant in LLAMA_SKIP)


def pack_fusion(src, dest):
    """The fusion/ (and pp/) programs as one xz archive a case (gen_pp.py's pack_sched: the files
    of a case differ little between ranks and variants): DEST/CASE.tar.xz."""
    import re
    import shutil
    import tempfile

    from gen_pp import pack_sched
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "sched"))
        for group in ("fusion", "pp"):
            if not os.path.isdir(os.path.join(src, group)):
                continue
            for f in sorted(os.listdir(os.path.join(src, group))):
                m = re.match(r"(\w+)\.([\w.]+?)\.r(\d+)\.([\w.]+)\.(ir|txt)$", f)
                if m and (f.endswith(".error.txt") or kept(group, m.group(1), m.group(2), int(m.group(3)), m.group(4))):
                    shutil.copyfile(os.path.join(src, group, f), os.path.join(tmp, "sched", f))
        pack_sched(tmp, dest)


def select(src, out):
    import re
    import shutil
    n = 0
    for g in sorted(os.listdir(src)):
        for f in sorted(os.listdir(os.path.join(src, g))):
            m = re.match(r"(\w+)\.(\w+)\.r(\d+)\.([\w.]+)\.(ir|txt)$", f)
            if m and kept(g, m.group(1), m.group(2), int(m.group(3)), m.group(4)):
                os.makedirs(os.path.join(out, g), exist_ok=True)
                shutil.copyfile(os.path.join(src, g, f), os.path.join(out, g, f))
                n += 1
    print(f"{n} files selected", flush=True)


def done(job) -> bool:
    group, case, variant, rank, outdir = job
    base = os.path.join(outdir, group, f"{case}.{variant}.r{rank}")
    return os.path.exists(base + ".startup_final.ir") or os.path.exists(base + ".error.txt")


# ----------------------------------------------------------------------------- capture

def _with_strategy(settings):
    """gen_stage1.run_engine, with the strategy this variant needs (gen_llm.py and gen_stage1.py
    import run_engine from gen_stage1 when they run, so the wrapper is what they call)."""
    import gen_stage1

    orig = gen_stage1.run_engine

    def run_engine(model, dloader, loss, opt, snapshot_cb, timings=None, strategy=None, **kw):
        import paddle.distributed as dist
        if settings is not None:
            strategy = strategy or dist.Strategy()
            strategy.sharding.enable_tensor_fusion = True
            for k, v in settings.items():
                setattr(strategy.sharding, k, v)
        return orig(model, dloader, loss, opt, snapshot_cb, timings, strategy=strategy, **kw)

    gen_stage1.run_engine = run_engine


def fusion_capture(case, variant, snapshot_cb):
    import gen_llm
    import gen_stage1
    from paddle.distributed.fleet.utils import tensor_fusion_helper

    # the CPU wheel's device check (see the module doc)
    tensor_fusion_helper.__current_device_type__ = "gpu"
    model, ids, dims = FUSION_CASES[case]
    settings = FUSION_VARIANTS[variant]
    _with_strategy(settings)
    stage = "s0" if variant == "s0" else "s1"
    if model == "mlp":
        spec = gen_stage1.C(ids, dims, mp="mp" if "mp" in dims else None)
        gen_stage1.build_and_capture(spec, stage, snapshot_cb)
    else:
        name = {"llama_dp2": "llama_dp2", "llama_dp4": "llama_dp4", "llama_dp2mp2": "llama_dp2mp2"}[case]
        gen_llm.build_and_capture("clip", name, stage, snapshot_cb)


def pp_capture(case, variant, snapshot_cb):
    """gen_pp.py's LLaMA with tensor fusion: ``fuse`` without a schedule (config clip, gen_pp.JOBS's
    model), ``MODE.aACC.fuse`` gen_pp.SCHED's model with that schedule (or gradient merge)."""
    import gen_pp
    from paddle.distributed.fleet.utils import tensor_fusion_helper

    tensor_fusion_helper.__current_device_type__ = "gpu"  # the CPU wheel's device check
    _with_strategy({})
    parts = variant.split(".")
    sched = (parts[0], int(parts[1][1:])) if len(parts) == 3 else None
    gen_pp.build_and_capture("clip", case, "s1", snapshot_cb, sched)


def moe_capture(case, variant, snapshot_cb):
    import numpy as np
    import paddle
    import paddle.distributed as dist

    if variant.endswith("f"):  # ShardingStage1 with enable_tensor_fusion (the device check as above)
        from paddle.distributed.fleet.utils import tensor_fusion_helper

        tensor_fusion_helper.__current_device_type__ = "gpu"
        _with_strategy({})
    from gen_stage1 import run_engine

    if variant.endswith("u"):
        os.environ["FLAGS_enable_moe_utils"] = "true"
    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MOE_CASES[case]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    experts = [dist.ProcessMesh([[row[i]] for row in ids], dim_names=dims) for i in range(len(ids[0]))]
    B, S, H = 4, 8, 16
    R, Sh = dist.Replicate, dist.Shard

    class Expert(paddle.nn.Layer):
        def __init__(self, m):
            super().__init__()
            self.lin = paddle.nn.Linear(H, H, bias_attr=False)
            self.lin.weight = dist.shard_tensor(self.lin.weight, m, [R(), R()])

        def forward(self, x):
            return self.lin(x)

    class MoE(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.gate = paddle.nn.Linear(H, H, bias_attr=False)
            self.gate.weight = dist.shard_tensor(self.gate.weight, mesh, [R(), R()])
            self.experts = paddle.nn.LayerList([Expert(m) for m in experts])
            self.head = paddle.nn.Linear(H, H, bias_attr=False)
            self.head.weight = dist.shard_tensor(self.head.weight, mesh, [R(), R()])

        def forward(self, x):
            h = self.gate(x)                                          # [B, S, H]
            h = paddle.concat([paddle.unsqueeze(h, 1)] * len(experts), axis=1)  # [B, E, S, H]
            h = dist.reshard(h, mesh, [Sh(0), Sh(2)])                 # tokens over ep
            h = dist.reshard(h, mesh, [Sh(0), Sh(1)])                 # experts over ep (all-to-all)
            local = dist.auto_parallel.api.moe_sub_mesh_tensors(h, mesh, 1, [Sh(0), Sh(1)])
            outs = [e(t) for e, t in zip(self.experts, local)]
            h = dist.auto_parallel.api.moe_global_mesh_tensor(outs, mesh, [Sh(0), Sh(1)], 1)
            h = dist.reshard(h, mesh, [Sh(0), Sh(2)])                 # back (all-to-all)
            h = dist.reshard(h, mesh, [Sh(0), R()])
            return self.head(paddle.sum(h, axis=1))

    class DS(paddle.io.Dataset):
        def __init__(self, n):
            self.x = np.random.rand(n, S, H).astype("float32")
            self.y = np.random.rand(n, S, H).astype("float32")

        def __getitem__(self, i):
            return self.x[i], self.y[i]

        def __len__(self):
            return len(self.x)

    model = MoE()
    opt = paddle.optimizer.AdamW(learning_rate=0.01, parameters=model.parameters())
    base = variant.rstrip("uf")
    if base == "s0":
        opt = dist.shard_optimizer(opt)
    else:
        fn = {"s1": dist.ShardingStage1, "s3": dist.ShardingStage3}[base]
        opt = dist.shard_optimizer(opt, fn("dp", mesh))
    loader = paddle.io.DataLoader(DS(4 * B), batch_size=B)
    dloader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")
    run_engine(model, dloader, paddle.nn.MSELoss(), opt, snapshot_cb)


# ----------------------------------------------------------------------------- worker

def worker(group, case, variant, rank, outdir):
    assert os.environ.get("PADDLE_TRAINER_ID") == str(rank)
    base = os.path.join(outdir, group, f"{case}.{variant}.r{rank}")
    got = {}

    def cb(name, program):
        got.setdefault(name, str(program))

    try:
        {"fusion": fusion_capture, "moe": moe_capture, "pp": pp_capture}[group](case, variant, cb)
    except Exception as e:  # Paddle refused: its message, and the snapshots taken before
        with open(base + ".error.txt", "w", encoding="utf-8") as f:
            f.write(refusal(e) + "\n")
    names = sorted(got) if group == "pp" else SNAPSHOTS + (["after_remove"] if group == "moe" else [])
    for s in names:  # MoE: share_data_ before dense; pp: every snapshot (dist_final, jobs, job programs)
        if s in got:
            write_snapshot(f"{base}.{s}.{'txt' if s == 'jobs' else 'ir'}", got[s])


def run_worker(job):
    group, case, variant, rank, outdir = job
    os.makedirs(os.path.join(outdir, group), exist_ok=True)
    # a schedule needs the world size (gen_pp.py: a rank's stage is rank // (world / pp degree))
    world = str(len(PP_CASES[case])) if group == "pp" and variant != "fuse" else "8"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank),
               PADDLE_TRAINERS_NUM=world, GLOG_minloglevel="2")
    env.pop("FLAGS_enable_moe_utils", None)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", group, case, variant, str(rank),
                        outdir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tag = f"{group}/{case}.{variant}.r{rank}"
    if p.returncode != 0:
        print(f"  CRASH {tag}: {p.stdout.strip()[-2000:]}", flush=True)
        write_crash(os.path.join(outdir, group, f"{case}.{variant}.r{rank}.error.txt"), p.stdout)
    else:
        err = os.path.join(outdir, group, f"{case}.{variant}.r{rank}.error.txt")
        print("  done", tag, "(Paddle refused)" if os.path.exists(err) else "", flush=True)


def _pack(args, j):  # SRC DEST: the KEEP subset of SRC into DEST's store
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        select(args[0], tmp)
        pack(tmp, args[1])


def main(argv):
    return command_line(argv, __doc__, {
        "--worker": lambda a, j: worker(a[0], a[1], a[2], int(a[3]), a[4]),
        "--pack": _pack,
        "--pack-fusion": lambda a, j: pack_fusion(a[0], a[1]),  # SRC DEST: fusion/ programs -> DEST/CASE.tar.xz
        "--unpack": lambda a, j: unpack(a[0], a[1]),
        # DIR [FILTER ...]: a second run goes on where one stopped
        "--out": lambda a, j: run_jobs(run_worker, [jb for jb in jobs(a[0]) if not done(jb)], j, a[1:],
                                       lambda jb: f"{jb[0]}/{jb[1]}.{jb[2]}.r{jb[3]}"),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
