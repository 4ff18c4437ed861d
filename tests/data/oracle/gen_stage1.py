#!/usr/bin/env python3
"""Generate stage1 (ZeRO-1) pipeline snapshots with real PaddlePaddle 3.3.1 (CPU).

Same scheme as shared/corpus/paddle-3.3.1/stage1: CASE.sS.rR.SNAPSHOT.ir with SNAPSHOT in
  startup.before, before_partition, after_reshard, after_remove, dense,
  startup_after_remove, startup_after_reshard, startup_final
or CASE.sS.rR.error.txt (last line of the exception) when Paddle refuses the case.

Usage (throwaway venv with paddlepaddle==3.3.1 and numpy<2.3):
  /tmp/paddle/bin/python gen_stage1.py                   # all cases -> ./stage1/
  /tmp/paddle/bin/python gen_stage1.py --verify CORPUS   # rank-0 corpus cases into a temp dir,
                                                         # diffed against CORPUS (ring ids renamed)
  /tmp/paddle/bin/python gen_stage1.py --out DIR [CASE...]
  /tmp/paddle/bin/python gen_stage1.py --list            # markdown table of the cases
  /tmp/paddle/bin/python gen_stage1.py --out DIR --more  # MORE_CASES (stages 2, 3; dp2, dp8) ->
                                                         # DIR/mlp/, stored by gen_llm.py --pack

Each (case, stage, rank) runs in a fresh Python process with PYTHONHASHSEED=0,
PADDLE_TRAINER_ID=rank and PADDLE_TRAINERS_NUM=8 set before `import paddle`.
The module is also imported by bench/gen_big.py (build_and_capture()).
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# the engine hooks are distc's (distc/capture/hooks.py, as `distc capture` runs them); run_engine is
# re-exported here for the generators that import it from this module
from oracle_capture import last_line as _last_line, run_engine, sample, write_snapshot  # noqa: E402,F401
OUT = os.path.join(HERE, "stage1")

SNAPSHOTS = ["startup.before", "before_partition", "after_reshard", "after_remove", "dense",
             "startup_after_remove", "startup_after_reshard", "startup_final"]


# ----------------------------------------------------------------------------- cases
# mesh: nested process ids; dims: mesh dim names; widths: Linear sizes (16,32,16 is
# Linear(16,32) -> relu -> Linear(32,16)); mp: mesh dim name for tensor parallelism (first
# weight Shard(1), second Shard(0), alternating for deeper MLPs) or None; opt: optimizer.

def C(mesh, dims, widths=(16, 32, 16), mp=None, opt="adamw", ranks=(0,), stages=("s0", "s1"),
      batch=4, bias_mp=False, wrap=True):
    # wrap=False: the optimizer is not given to dist.shard_optimizer (which refuses all but AdamW
    # and SGD); Paddle then prints `<#AttrNull>` for results without a dist attr (stage 0 only)
    return dict(mesh=mesh, dims=list(dims), widths=list(widths), mp=mp, opt=opt, ranks=list(ranks),
                stages=list(stages), batch=batch, bias_mp=bias_mp, wrap=wrap)


CORPUS_CASES = {
    "mlp_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], mp="mp", ranks=(0, 1, 2, 3)),
    "mlp_dp4_adamw": C([0, 1, 2, 3], ["dp"], ranks=(0, 1, 2, 3)),
    "mlp_dp2_sgd": C([0, 1], ["dp"], opt="sgd", ranks=(0, 1)),
}

NEW_CASES = {
    # dp is the second mesh dim
    "mlp_mp2dp2_adamw": C([[0, 1], [2, 3]], ["mp", "dp"], mp="mp", ranks=(0, 1, 2, 3)),
    # 3-D mesh: dp x mp x sep-like third dim that nothing is sharded over
    "mlp_dp2mp2x2_adamw": C([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], ["dp", "mp", "x"], mp="mp",
                            ranks=(0, 3, 5)),
    # 8 ranks: dp2 x mp4 (distc shard --all-ranks is tested on it)
    "mlp_dp2mp4_adamw": C([[0, 1, 2, 3], [4, 5, 6, 7]], ["dp", "mp"], mp="mp"),
    # uneven: 15 and 30 do not divide by 4 (ZeRO-1 shards moments over dp4)
    "mlp15_dp4_adamw": C([0, 1, 2, 3], ["dp"], widths=(15, 30, 15), ranks=(0, 1, 3)),
    "mlp15_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], widths=(15, 30, 15), mp="mp",
                            ranks=(0, 3)),
    # deeper MLP: 4 Linear layers
    "mlp4l_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], widths=(16, 32, 32, 32, 16), mp="mp",
                            ranks=(0, 1)),
    # other optimizers
    # (Paddle 3.3.1 refuses these in dist.shard_optimizer, with or without ShardingStage1)
    "mlp_dp2mp2_adam": C([[0, 1], [2, 3]], ["dp", "mp"], mp="mp", opt="adam"),
    "mlp_dp2mp2_momentum": C([[0, 1], [2, 3]], ["dp", "mp"], mp="mp", opt="momentum"),
    "mlp_dp4_momentum": C([0, 1, 2, 3], ["dp"], opt="momentum"),
    # the same optimizer not wrapped by shard_optimizer: `<#AttrNull>` in op_dist_attr
    "mlp_dp2mp2_momentum_nowrap": C([[0, 1], [2, 3]], ["dp", "mp"], mp="mp", opt="momentum", stages=("s0",),
                                    wrap=False),
}

# `--more` (gen_llm.py's store, see its --pack): stages 2 and 3 of the MLP, meshes dp2 and dp8
MORE_CASES = {
    "mlp_dp2_adamw": C([0, 1], ["dp"], ranks=(0, 1), stages=("s0", "s1", "s3")),
    "mlp_dp4_adamw": C([0, 1, 2, 3], ["dp"], ranks=(0, 1, 2, 3), stages=("s0", "s2", "s3")),
    "mlp_dp2_sgd": C([0, 1], ["dp"], opt="sgd", ranks=(0, 1), stages=("s0", "s3")),
    "mlp_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], mp="mp", ranks=(0, 1, 2, 3), stages=("s0", "s2", "s3")),
    "mlp15_dp4_adamw": C([0, 1, 2, 3], ["dp"], widths=(15, 30, 15), ranks=(0, 1, 3), stages=("s0", "s3")),
    # the column-parallel Linear's bias sharded over mp too (1-D: ZeRO has no other axis for it)
    "mlpb_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], mp="mp", ranks=(0, 1, 2, 3),
                           stages=("s0", "s1", "s3"), bias_mp=True),
    "mlp_dp8_adamw": C([0, 1, 2, 3, 4, 5, 6, 7], ["dp"], ranks=(0, 7), stages=("s0", "s1", "s3"), batch=8),
    # ZeRO-3 with the sharded bias elsewhere (issue 16, the matmul rule that keeps the larger free
    # axis on dp): 4 Linear layers (the feature split carried through two more layers); dp4 x mp2;
    # the mp-first mesh (dp is mesh dim 1); and a 4-wide head under a batch of 8, where the rule
    # keeps the batch split (the stage-1 forward)
    "mlpb4l_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], widths=(16, 32, 32, 32, 16), mp="mp",
                             ranks=(0, 1, 2, 3), stages=("s0", "s3"), bias_mp=True),
    "mlpb_dp4mp2_adamw": C([[0, 1], [2, 3], [4, 5], [6, 7]], ["dp", "mp"], mp="mp", ranks=(0, 3, 4, 7),
                           stages=("s0", "s3"), bias_mp=True, batch=8),
    "mlpb_mp2dp2_adamw": C([[0, 1], [2, 3]], ["mp", "dp"], mp="mp", ranks=(0, 1, 2, 3), stages=("s0", "s3"),
                           bias_mp=True),
    "mlpbn_dp2mp2_adamw": C([[0, 1], [2, 3]], ["dp", "mp"], widths=(16, 32, 4), mp="mp", ranks=(0, 1, 2, 3),
                            stages=("s0", "s3"), bias_mp=True, batch=8),
}

CASES = dict(CORPUS_CASES, **NEW_CASES)


# ----------------------------------------------------------------------------- capture

def build_and_capture(spec, stage, snapshot_cb, timings=None):
    """Build spec's model through Paddle's pipeline; call snapshot_cb(name, program) at each
    snapshot. If `timings` is a dict, the wall time of apply_partition_pass and of the
    first ReshardPasses.apply_reshard_pass (main program) are stored in it.
    PADDLE_TRAINER_ID must be set before paddle is imported."""
    import numpy as np
    import paddle
    import paddle.distributed as dist

    paddle.seed(2024)
    np.random.seed(2024)
    mesh = dist.ProcessMesh(spec["mesh"], dim_names=spec["dims"])
    widths = spec["widths"]
    mp = spec["mp"]
    ndim = len(spec["dims"])

    def wplace(i):
        pl = [dist.Replicate() for _ in range(ndim)]
        if mp is not None:
            pl[spec["dims"].index(mp)] = dist.Shard(1 if i % 2 == 0 else 0)
        return pl

    class MLP(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.layers = paddle.nn.LayerList()
            for i in range(len(widths) - 1):
                lin = paddle.nn.Linear(widths[i], widths[i + 1])
                lin.weight = dist.shard_tensor(lin.weight, mesh, wplace(i))
                if spec.get("bias_mp") and i % 2 == 0:  # column-parallel: its bias Shard(0) over mp
                    lin.bias = dist.shard_tensor(lin.bias, mesh, wplace(1))
                self.layers.append(lin)

        def forward(self, x):
            n = len(self.layers)
            for i, lin in enumerate(self.layers):
                x = lin(x)
                if i < n - 1:
                    x = paddle.nn.functional.relu(x)
            # The corpus programs hold a `pd_op.scale` by 1 (struct_name "/MLP/") after the
            # last Linear; a scalar multiply by 1.0 reproduces it exactly.
            return x * 1.0

    model = MLP()
    params = model.parameters()
    opt_name = spec["opt"]
    if opt_name == "adamw":
        opt = paddle.optimizer.AdamW(learning_rate=0.01, parameters=params)
    elif opt_name == "adam":
        opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=params)
    elif opt_name == "sgd":
        opt = paddle.optimizer.SGD(learning_rate=0.01, parameters=params)
    elif opt_name == "momentum":
        opt = paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9, parameters=params)
    else:
        raise ValueError(opt_name)
    if stage in ("s1", "s2", "s3"):
        fn = {"s1": dist.ShardingStage1, "s2": dist.ShardingStage2, "s3": dist.ShardingStage3}[stage]
        opt = dist.shard_optimizer(opt, fn("dp", mesh))
    elif spec.get("wrap", True):
        opt = dist.shard_optimizer(opt)
    ds = sample("train_mlp").RandomData(4 * spec["batch"], widths[0], widths[-1])  # samples/train_mlp.py's
    loader = paddle.io.DataLoader(ds, batch_size=spec["batch"])
    dloader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")

    run_engine(model, dloader, paddle.nn.MSELoss(), opt, snapshot_cb, timings)


# ----------------------------------------------------------------------------- worker

def worker(case, stage, rank, outdir):
    assert os.environ.get("PADDLE_TRAINER_ID") == str(rank)
    base = os.path.join(outdir, f"{case}.{stage}.r{rank}")
    got = {}

    def cb(name, program):
        if name not in got:  # first occurrence wins
            got[name] = str(program)

    try:
        build_and_capture(CASES.get(case) or MORE_CASES[case], stage, cb)
    except Exception as e:
        # Paddle refused: keep its message, and the snapshots taken before the failure
        # (e.g. before_partition), which are still valid inputs for distc.
        with open(base + ".error.txt", "w", encoding="utf-8") as f:
            f.write(_last_line(e) + "\n")
    else:
        missing = [s for s in SNAPSHOTS if s not in got]
        assert not missing, missing
    for s in SNAPSHOTS:
        if s not in got:
            continue
        write_snapshot(f"{base}.{s}.ir", got[s])


# ----------------------------------------------------------------------------- driver

def run_worker(case, stage, rank, outdir):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM="8",
               GLOG_minloglevel="2")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", case, stage, str(rank),
                        outdir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        fatal = re.findall(r"(FatalError: `[^`]*` is detected by the operating system\.)", p.stdout)
        msg = fatal[-1] if fatal else f"process exited with {p.returncode}: {p.stdout.strip()[-300:]}"
        print(f"  CRASH {case}.{stage}.r{rank}: {msg}", flush=True)
        with open(os.path.join(outdir, f"{case}.{stage}.r{rank}.error.txt"), "w", encoding="utf-8") as f:
            f.write("CRASH: " + msg.splitlines()[-1] + "\n")


def canon(text):
    m = {}
    return re.sub(r"ring_id:(\d+)", lambda g: "ring_id:R%d" % m.setdefault(g.group(1), len(m)), text)


def verify(corpus_dir):
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case, spec in CORPUS_CASES.items():
            for stage in spec["stages"]:
                run_worker(case, stage, 0, tmp)
        ours = sorted(os.listdir(tmp))
        theirs = sorted(f for f in os.listdir(corpus_dir) if ".r0." in f)
        if ours != theirs:
            print("file sets differ:", sorted(set(ours) ^ set(theirs)))
            bad += 1
        exact = 0
        for f in sorted(set(ours) & set(theirs)):
            a = open(os.path.join(tmp, f), encoding="utf-8").read()
            b = open(os.path.join(corpus_dir, f), encoding="utf-8").read()
            exact += a == b
            if canon(a) != canon(b):
                print("DIFF", f)
                bad += 1
        print(f"verified {len(ours)} files against {corpus_dir}: {bad} mismatches, "
              f"{exact} byte-identical including ring ids")
    return bad == 0


def table():
    print("| case | mesh | dim names | Linear widths | mp dim | optimizer | stages | ranks |")
    print("|---|---|---|---|---|---|---|---|")
    for case, s in CASES.items():
        ranks = [r for r in s["ranks"] if not (case in CORPUS_CASES and r == 0)]
        print(f"| `{case}` | `{s['mesh']}` | {','.join(s['dims'])} | {'-'.join(map(str, s['widths']))} | "
              f"{s['mp'] or '-'} | {s['opt']} | {','.join(s['stages'])} | {','.join(map(str, ranks))} |")


def main(argv):
    if argv[:1] == ["--worker"]:
        worker(argv[1], argv[2], int(argv[3]), argv[4])
        return 0
    if argv[:1] == ["--verify"]:
        return 0 if verify(argv[1]) else 1
    if argv[:1] == ["--list"]:
        table()
        return 0
    out = OUT
    if argv[:1] == ["--out"]:
        out, argv = argv[1], argv[2:]
    cases = CASES
    if argv[:1] == ["--more"]:  # MORE_CASES -> OUT/mlp/ (every stage and rank listed)
        cases, argv, out = MORE_CASES, argv[1:], os.path.join(out, "mlp")
    os.makedirs(out, exist_ok=True)
    for case in argv or list(cases):
        spec = cases[case]
        for stage in spec["stages"]:
            for r in spec["ranks"]:
                if case in CORPUS_CASES and r == 0 and cases is CASES:
                    continue  # identical to the shared corpus (checked by --verify)
                print(f"{case} {stage} rank {r}", flush=True)
                run_worker(case, stage, r, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
