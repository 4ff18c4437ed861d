"""`distc diff` on big real Paddle programs: the whole command, and the comparison alone.

Cases (inputs are bench/data/*.ir.gz, real Paddle 3.3.1 dumps made by bench/gen_big.py; the
second program of a pair is derived here, in a temporary directory):

* same:    mlp680 (15.3 MB) against itself with every %N renumbered        -> exit 0
* stages:  mlp680 stage 0 against stage 1 (before partition), 4080 changed ops -> exit 1
* rings:   mlp96 after Paddle's reshard pass against itself, renumbered and ring ids shifted -> 0

Each number is the best of 3 fresh processes (wall time, and CPU time: on a shared machine
the wall time of a run also counts other programs' work).  Usage:

    .venv/bin/python bench/bench_diff.py          # writes bench/results/diff.json
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

CHILD = r"""
import json, sys, time
from distc.syntax.parser import parse
from distc.analysis.diff import diff_programs
a = parse(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])
b = parse(open(sys.argv[2], encoding="utf-8").read(), sys.argv[2])
t0 = time.perf_counter()
r = diff_programs(a, b)
print(json.dumps({"diff_s": time.perf_counter() - t0, "differences": len(r.diffs)}))
"""


def _unzip(name: str, tmp: Path) -> Path:
    out = tmp / name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    return out


def _derive(src: Path, dst: Path, rings: int = 0) -> Path:
    text = src.read_text(encoding="utf-8")
    text = re.sub(r"%(\d+)\b", lambda m: f"%{int(m.group(1)) * 3 + 7}", text)
    if rings:
        text = re.sub(r"ring_id:(\d+)", lambda m: f"ring_id:{int(m.group(1)) + rings}", text)
    dst.write_text(text, encoding="utf-8")
    return dst


def _best(cmd: list[str], n: int = 3) -> tuple[float, float, subprocess.CompletedProcess]:
    """Best wall time and best CPU time (user + system: what the machine's other load does not
    inflate much) of ``n`` runs."""
    best, cpu, last = float("inf"), float("inf"), None
    for _ in range(n):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        last = subprocess.run(cmd, capture_output=True, text=True)
        best = min(best, time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return best, cpu, last  # type: ignore[return-value]


def main() -> None:
    distc = [sys.executable, "-m", "distc", "diff"]
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        s0 = _unzip("mlp680.s0.r0.before_partition.ir.gz", tmp)
        s1 = _unzip("mlp680.s1.r0.before_partition.ir.gz", tmp)
        r96 = _unzip("mlp96.s1.r0.after_reshard.ir.gz", tmp)
        cases = [("same", s1, _derive(s1, tmp / "mlp680.renumbered.ir"), 0),
                 ("stages", s0, s1, 1),
                 ("rings", r96, _derive(r96, tmp / "mlp96.renumbered.ir", rings=5), 0)]
        for name, a, b, want in cases:
            whole, cpu, proc = _best(distc + [str(a), str(b)])
            if proc.returncode != want:
                sys.exit(f"{name}: exit {proc.returncode}, expected {want}\n{proc.stderr[-2000:]}")
            engine = min(json.loads(subprocess.run([sys.executable, "-c", CHILD, str(a), str(b)],
                                                   capture_output=True, text=True, check=True).stdout)["diff_s"]
                         for _ in range(3))
            row = {"case": name, "a": a.name, "b": b.name, "a_mb": round(a.stat().st_size / 1e6, 1),
                   "b_mb": round(b.stat().st_size / 1e6, 1), "exit": proc.returncode,
                   "whole_command_s": round(whole, 2), "whole_command_cpu_s": round(cpu, 2),
                   "diff_engine_s": round(engine, 2),
                   "report_lines": proc.stdout.count("\n")}
            results.append(row)
            print(json.dumps(row), flush=True)
    out = HERE / "results" / "diff.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "results": results},
                              indent=1) + "\n")


if __name__ == "__main__":
    main()
