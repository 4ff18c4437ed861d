"""Where one rank's `distc shard` spends its CPU time: the whole command run in this process with a
timer (time.process_time) around each of its steps.

  imports        python start to distc's shard command loaded (the interpreter's own start-up,
                 ~0.02 s, is not in it)
  parse          distc.syntax.parser.parse_program
  input checks   verify_values and check_main on the input (driver / pipeline.inputs)
  pass X         each pass's apply (shard-optimizer, partition, reshard)
  final verify   the structural verifier run once on the result (pipeline.shard)
  print          print_program
  rest           everything else (option handling, summaries, memory and cost tables, writing)

Each figure is the best of --repeat fresh processes, each checkout's bytecode compiled first (as
``pip install`` leaves it).  ``--checkout DIR`` runs another checkout's
distc (``git archive d71f2c6 distc | tar -x -C /tmp/base``) interleaved
with this one, process by process, and prints both.  Usage:

    .venv/bin/python bench/bench_phases.py [--repeat 3] [--checkout DIR] [LAYERS ...]     (default 96 256)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
T = {}
def wrap(mod, name, label):
    f = getattr(mod, name)
    def g(*a, **k):
        c0 = time.process_time()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0.0) + time.process_time() - c0
    setattr(mod, name, g)
import distc.cli, distc.commands.shard  # noqa: F401
import distc.passes.base as base, distc.syntax.printer as pr, distc.ir.core as core
import distc.driver as drv
T["imports"] = time.process_time()
pipe = sys.modules["distc.pipeline.shard"]
wrap(drv, "parse_text", "parse")
wrap(drv, "check_values", "input checks")
wrap(pipe, "check_main", "input checks")
wrap(pipe, "verify", "final verify")
if hasattr(pipe, "verify_changed"):  # (the shard pipeline's final check since issue 23's passes work)
    wrap(pipe, "verify_changed", "final verify")
wrap(pr, "print_program", "print")
if hasattr(pr, "print_pieces"):  # (a file written from the printer's pieces since issue 23's print work)
    wrap(pr, "print_pieces", "print")
core.set_printer(pr.print_program, pr.number_values)
run = base.PassManager.run
def timed_run(self, prog, ctx=None):
    for p in self.passes:
        def apply(prog, ctx, f=p.apply, label="pass " + p.name):
            c0 = time.process_time()
            try:
                return f(prog, ctx)
            finally:
                T[label] = T.get(label, 0.0) + time.process_time() - c0
        p.apply = apply
    return run(self, prog, ctx)
base.PassManager.run = timed_run
sys.argv = ["distc", "shard", sys.argv[1], "--rank", "0", "-o", sys.argv[2], "-q"]
try:
    distc.cli.main()
except SystemExit:
    pass
total = time.process_time()
T["rest"] = total - sum(T.values())
T["total"] = total
print(json.dumps(T))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("layers", nargs="*", type=int, default=[96, 256])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "phases.json"))
    ap.add_argument("--checkout", default=None, help="another checkout's root (holding distc/), run interleaved")
    args = ap.parse_args()
    trees = {"this": None}
    if args.checkout:
        trees = {"checkout": str(Path(args.checkout).resolve()), "this": None}
    # bytecode compiled first, as `pip install` leaves it (PYTHONDONTWRITEBYTECODE=1 would make every
    # process compile every module: ~0.1 s more of "imports")
    for root in [HERE.parent] + ([Path(args.checkout)] if args.checkout else []):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "distc")], check=True)
    load_before = [round(x, 2) for x in os.getloadavg()]
    rows = []
    for n in args.layers:
        gz = HERE / "data" / f"mlp{n}.s0.r0.before_partition.ir.gz"
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / gz.name[:-3]
            src.write_bytes(gzip.decompress(gz.read_bytes()))
            per = {t: [] for t in trees}
            for _ in range(args.repeat):
                for t, root in trees.items():
                    env = dict(os.environ, PYTHONPATH=root) if root else None
                    r = subprocess.run([sys.executable, "-c", CHILD, str(src), str(Path(d) / f"out.{t}.ir")],
                                       capture_output=True, text=True, check=True, env=env, cwd=root or None)
                    per[t].append(json.loads(r.stdout.strip().splitlines()[-1]))
            same = len({(Path(d) / f"out.{t}.ir").read_bytes() for t in trees}) == 1
        for t, runs in per.items():
            keys = list(dict.fromkeys(k for r in runs for k in r))
            best = {k: min(r.get(k, 0.0) for r in runs) for k in keys}
            label = f"mlp{n}" + (f" ({t})" if len(trees) > 1 else "")
            print(f"{label}: " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()) + " s CPU", flush=True)
            rows.append(dict(layers=n, tree=trees[t] or "this", best_cpu_s={k: round(v, 3) for k, v in best.items()},
                             runs=[{k: round(v, 3) for k, v in r.items()} for r in runs]))
        if len(trees) > 1:
            print(f"mlp{n}: outputs {'byte-identical' if same else 'DIFFER'}", flush=True)
    Path(args.out).write_text(json.dumps(dict(
        what="one rank's distc shard (--rank 0, stage 1) in one process, CPU time (time.process_time) per step, "
             "best of the repeats (each column its own best)",
        command="PYTHONPATH= .venv/bin/python bench/bench_phases.py --repeat %d%s %s" % (
            args.repeat, f" --checkout {args.checkout}" if args.checkout else "", " ".join(map(str, args.layers))),
        load_average_before=load_before, load_average_after=[round(x, 2) for x in os.getloadavg()],
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), results=rows), indent=2) + "\n")


if __name__ == "__main__":
    main()
