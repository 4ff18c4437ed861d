"""`distc verify` on the 8 ranks of the dp2 x mp4 LLaMA-style ZeRO-1 program (target: under a minute).

Inputs are Paddle 3.3.1's own programs, regenerated (not committed): the global-view program
(`before_partition`) and every rank's `after_reshard` program of clip/llama_dp2mp4.s1, made by
tests/data/oracle/gen_llm.py with Paddle's interpreter (--paddle-python, default
/work/paddle/bin/python or /tmp/paddle/bin/python) into --data (default /tmp/distc-bench-llm).
Each run is a fresh process, the whole command (start, imports, parse 9 programs, simulate the
serial step and 8 ranks, compare):

  verify   `distc verify SERIAL --ranks 'RANK{rank}'`            (Paddle's 8 rank programs)
  shard    `distc shard SERIAL --all-ranks --verify -o OUT{rank}` (distc builds the 8 ranks too)

Usage:  .venv/bin/python bench/bench_verify.py [--repeat 3] [--data DIR] [--paddle-python PY]
        (writes bench/results/verify.json)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASE = "clip/llama_dp2mp4.s1"
GEN = ROOT / "tests" / "data" / "oracle" / "gen_llm.py"


def ensure_data(data: Path, paddle: str | None) -> tuple[Path, str]:
    serial = data / f"{CASE}.r0.before_partition.ir"
    pattern = str(data / f"{CASE}.r{{rank}}.after_reshard.ir")
    if all(Path(pattern.replace("{rank}", str(r))).exists() for r in range(8)) and serial.exists():
        return serial, pattern
    if paddle is None or not GEN.exists():
        sys.exit(f"no data in {data} and no way to make it (need Paddle's python and {GEN})")
    print(f"generating {CASE} (8 ranks) with {paddle} ...", flush=True)
    subprocess.run([paddle, str(GEN), "--out", str(data), "-j", "1", CASE], check=True)
    return serial, pattern


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path("/tmp/distc-bench-llm"))
    default_py = next((p for p in ("/work/paddle/bin/python", "/tmp/paddle/bin/python") if os.path.exists(p)), None)
    ap.add_argument("--paddle-python", default=default_py)
    a = ap.parse_args()
    serial, pattern = ensure_data(a.data, a.paddle_python)
    py = [sys.executable, "-m", "distc"]
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            "verify": [*py, "verify", str(serial), "--ranks", pattern],
            "shard --all-ranks --verify": [*py, "shard", str(serial), "--all-ranks", "--verify", "-q",
                                           "-o", os.path.join(tmp, "r{rank}.ir")],
        }
        res = {}
        for name, cmd in runs.items():
            ts = [timed(cmd) for _ in range(a.repeat)]
            res[name] = {"median_s": round(statistics.median(ts), 3), "runs_s": [round(t, 3) for t in ts]}
            print(f"{name:28s} 8 ranks of dp2 x mp4 LLaMA: median {statistics.median(ts):.2f} s "
                  f"(runs {', '.join(f'{t:.2f}' for t in ts)})", flush=True)
    out = {"case": CASE, "ranks": 8, "machine": platform.platform(), "python": platform.python_version(),
           "cpus": os.cpu_count(), "results": res}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "verify.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
