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
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SNAPSHOTS = ["before_partition", "after_reshard", "dense", "startup_after_remove", "startup_final"]
CONFIGS = ["clip", "amp"]
STAGES = ["s0", "s1", "s2", "s3"]

MESHES = {
    "llama_dp4": ([0, 1, 2, 3], ["dp"]),
    "llama_dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
    "llama_dp2mp4": ([[0, 1, 2, 3], [4, 5, 6, 7]], ["dp", "mp"]),
}

# the corpus holds rank 0 of these
CORPUS = {"llama_dp2mp2": STAGES, "llama_dp4": ["s0", "s3"]}

VOCAB, HIDDEN, HEADS, FFN, LAYERS, BATCH, SEQ = 64, 32, 4, 64, 2, 4, 8


def ranks_of(case):
    mesh = MESHES[case][0]
    flat = [r for row in mesh for r in row] if isinstance(mesh[0], list) else list(mesh)
    return flat


# ----------------------------------------------------------------------------- capture

def build_and_capture(config, case, stage, snapshot_cb):
    """Build the LLaMA model through Paddle's pipeline; snapshot_cb(name, program) at each
    snapshot. PADDLE_TRAINER_ID must be set before paddle is imported."""
    import math

    import numpy as np
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    from gen_stage1 import run_engine  # the same engine steps and snapshots as stage1/

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[case]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    has_mp = "mp" in dims

    def place(shard_dim=None):
        pl = [dist.Replicate() for _ in dims]
        if has_mp and shard_dim is not None:
            pl[dims.index("mp")] = dist.Shard(shard_dim)
        return pl

    def linear(i, o, shard_dim):
        lin = paddle.nn.Linear(i, o, bias_attr=False)
        lin.weight = dist.shard_tensor(lin.weight, mesh, place(shard_dim))
        return lin

    class RMSNorm(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter([HIDDEN], default_initializer=paddle.nn.initializer.Constant(1.0))
            self.weight = dist.shard_tensor(self.weight, mesh, place())

        def forward(self, x):
            v = (x * x).mean(-1, keepdim=True)
            return x * paddle.rsqrt(v + 1e-6) * self.weight

    class Block(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.ln1 = RMSNorm()
            self.ln2 = RMSNorm()
            self.q = linear(HIDDEN, HIDDEN, 1)
            self.k = linear(HIDDEN, HIDDEN, 1)
            self.v = linear(HIDDEN, HIDDEN, 1)
            self.o = linear(HIDDEN, HIDDEN, 0)
            self.gate = linear(HIDDEN, FFN, 1)
            self.up = linear(HIDDEN, FFN, 1)
            self.down = linear(FFN, HIDDEN, 0)

        def forward(self, h):
            x = self.ln1(h)
            hd = HIDDEN // HEADS

            def heads(t):
                return paddle.transpose(paddle.reshape(t, [0, 0, HEADS, hd]), [0, 2, 1, 3])

            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            s = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(hd))
            mask = paddle.triu(paddle.full([SEQ, SEQ], -10000.0, dtype="float32"), 1)
            p = F.softmax(s + mask, axis=-1)
            a = paddle.reshape(paddle.transpose(paddle.matmul(p, v), [0, 2, 1, 3]), [0, 0, HIDDEN])
            h = h + self.o(a)
            x = self.ln2(h)
            return h + self.down(F.silu(self.gate(x)) * self.up(x))

    class LLaMA(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = paddle.nn.Embedding(VOCAB, HIDDEN)
            self.embed.weight = dist.shard_tensor(self.embed.weight, mesh, place(1))
            self.blocks = paddle.nn.LayerList([Block() for _ in range(LAYERS)])
            self.norm = RMSNorm()
            self.head = linear(HIDDEN, VOCAB, 1)

        def forward(self, ids):
            h = self.embed(ids)
            for b in self.blocks:
                h = b(h)
            return self.head(self.norm(h))

    class Loss(paddle.nn.Layer):
        def forward(self, logits, label):
            return F.cross_entropy(logits, label).mean()

    class DS(paddle.io.Dataset):
        def __init__(self, n):
            self.x = np.random.randint(0, VOCAB, (n, SEQ)).astype("int64")
            self.y = np.random.randint(0, VOCAB, (n, SEQ)).astype("int64")

        def __getitem__(self, i):
            return self.x[i], self.y[i]

        def __len__(self):
            return len(self.x)

    model = LLaMA()
    clip = paddle.nn.ClipGradByGlobalNorm(1.0)
    strategy = dist.Strategy()
    if config == "clip":
        lr = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.01, T_max=10)
    else:
        lr = 0.01
        strategy.amp.enable = True
        strategy.amp.dtype = "bfloat16"
        strategy.amp.level = "O2"
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

def _last_line(e):
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


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
            msg = _last_line(e)
            if not msg.startswith(type(e).__name__ + ":"):
                msg = f"{type(e).__name__}: {msg}"
            f.write(msg + "\n")
        return
    missing = [s for s in SNAPSHOTS if s not in got]
    assert not missing, missing
    for s in SNAPSHOTS:
        with open(f"{base}.{s}.ir", "w", encoding="utf-8") as f:
            t = got[s]
            f.write(t if t.endswith("\n") else t + "\n")


def run_worker(job):
    config, case, stage, rank, outdir = job
    os.makedirs(os.path.join(outdir, config), exist_ok=True)
    env = dict(os.environ)
    env.update(PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM="8",
               GLOG_minloglevel="2")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", config, case, stage,
                        str(rank), outdir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    tag = f"{config}/{case}.{stage}.r{rank}"
    if p.returncode != 0:
        print(f"  CRASH {tag}: {p.stdout.strip()[-300:]}", flush=True)
        with open(os.path.join(outdir, config, f"{case}.{stage}.r{rank}.error.txt"), "w",
                  encoding="utf-8") as f:
            f.write("CRASH: " + (p.stdout.strip().splitlines() or ["?"])[-1] + "\n")
    else:
        print("  done", tag, flush=True)


def run_all(jobs, j):
    with ThreadPoolExecutor(max_workers=j) as ex:
        list(ex.map(run_worker, jobs))


def canon(text):
    m = {}
    return re.sub(r"ring_id:(\d+)", lambda g: "ring_id:R%d" % m.setdefault(g.group(1), len(m)), text)


def corpus_jobs(outdir):
    return [(c, case, s, 0, outdir) for c in CONFIGS for case, ss in CORPUS.items() for s in ss]


def all_jobs(outdir):
    return [(c, case, s, r, outdir) for c in CONFIGS for case in MESHES for s in STAGES
            for r in ranks_of(case)]


def verify(corpus_dir, j):
    bad = exact = n = 0
    with tempfile.TemporaryDirectory() as tmp:
        run_all(corpus_jobs(tmp), j)
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
    """src/{clip,amp}/NAME -> dest/store/HASH.gz (each distinct content once, gzipped) and
    dest/MANIFEST.tsv: name, stored hash, and `corpus` where the file is byte-identical to the
    shared corpus file of that name (rank 0 of the corpus cases: reproduced, checked here)."""
    os.makedirs(os.path.join(dest, "store"), exist_ok=True)
    rows, stored = [], set()
    for c in CONFIGS:
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
            rows.append((f"{c}/{f}", h, "corpus" if in_corpus else "oracle"))
    with open(os.path.join(dest, "MANIFEST.tsv"), "w", encoding="utf-8") as f:
        f.write("# name\tstored file (store/HASH.gz)\tcorpus: byte-identical to "
                "shared/corpus/paddle-3.3.1/llm/name; oracle: generated here only\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    print(f"{len(rows)} files -> {len(stored)} stored", flush=True)


def unpack(dest, out):
    for line in open(os.path.join(dest, "MANIFEST.tsv"), encoding="utf-8"):
        if line.startswith("#"):
            continue
        name, h, _ = line.rstrip("\n").split("\t")
        os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
        data = gzip.decompress(open(os.path.join(dest, "store", h + ".gz"), "rb").read())
        open(os.path.join(out, name), "wb").write(data)


def main(argv):
    j = 2
    if "-j" in argv:
        i = argv.index("-j")
        j = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if argv[:1] == ["--worker"]:
        worker(argv[1], argv[2], argv[3], int(argv[4]), argv[5])
        return 0
    if argv[:1] == ["--verify"]:
        return 0 if verify(argv[1], j) else 1
    if argv[:1] == ["--pack"]:
        pack(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
        return 0
    if argv[:1] == ["--unpack"]:
        unpack(argv[1], argv[2])
        return 0
    if argv[:1] == ["--out"]:
        out = argv[1]
        jobs = all_jobs(out)
        if len(argv) > 2:  # filter: CONFIG/CASE.sN
            jobs = [jb for jb in jobs if any(f"{jb[0]}/{jb[1]}.{jb[2]}".startswith(a) for a in argv[2:])]
        run_all(jobs, j)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
