"""Partition, reshard and the final verify of one rank, each timed alone in this process on a
fresh clone of the program after shard-optimizer (CPU time, best of --repeat).  Run it with
``PYTHONPATH=DIR`` to time another checkout's distc (``git archive d71f2c6 distc | tar -x -C DIR``)
and alternate the two by hand.  Usage:

    .venv/bin/python bench/bench_passes.py [--repeat 5] bench/data/mlp256.s0.r0.before_partition.ir.gz
"""

from __future__ import annotations

import argparse
import gc
import gzip
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    gc.disable()
    import distc
    from distc.analysis import verify as V
    from distc.passes.partition import PartitionPass
    from distc.passes.reshard_pass import ReshardPass
    from distc.pipeline import ShardOptions, ShardPipeline

    raw = open(args.program, "rb").read()
    text = (gzip.decompress(raw) if args.program.endswith(".gz") else raw).decode()
    prog = distc.parse(text, args.program)
    pipe = ShardPipeline(prog, ShardOptions())
    pipe.check_main()
    pipe.shared_passes()[0].apply(prog, pipe.ctx)  # shard-optimizer
    final = getattr(V, "verify_changed", V.verify)
    best = {"partition": 9.0, "reshard": 9.0, "final verify": 9.0}
    for _ in range(args.repeat):
        p = prog.clone()
        for label, f in (("partition", lambda: PartitionPass().apply(p, pipe.ctx)),
                         ("reshard", lambda: ReshardPass(rank=0).apply(p, pipe.ctx.fork())),
                         ("final verify", lambda: final(p))):
            c = time.process_time()
            f()
            best[label] = min(best[label], time.process_time() - c)
    print(", ".join(f"{k} {v:.3f}" for k, v in best.items()) + f" s CPU (best of {args.repeat}, {distc.__file__})")


if __name__ == "__main__":
    main()
