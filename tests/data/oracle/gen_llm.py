#!/usr/bin/env python3
"""Generate LLaMA-style training programs with real PaddlePaddle 3.3.1 (CPU), ZeRO stages 0-3.

Same scheme as shared/corpus/paddle-3.3.1/llm (see its README): CONFIG/CASE.sN.rR.SNAPSHOT.ir
with SNAPSHOT in before_partition, after_reshard, dense, startup_after_remove, startup_final,
or CONFIG/CASE.sN.rR.error.txt (last line of the exception) where Paddle fails; CONFIG is
`clip` (ClipGradByGlobalNorm + CosineAnnealingDecay) or `amp` (ClipGradByGlobalNorm +
strategy.amp bfloat16 O2).

Usage (/work/paddle/bin/python or any venv with paddlepaddle==3.3.1 and numpy<2.3):
  python gen_llm.py --verify CORPUS_LLM_DIR    # corpus cases into a temp dir, diffed byte for byte
  python gen_llm.py --out DIR [-j N]           # every case, stage and rank -> DIR/{clip,amp}/
  python gen_llm.py --pack DIR DEST CORPUS      # compact form for tests: DEST/store/HASH.gz (each
                                               # distinct file once, gzipped) + DEST/MANIFEST.tsv
                                               # (name -> stored file; `corpus` marks the files
                                               # byte-identical to CORPUS, checked)
  python gen_llm.py --unpack DEST OUT          # back to plain files (for inspection)
  python gen_llm.py --out DIR --more [FILTER]  # the MORE configurations (other meshes, optimizers,
                                               # shapes) -> DIR/CONFIG/ (and gen_stage1.py --out DIR
                                               # --more: DIR/mlp/)
  python gen_llm.py --pack-more DIR DEST       # the KEEP subset of DIR into DEST's manifest + store

Each (config, case, stage, rank) runs in a fresh Python process with PYTHONHASHSEED=0,
PADDLE_TRAINER_ID=rank and PADDLE_TRAINERS_NUM=8 set before `import paddle`.
"""
import gzip
import hashlib
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# Paddle's error as `Type: last line` (refusal) or its last line (_last_line, kept for importers)
from oracle_capture import command_line, last_line as _last_line, refusal, run_jobs, sample, write_snapshot  # noqa: E402,F401
SNAPSHOTS = ["before_partition", "after_reshard", "dense", "startup_after_remove", "startup_final"]
CONFIGS = ["clip", "amp"]
STAGES = ["s0", "s1", "s2", "s3"]

MESHES = {
    "llama_dp4": ([0, 1, 2, 3], ["dp"]),
    "llama_dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
    "llama_dp2mp4": ([[0, 1, 2, 3], [4, 5, 6, 7]], ["dp", "mp"]),
}
BASE_MESHES = list(MESHES)

# More configurations (`--more`): (config, case, stages, ranks).  Configs beyond clip/amp:
# `sgd` (SGD + global-norm clip, constant LR); `noclip` (AdamW(weight_decay=0, beta1=0.85,
# beta2=0.99, epsilon=1e-6), no clip, constant LR); `amsgrad` (AdamW(amsgrad=True) + global-norm
# clip); `clipnorm` (AdamW + ClipGradByNorm(1.0), per tensor); `decay` (AdamW(weight_decay=0.05),
# apply_decay_param_fun: no decay for the RMSNorm weights, + global-norm clip); under strategy.amp
# as in `amp`: `ampnorm` (clipnorm), `ampsgd` (sgd), `ampams` (amsgrad), `ampnoclip` (noclip),
# `ampo1` (amp at level O1).  Paddle fails at stage 0 already with ClipGradByValue
# (`NotImplementedError`) and with AMP in float16 (`_local_shape is only for distdense tensor`).
# Cases beyond the three meshes: dp2; dp degree 1 (mesh [[0,1]] dims dp,mp); dp4 x mp2 (8 ranks);
# dp x mp with process ids [[0,2],[1,3]]; llama62 (vocab 62: the embedding's first dim does not
# divide by 4); llama_vp (vocab-parallel embedding, Shard(0) over mp); a 3-D mesh dp x mp x x
# (nothing sharded over x); dp4 on ranks 4-7 (llama_dp4o) and on ids [3,2,1,0] (llama_dp4r).
# (mp x dp, dp the second mesh dim, fails in Paddle's completion at stage 0 already: `Multiple
# Tensor Axes [a,k] is sharded by same mesh dimension [0]`.)
MESHES.update({
    "llama_dp2": ([0, 1], ["dp"]),
    "llama_dp1mp2": ([[0, 1]], ["dp", "mp"]),
    "llama_dp4mp2": ([[0, 1], [2, 3], [4, 5], [6, 7]], ["dp", "mp"]),
    "llama_dp2mp2p": ([[0, 2], [1, 3]], ["dp", "mp"]),
    "llama62_dp4": ([0, 1, 2, 3], ["dp"]),
    "llama_vp_dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
    "llama_dp2mp2x2": ([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], ["dp", "mp", "x"]),
    "llama_dp4o": ([4, 5, 6, 7], ["dp"]),
    "llama_dp4r": ([3, 2, 1, 0], ["dp"]),
})
CASE_VOCAB = {"llama62_dp4": 62}
CASE_EMBED_SHARD = {"llama_vp_dp2mp2": 0}  # vocab-parallel embedding: weight Shard(0) over mp
MORE = [
    ("clip", "llama_dp2", STAGES, None),
    ("clip", "llama_dp1mp2", STAGES, None),
    ("clip", "llama_dp4mp2", ["s0", "s1"], None),
    ("clip", "llama_dp2mp2p", STAGES, None),
    ("clip", "llama62_dp4", STAGES, None),
    ("amp", "llama_dp2", STAGES, None),
    ("amp", "llama_dp4mp2", ["s0", "s1"], [0, 5]),
    ("amp", "llama_dp2mp2p", ["s0", "s1"], [1, 2]),
    ("sgd", "llama_dp4", STAGES, None),
    ("sgd", "llama_dp2mp2", STAGES, None),
    ("noclip", "llama_dp2mp2", STAGES, None),
    ("noclip", "llama_dp4", STAGES, None),
    ("amsgrad", "llama_dp4", ["s0", "s1", "s3"], None),
    ("amsgrad", "llama_dp2mp2", ["s0", "s1"], None),
    ("clipnorm", "llama_dp4", ["s0", "s1", "s3"], None),
    ("clipnorm", "llama_dp2mp2", ["s0", "s1"], None),
    ("decay", "llama_dp2mp2", ["s0", "s1"], None),
    ("clip", "llama_vp_dp2mp2", STAGES, None),
    ("clip", "llama_dp2mp2x2", ["s0", "s1"], [0, 5]),
    ("clip", "llama_dp4o", ["s0", "s1", "s3"], [4, 6]),
    ("clip", "llama_dp4r", ["s0", "s1", "s3"], None),
    ("ampnorm", "llama_dp4", ["s0", "s1", "s3"], None),
    ("ampo1", "llama_dp4", ["s0", "s1"], [0, 1]),
    ("ampsgd", "llama_dp4", ["s0", "s1", "s3"], [0, 1]),
    ("ampsgd", "llama_dp2mp2", ["s0", "s1"], [0, 3]),
    ("ampams", "llama_dp4", ["s0", "s1"], [0, 1]),
    ("ampnoclip", "llama_dp4", ["s0", "s1", "s3"], [0, 1]),
    ("ampnorm", "llama_dp2mp2", ["s0", "s1"], None),
]  # ranks None: every rank of the mesh

# What of the --more output is stored (tests/data/oracle/llm, `--pack-more`): (config, case, stage,
# ranks).  Each kept rank also keeps its stage-0 inputs (before_partition, startup_after_remove);
# where Paddle failed, its error file is kept for every rank of the mesh.  `mlp` is
# gen_stage1.py --more (its startup.before / after_remove / startup_after_reshard are not kept).
KEEP = [
    ("clip", "llama_dp2", "s1", [0, 1]), ("clip", "llama_dp2", "s2", [0]), ("clip", "llama_dp2", "s3", [1]),
    ("clip", "llama_dp1mp2", "s1", [0, 1]), ("clip", "llama_dp1mp2", "s3", [0, 1]),
    ("clip", "llama_dp4mp2", "s1", [0, 5]),
    ("clip", "llama_dp2mp2p", "s1", [1, 2]), ("clip", "llama_dp2mp2p", "s3", [0, 1, 2, 3]),
    ("clip", "llama62_dp4", "s1", [0, 1, 2, 3]),
    ("clip", "llama62_dp4", "s3", [0, 1, 2, 3]),
    ("clip", "llama_vp_dp2mp2", "s1", [1]), ("clip", "llama_vp_dp2mp2", "s3", [0, 1, 2, 3]),
    ("clip", "llama_dp2mp2x2", "s1", [5]),
    ("clip", "llama_dp4o", "s1", [6]), ("clip", "llama_dp4o", "s3", [4]),
    ("clip", "llama_dp4r", "s1", [0, 1, 2, 3]),
    ("amp", "llama_dp2", "s1", [0, 1]), ("amp", "llama_dp2", "s2", [0, 1]),
    ("sgd", "llama_dp4", "s1", [0]), ("sgd", "llama_dp4", "s3", [3]),
    ("sgd", "llama_dp2mp2", "s1", [3]), ("sgd", "llama_dp2mp2", "s3", [0, 1, 2, 3]),
    ("noclip", "llama_dp4", "s3", [0]),
    ("amsgrad", "llama_dp4", "s1", [0]), ("amsgrad", "llama_dp4", "s3", [2]),
    ("clipnorm", "llama_dp4", "s1", [0]), ("clipnorm", "llama_dp4", "s3", [0, 3]),
    ("ampnorm", "llama_dp4", "s1", [0]), ("ampnorm", "llama_dp4", "s3", [1]),
    ("ampnorm", "llama_dp2mp2", "s1", [2]),
    ("decay", "llama_dp2mp2", "s1", [0]),
    ("ampo1", "llama_dp4", "s1", [1]), ("ampsgd", "llama_dp4", "s1", [0]), ("ampsgd", "llama_dp4", "s3", [1]),
    ("ampsgd", "llama_dp2mp2", "s1", [3]), ("ampams", "llama_dp4", "s1", [1]),
    ("ampnoclip", "llama_dp4", "s1", [0]), ("ampnoclip", "llama_dp4", "s3", [1]),
    ("mlp", "mlp_dp2_adamw", "s1", [0, 1]), ("mlp", "mlp_dp2_adamw", "s3", [0, 1]),
    ("mlp", "mlp_dp4_adamw", "s3", [0, 1, 2, 3]), ("mlp", "mlp_dp2_sgd", "s3", [0, 1]),
    ("mlp", "mlp_dp2mp2_adamw", "s2", [1]), ("mlp", "mlp_dp2mp2_adamw", "s3", [0, 1, 2, 3]),
    ("mlp", "mlp15_dp4_adamw", "s3", [0, 1, 3]), ("mlp", "mlp_dp8_adamw", "s1", [7]),
    ("mlp", "mlp_dp8_adamw", "s3", [0, 7]),
    ("mlp", "mlpb_dp2mp2_adamw", "s1", [0, 3]), ("mlp", "mlpb_dp2mp2_adamw", "s3", [0, 1, 2, 3]),
    ("mlp", "mlpb4l_dp2mp2_adamw", "s3", [0, 1, 2, 3]), ("mlp", "mlpb_dp4mp2_adamw", "s3", [0, 3, 4, 7]),
    ("mlp", "mlpb_mp2dp2_adamw", "s3", [0, 1, 2, 3]), ("mlp", "mlpbn_dp2mp2_adamw", "s3", [0, 1, 2, 3]),
]
KEEP_SNAPSHOTS = SNAPSHOTS + ["error"]

# the corpus holds rank 0 of these
CORPUS = {"llama_dp2mp2": STAGES, "llama_dp4": ["s0", "s3"]}

VOCAB, HIDDEN, HEADS, FFN, LAYERS, BATCH, SEQ = 64, 32, 4, 64, 2, 4, 8


def ranks_of(case):
    mesh = MESHES[case][0]
    flat = [r for row in mesh for r in row] if isinstance(mesh[0], list) else list(mesh)
    return flat


# ----------------------------------------------------------------------------- capture

def llama_layers(vocab):
    """The decoder's layers (gen_pp.py builds its stages from them too): samples/llama_model.py's, the
    model of train_llama.py, in a process that has imported paddle: ``RMSNorm(mesh)``,
    ``Block(mesh)``, ``linear(mesh, in, out, shard_dim)`` place their weights over the mesh's `mp`
    dim (replicated without one); the loss; a dataset of ``vocab`` (``DS(n)``)."""
    import functools

    L = sample("llama_model")
    assert (L.HIDDEN, L.HEADS, L.FFN, L.SEQ) == (HIDDEN, HEADS, FFN, SEQ)
    return L.RMSNorm, L.Block, L.Loss, functools.partial(L.TokenData, vocab=vocab), L.linear


def build_and_capture(config, case, stage, snapshot_cb):
    """Build the LLaMA model through Paddle's pipeline; snapshot_cb(name, program) at each
    snapshot. PADDLE_TRAINER_ID must be set before paddle is imported."""
    import numpy as np
    import paddle
    import paddle.distributed as dist

    # distc/capture/hooks.py's, through gen_stage1 (looked up when called: gen_fusion.py wraps it there)
    from gen_stage1 import run_engine

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[case]
    vocab = CASE_VOCAB.get(case, VOCAB)
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    has_mp = "mp" in dims

    def place(shard_dim=None):
        pl = [dist.Replicate() for _ in dims]
        if has_mp and shard_dim is not None:
            pl[dims.index("mp")] = dist.Shard(shard_dim)
        return pl

    RMSNorm, Block, Loss, DS, linear = llama_layers(vocab)

    class LLaMA(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = paddle.nn.Embedding(vocab, HIDDEN)
            self.embed.weight = dist.shard_tensor(self.embed.weight, mesh, place(CASE_EMBED_SHARD.get(case, 1)))
            self.blocks = paddle.nn.LayerList([Block(mesh) for _ in range(LAYERS)])
            self.norm = RMSNorm(mesh)
            self.head = linear(mesh, HIDDEN, vocab, 1)

        def forward(self, ids):
            h = self.embed(ids)
            for b in self.blocks:
                h = b(h)
            return self.head(self.norm(h))

    model = LLaMA()
    clip = paddle.nn.ClipGradByGlobalNorm(1.0)
    strategy = dist.Strategy()
    if config == "clip":
        lr = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.01, T_max=10)
    else:
        lr = 0.01
    if config in ("amp", "ampnorm", "ampo1", "ampsgd", "ampams", "ampnoclip"):
        strategy.amp.enable = True
        strategy.amp.dtype = "bfloat16"
        strategy.amp.level = "O1" if config == "ampo1" else "O2"
    if config in ("sgd", "ampsgd"):
        opt = paddle.optimizer.SGD(learning_rate=lr, parameters=model.parameters(), grad_clip=clip)
    elif config in ("amsgrad", "ampams"):
        opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), grad_clip=clip,
                                     amsgrad=True)
    elif config in ("clipnorm", "ampnorm"):
        opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(),
                                     grad_clip=paddle.nn.ClipGradByNorm(1.0))
    elif config == "decay":
        opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), grad_clip=clip,
                                     weight_decay=0.05,
                                     apply_decay_param_fun=lambda n: not n.startswith("create_parameter"))
    elif config in ("noclip", "ampnoclip"):
        opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), weight_decay=0.0,
                                     beta1=0.85, beta2=0.99, epsilon=1e-6)
    else:
        opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), grad_clip=clip)
    n = int(stage[1:])
    if n == 0:
        opt = dist.shard_optimizer(opt)
    else:
        fn = {1: dist.ShardingStage1, 2: dist.ShardingStage2, 3: dist.ShardingStage3}[n]
        opt = dist.shard_optimizer(opt, fn("dp", mesh))
    loader = paddle.io.DataLoader(DS(4 * BATCH), batch_size=BATCH)
    dloader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")

    run_engine(model, dloader, Loss(), opt, snapshot_cb, strategy=strategy)


# ----------------------------------------------------------------------------- worker

def worker(config, case, stage, rank, outdir):
    assert os.environ.get("PADDLE_TRAINER_ID") == str(rank)
    base = os.path.join(outdir, config, f"{case}.{stage}.r{rank}")
    got = {}

    def cb(name, program):
        if name not in got:
            got[name] = str(program)

    try:
        build_and_capture(config, case, stage, cb)
    except Exception as e:
        # Paddle refused: only its message is kept (like the corpus)
        with open(base + ".error.txt", "w", encoding="utf-8") as f:
            f.write(refusal(e) + "\n")
        return
    missing = [s for s in SNAPSHOTS if s not in got]
    assert not missing, missing
    for s in SNAPSHOTS:
        write_snapshot(f"{base}.{s}.ir", got[s])


def run_worker(job):
    config, case, stage, rank, outdir = job
    os.makedirs(os.path.join(outdir, config), exist_ok=True)
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM="8",
               GLOG_minloglevel="2")
    err = os.path.join(outdir, config, f"{case}.{stage}.r{rank}.error.txt")
    for attempt in range(3):  # dy2static's temporary module files can clash between parallel processes
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", config, case, stage,
                            str(rank), outdir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if attempt == 2 or not (os.path.exists(err) and "transformed from AST" in open(err, encoding="utf-8").read()):
            break
        os.remove(err)
    tag = f"{config}/{case}.{stage}.r{rank}"
    if p.returncode != 0:
        print(f"  CRASH {tag}: {p.stdout.strip()[-300:]}", flush=True)
        with open(os.path.join(outdir, config, f"{case}.{stage}.r{rank}.error.txt"), "w",
                  encoding="utf-8") as f:
            f.write("CRASH: " + (p.stdout.strip().splitlines() or ["?"])[-1] + "\n")
    else:
        print("  done", tag, flush=True)


def canon(text):
    m = {}
    return re.sub(r"ring_id:(\d+)", lambda g: "ring_id:R%d" % m.setdefault(g.group(1), len(m)), text)


def corpus_jobs(outdir):
    return [(c, case, s, 0, outdir) for c in CONFIGS for case, ss in CORPUS.items() for s in ss]


def all_jobs(outdir):
    return [(c, case, s, r, outdir) for c in CONFIGS for case in BASE_MESHES for s in STAGES
            for r in ranks_of(case)]


def more_jobs(outdir):
    return [(c, case, s, r, outdir) for c, case, ss, rs in MORE for s in ss
            for r in (rs or ranks_of(case))]


def verify(corpus_dir, j):
    bad = exact = n = 0
    with tempfile.TemporaryDirectory() as tmp:
        run_jobs(run_worker, corpus_jobs(tmp), j)
        for c in CONFIGS:
            ours = sorted(os.listdir(os.path.join(tmp, c)))
            theirs = sorted(os.listdir(os.path.join(corpus_dir, c)))
            if ours != theirs:
                print(c, "file sets differ:", sorted(set(ours) ^ set(theirs)))
                bad += 1
            for f in sorted(set(ours) & set(theirs)):
                a = open(os.path.join(tmp, c, f), encoding="utf-8").read()
                b = open(os.path.join(corpus_dir, c, f), encoding="utf-8").read()
                n += 1
                exact += a == b
                if a != b:
                    print("DIFF", c, f, "(ring ids only)" if canon(a) == canon(b) else "")
                    bad += 1
    print(f"verified {n} files against {corpus_dir}: {bad} mismatches, {exact} byte-identical")
    return bad == 0


# ----------------------------------------------------------------------------- compact storage

def pack(src, dest, corpus=None):
    """src/CONFIG/NAME -> dest/store/HASH.gz (each distinct content once, gzipped) and
    dest/MANIFEST.tsv: name, stored hash, and `corpus` where the file is byte-identical to the
    shared corpus file of that name (rank 0 of the corpus cases: reproduced, checked here).
    Rows already in the manifest for names not in src are kept (so `--more` adds to the store)."""
    os.makedirs(os.path.join(dest, "store"), exist_ok=True)
    man = os.path.join(dest, "MANIFEST.tsv")
    rows = {}
    if os.path.exists(man):
        for line in open(man, encoding="utf-8"):
            if not line.startswith("#") and line.strip():
                name, h, kind = line.rstrip("\n").split("\t")
                rows[name] = (h, kind)
    stored = {f[:-3] for f in os.listdir(os.path.join(dest, "store"))}
    n = 0
    for c in sorted(os.listdir(src)):
        for f in sorted(os.listdir(os.path.join(src, c))):
            data = open(os.path.join(src, c, f), "rb").read()
            cp = os.path.join(corpus, c, f) if corpus else None
            in_corpus = bool(cp and os.path.exists(cp))
            if in_corpus and open(cp, "rb").read() != data:
                raise SystemExit(f"{c}/{f} differs from the corpus file")
            h = hashlib.sha256(data).hexdigest()[:16]
            if h not in stored:
                stored.add(h)
                with open(os.path.join(dest, "store", h + ".gz"), "wb") as out:
                    out.write(gzip.compress(data, compresslevel=9, mtime=0))
            rows[f"{c}/{f}"] = (h, "corpus" if in_corpus else "oracle")
            n += 1
    base = [r for r in rows if r.split("/")[0] in CONFIGS and r.split("/")[1].split(".")[0] in BASE_MESHES]
    order = base + sorted(r for r in rows if r not in set(base))  # the original rows first, as before
    with open(man, "w", encoding="utf-8") as f:
        f.write("# name\tstored file (store/HASH.gz)\tcorpus: byte-identical to "
                "shared/corpus/paddle-3.3.1/llm/name; oracle: generated here only\n")
        for name in order:
            f.write("\t".join((name,) + rows[name]) + "\n")
    print(f"{n} files packed; {len(rows)} names -> {len(stored)} stored", flush=True)


def select_more(src, out):
    """Copy the KEEP subset of a --more output tree (src/CONFIG/NAME) to out/CONFIG/NAME."""
    import shutil
    want = set()
    for c, case, stage, ranks in KEEP:
        for r in ranks:
            want |= {(c, case, stage, r), (c, case, "s0", r)}
    n = 0
    for c in sorted(os.listdir(src)):
        for f in sorted(os.listdir(os.path.join(src, c))):
            m = re.match(r"(\w+)\.(s\d)\.r(\d+)\.(\w+)\.(ir|txt)$", f)
            if not m or m.group(4) not in KEEP_SNAPSHOTS:
                continue
            case, stage, r, snap = m.group(1), m.group(2), int(m.group(3)), m.group(4)
            kept = (c, case, stage, r) in want
            if stage == "s0" and (c, case, "s0", r) in want and not any(
                    k[:3] == (c, case, "s0") and r in k[3] for k in KEEP):
                kept = snap in ("before_partition", "startup_after_remove")  # inputs only
            if snap == "error":  # Paddle's refusals: every rank of a kept (config, case, stage)
                kept = any(k[:3] == (c, case, stage) for k in KEEP)
            if kept:
                os.makedirs(os.path.join(out, c), exist_ok=True)
                shutil.copyfile(os.path.join(src, c, f), os.path.join(out, c, f))
                n += 1
    print(f"{n} files selected", flush=True)


def unpack(dest, out):
    for line in open(os.path.join(dest, "MANIFEST.tsv"), encoding="utf-8"):
        if line.startswith("#"):
            continue
        name, h, _ = line.rstrip("\n").split("\t")
        os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
        data = gzip.decompress(open(os.path.join(dest, "store", h + ".gz"), "rb").read())
        open(os.path.join(out, name), "wb").write(data)


def _pack_more(args, j):  # SRC DEST: the KEEP subset of SRC into DEST's store
    with tempfile.TemporaryDirectory() as tmp:
        select_more(args[0], tmp)
        pack(tmp, args[1])


def _out(args, j):  # DIR [--more] [FILTER: CONFIG/CASE.sN ...]
    more = args[1:2] == ["--more"]
    jobs = more_jobs(args[0]) if more else all_jobs(args[0])
    run_jobs(run_worker, jobs, j, args[2 if more else 1:], lambda jb: f"{jb[0]}/{jb[1]}.{jb[2]}")


def main(argv):
    return command_line(argv, __doc__, {
        "--worker": lambda a, j: worker(a[0], a[1], a[2], int(a[3]), a[4]),
        "--verify": lambda a, j: 0 if verify(a[0], j) else 1,
        "--pack": lambda a, j: pack(a[0], a[1], a[2] if len(a) > 2 else None),
        "--pack-more": _pack_more,
        "--unpack": lambda a, j: unpack(a[0], a[1]),
        "--out": _out,
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
