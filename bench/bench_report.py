"""`distc report` versus `distc shard` on the same program, timed in the same run.

For each deep MLP program (bench/data/mlpN.s0.r0.before_partition.ir.gz, printed by Paddle 3.3.1;
see gen_big.py; mesh [[0,1],[2,3]], 4 ranks) and each repeat, in fresh processes, interleaved so
that both see the same machine state:

  shard    `python -m distc shard IN --rank 0 -o OUT -q`: one rank's program (parse, shard-optimizer,
           partition, reshard, print, write);
  report   `python -m distc report IN -o PAGE -q`: the page (parse, shard-optimizer and partition
           once, every rank's reshard and shard-optimizer at the other stages in forked workers,
           -j = cores, the charts and the page).

Wall time (perf_counter around the process) and the CPU time of the process and its workers
(getrusage of the children).  Reported per program: medians over the repeats and the ratio
report / shard per repeat (the issue's target: under 2), with the page's size.  The machine's
load average is recorded before and after.

Usage:  .venv/bin/python bench/bench_report.py [--repeat 5] [LAYERS ...]   (default 256; writes
        bench/results/report.json)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU of the process and every worker it waited for) in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("layers", nargs="*", type=int, default=[256])
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "distc")], check=True)
    out: dict = {"when": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.platform(), "cpus": os.cpu_count(),
                 "load_before": os.getloadavg(), "repeat": args.repeat, "programs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.layers:
            src = Path(tmp) / f"mlp{n}.ir"
            src.write_bytes(gzip.decompress((HERE / "data" / f"mlp{n}.s0.r0.before_partition.ir.gz").read_bytes()))
            page = Path(tmp) / f"mlp{n}.html"
            rows = []
            for _ in range(args.repeat):
                s = timed([sys.executable, "-m", "distc", "shard", str(src), "--rank", "0", "-o",
                           str(Path(tmp) / "r0.ir"), "-q"])
                r = timed([sys.executable, "-m", "distc", "report", str(src), "-o", str(page), "-q"])
                rows.append({"shard_wall": s[0], "shard_cpu": s[1], "report_wall": r[0], "report_cpu": r[1],
                             "ratio_wall": r[0] / s[0]})
                print(f"mlp{n}: shard {s[0]:.2f} s (cpu {s[1]:.2f}), report {r[0]:.2f} s (cpu {r[1]:.2f}), "
                      f"ratio {r[0] / s[0]:.2f}", flush=True)
            med = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
            ratios = [x["ratio_wall"] for x in rows]
            out["programs"][f"mlp{n}"] = {"input_bytes": src.stat().st_size, "page_bytes": page.stat().st_size,
                                          "median": med, "ratio_min": min(ratios), "ratio_max": max(ratios),
                                          "runs": rows}
            print(f"mlp{n}: median shard {med['shard_wall']:.2f} s, report {med['report_wall']:.2f} s, ratio "
                  f"{med['ratio_wall']:.2f} [{min(ratios):.2f}, {max(ratios):.2f}]; page "
                  f"{page.stat().st_size / 1024:.0f} KiB")
    out["load_after"] = os.getloadavg()
    dest = HERE / "results" / "report.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
