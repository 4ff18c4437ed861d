"""Two commits of distc side by side: is a change slower?  (A refactor must stay within noise.)

Both commits are checked out (``git worktree add --detach``) into a temporary folder and run
interleaved, in fresh processes, with this interpreter (the same dependencies), so that both see
the same machine state:

  shard   ``python -m distc shard IN --rank 0 -o OUT -q`` on a deep MLP (bench/data), the whole
          command (imports, parse, shard-optimizer, partition, reshard, print, write);
  all     the same with ``--all-ranks -o 'DIR/main.r{rank}.ir'`` (its 4 ranks; CPU: its workers too);
  parse   parse + print of the same file after imports, in the child (MB/s of input).

Reported: per commit the median and range of each, and the ratio of medians (B / A), in wall time
and in CPU time (the child's user + system time: what a shared machine's other jobs add little to).

Usage:  .venv/bin/python bench/bench_ab.py REV_A REV_B [--repeat 5] [--layers 256]
        (writes bench/results/ab.json)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PARSE = r"""
import sys, time
import distc
from distc import parse, print_program  # noqa: F401 (``import distc`` alone loads them at first use)
text = open(sys.argv[1], encoding="utf-8").read()
t0, c0 = time.perf_counter(), time.process_time()
out = str(distc.parse(text, sys.argv[1]))
dt, dc = time.perf_counter() - t0, time.process_time() - c0
assert out == text
print(len(text.encode()) / dt / 1e6, len(text.encode()) / dc / 1e6)
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_shard(tree: Path, src: Path, out: Path, every: bool = False) -> tuple[float, float]:
    """(wall, CPU) seconds of the whole command (``every``: --all-ranks, ``out`` a folder)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    c0 = _children_cpu()
    t0 = time.perf_counter()
    where = ["--all-ranks", "-o", str(out / "main.r{rank}.ir")] if every else ["--rank", "0", "-o", str(out)]
    subprocess.run([sys.executable, "-m", "distc", "shard", str(src), *where, "-q"], check=True, env=env, cwd=tree)
    return time.perf_counter() - t0, _children_cpu() - c0


def run_parse(tree: Path, src: Path) -> tuple[float, float]:
    """(wall, CPU) MB/s of parse + print."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    r = subprocess.run([sys.executable, "-c", PARSE, str(src)], check=True, env=env, cwd=tree,
                       capture_output=True, text=True)
    wall, cpu = r.stdout.split()
    return float(wall), float(cpu)


def summary(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3),
            "all": [round(x, 3) for x in xs]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--layers", type=int, default=256)
    ap.add_argument("--out", default=str(HERE / "results" / "ab.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = d / f"mlp{args.layers}.ir"
        src.write_bytes(gzip.decompress((HERE / "data" / f"mlp{args.layers}.s0.r0.before_partition.ir.gz").read_bytes()))
        trees = {}
        for rev in (args.a, args.b):
            t = d / ("tree_" + rev.replace("/", "_"))
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(t), rev], check=True, cwd=ROOT)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(t / "distc")], check=True)
            trees[rev] = t
        try:
            res: dict = {rev: {k: [] for k in ("shard", "parse", "all", "shard_cpu", "parse_cpu", "all_cpu")}
                         for rev in trees}
            (d / "all").mkdir()
            load0 = os.getloadavg()
            for i in range(args.repeat):
                order = list(trees) if i % 2 == 0 else list(reversed(trees))
                for rev in order:
                    for key, (wall, cpu) in (("shard", run_shard(trees[rev], src, d / "out.ir")),
                                             ("all", run_shard(trees[rev], src, d / "all", every=True)),
                                             ("parse", run_parse(trees[rev], src))):
                        res[rev][key].append(wall)
                        res[rev][key + "_cpu"].append(cpu)
            load1 = os.getloadavg()
        finally:
            for t in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(t)], cwd=ROOT)
    report = {"a": args.a, "b": args.b, "layers": args.layers, "repeat": args.repeat,
              "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in load1],
              "shard_s": {rev: summary(v["shard"]) for rev, v in res.items()},
              "parse_print_MBps": {rev: summary(v["parse"]) for rev, v in res.items()},
              "shard_cpu_s": {rev: summary(v["shard_cpu"]) for rev, v in res.items()},
              "all_ranks_s": {rev: summary(v["all"]) for rev, v in res.items()},
              "all_ranks_cpu_s": {rev: summary(v["all_cpu"]) for rev, v in res.items()},
              "parse_print_MB_per_cpu_s": {rev: summary(v["parse_cpu"]) for rev, v in res.items()}}
    ratio = {}
    for name, key in (("shard_time", "shard"), ("parse_print_speed", "parse"), ("shard_cpu_time", "shard_cpu"),
                      ("parse_print_speed_cpu", "parse_cpu"), ("all_ranks_time", "all"),
                      ("all_ranks_cpu_time", "all_cpu")):
        a, b = (statistics.median(res[r][key]) for r in (args.a, args.b))
        ratio[name] = round(b / a, 3)
    report["ratio_b_over_a"] = ratio
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"mlp{args.layers}, {args.repeat} repeats interleaved, load {report['load_before']} -> {report['load_after']}")
    for rev in (args.a, args.b):
        s, p = report["shard_s"][rev], report["parse_print_MBps"][rev]
        sc, pc = report["shard_cpu_s"][rev], report["parse_print_MB_per_cpu_s"][rev]
        print(f"  {rev:>12}: shard --rank 0 {s['median']:.3f} s [{s['min']:.3f}-{s['max']:.3f}] "
              f"(CPU {sc['median']:.3f} s)   parse+print {p['median']:.1f} MB/s [{p['min']:.1f}-{p['max']:.1f}] "
              f"(CPU {pc['median']:.1f} MB/s)   --all-ranks {report['all_ranks_s'][rev]['median']:.3f} s "
              f"(CPU {report['all_ranks_cpu_s'][rev]['median']:.3f} s)")
    print(f"  B/A: shard time {ratio['shard_time']} (CPU {ratio['shard_cpu_time']}), parse+print speed "
          f"{ratio['parse_print_speed']} (CPU {ratio['parse_print_speed_cpu']}), --all-ranks time "
          f"{ratio['all_ranks_time']} (CPU {ratio['all_ranks_cpu_time']})")


if __name__ == "__main__":
    main()
