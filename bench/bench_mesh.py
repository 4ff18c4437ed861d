"""Reshard lowering on huge meshes: is it linear in the mesh size?

Each case is the whole command, in a fresh process (imports, building the explorer's program,
parse, reshard lowering for rank 0, print, write to /dev/null):

  ``python -m distc reshard --from SRC --to DST --mesh SHAPE --shape DIMS -q -o /dev/null``

on 1-D meshes of 4,000 / 20,000 / 100,000 ranks and a 2-D mesh of 256 x 256, with distc's default
lowering and with ``--paddle`` (Paddle's functions only).  Reported per case: the median wall
time, the CPU time (user + system) and the peak RSS of the child.  On a shared machine the CPU
time is the steadier figure.

Usage:  .venv/bin/python bench/bench_mesh.py [--repeat 3] [--quick]   (writes bench/results/mesh.json)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = [  # (name, from, to, mesh, shape)
    ("1-D 4,000 S0->R", "s0", "r", "4000", "4000x8"),
    ("1-D 20,000 S0->R", "s0", "r", "20000", "20000x8"),
    ("1-D 100,000 S0->R", "s0", "r", "100000", "100000x8"),
    ("1-D 100,000 P->R", "p", "r", "100000", "100000x8"),
    ("1-D 100,000 R->S0", "r", "s0", "100000", "100000x8"),
    ("256x256 [S0,R]->[R,R]", "s0,r", "r,r", "256,256", "1024x1024"),
    ("256x256 [P,R]->[R,R]", "p,r", "r,r", "256,256", "1024x1024"),
    ("256x256 [R,R]->[S0,S1]", "r,r", "s0,s1", "256,256", "1024x1024"),
    ("256x256 [S0,R]->[S1,R]", "s0,r", "s1,r", "256,256", "1024x1024"),
    ("256x256 [S0,S1]->[R,R]", "s0,s1", "r,r", "256,256", "1024x1024"),
]


def run_once(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (KB) of one child."""
    import tempfile

    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "distc", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise SystemExit(f"distc {' '.join(args)}: exit {p.returncode}\n{err.read().decode()}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the 1-D 100,000 and 256x256 [S0,R] cases only")
    a = ap.parse_args()
    cases = [c for c in CASES if not a.quick or c[0] in ("1-D 100,000 S0->R", "256x256 [S0,R]->[R,R]")]
    out = []
    print(f"{'case':28} {'mode':8} {'wall s':>8} {'cpu s':>7} {'peak MB':>8}")
    for name, src, dst, mesh, shape in cases:
        for mode in ("default", "--paddle"):
            args = ["reshard", "--from", src, "--to", dst, "--mesh", mesh, "--shape", shape, "-q", "-o", os.devnull]
            if mode != "default":
                args.append(mode)
            runs = [run_once(args) for _ in range(a.repeat)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            peak = max(r[2] for r in runs) / 1024
            print(f"{name:28} {mode:8} {wall:8.2f} {cpu:7.2f} {peak:8.0f}", flush=True)
            out.append({"case": name, "mode": mode, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                        "peak_mb": round(peak), "load": os.getloadavg()[0]})
    res = ROOT / "bench/results"
    res.mkdir(exist_ok=True)
    (res / "mesh.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
