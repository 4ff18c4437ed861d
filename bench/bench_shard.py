"""`distc shard` end to end versus Paddle's own partition + reshard passes, timed in the same run.

For each deep MLP program (bench/data/mlpN.s0.r0.before_partition.ir.gz, printed by Paddle 3.3.1
itself; see gen_big.py) this runs, in fresh processes:

  distc   `python -m distc shard IN --rank 0 -o OUT -q`: process start, imports, parse, shard-optimizer,
          partition, reshard, print, write — the whole command, on the stage-0 program;
  Paddle  `gen_big.py --worker N s1`: builds the same model in Paddle and times (perf_counter) only
          `apply_partition_pass` + `ReshardPasses.apply_reshard_pass` on the stage-1 program —
          Paddle's two passes alone, without its own program building, parsing or printing.

Paddle is not a dependency of distc: give its interpreter with --paddle-python (default
/tmp/paddle/bin/python when it exists; see docs in tests/data/oracle/README.md). Without it the
Paddle column is read from results/paddle_passes*.json (made by gen_big.py) and marked so.

Usage:  .venv/bin/python bench/bench_shard.py [--repeat 3] [--paddle-python PY] [LAYERS ...]
        (default layers: 96 256 680; writes bench/results/shard.json)
"""

from __future__ import annotations

import argparse
import gzip
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


def distc_time(src: Path, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "distc", "shard", str(src), "--rank", "0", "-o", str(out), "-q"],
                   check=True, cwd=ROOT)
    return time.perf_counter() - t0


def paddle_time(py: str, layers: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "w.json")
        env = dict(os.environ, PYTHONHASHSEED="0", PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="8",
                   GLOG_minloglevel="2")
        subprocess.run([py, str(HERE / "gen_big.py"), "--worker", str(layers), "s1", "0", js], env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t = json.load(open(js))["timings"]
        return t["partition"] + t["reshard"]


def stored_paddle(layers: int) -> list[float] | None:
    for f in sorted((HERE / "results").glob("paddle_passes*.json")):
        for r in json.load(open(f))["results"]:
            if r["layers"] == layers and r["stage"] == "s1":
                return r["total_s"]
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("layers", nargs="*", type=int, default=[96, 256, 680])
    ap.add_argument("--repeat", type=int, default=3)
    default_py = "/tmp/paddle/bin/python" if os.path.exists("/tmp/paddle/bin/python") else None
    ap.add_argument("--paddle-python", default=default_py)
    args = ap.parse_args()
    rows = []
    for n in args.layers:
        gz = HERE / "data" / f"mlp{n}.s0.r0.before_partition.ir.gz"
        if not gz.exists():
            print(f"skip {n}: {gz.name} missing (make it with gen_big.py)")
            continue
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / gz.name[:-3]
            src.write_bytes(gzip.decompress(gz.read_bytes()))
            out = Path(d) / "out.ir"
            dist_runs, pad_runs = [], []
            for _ in range(args.repeat):  # interleaved, so both see the same machine state
                dist_runs.append(distc_time(src, out))
                if args.paddle_python:
                    pad_runs.append(paddle_time(args.paddle_python, n))
            size_in, size_out = src.stat().st_size, out.stat().st_size
        source = "measured in this run"
        if not pad_runs:
            pad_runs = stored_paddle(n) or []
            source = "from results/paddle_passes*.json (Paddle not available in this run)"
        row = dict(layers=n, input_bytes=size_in, output_bytes=size_out,
                   distc_end_to_end_s=[round(x, 3) for x in dist_runs],
                   paddle_partition_plus_reshard_s=[round(x, 3) for x in pad_runs],
                   distc_median_s=round(statistics.median(dist_runs), 3),
                   paddle_median_s=round(statistics.median(pad_runs), 3) if pad_runs else None,
                   paddle_source=source)
        if pad_runs:
            row["speedup"] = round(statistics.median(pad_runs) / statistics.median(dist_runs), 2)
        rows.append(row)
        print(f"mlp{n}: {size_in / 1e6:.1f} MB -> {size_out / 1e6:.1f} MB  distc shard (end to end) "
              f"{row['distc_median_s']:.2f}s   Paddle partition+reshard {row['paddle_median_s']}s "
              f"({source})" + (f"   distc is {row['speedup']}x faster" if pad_runs else ""))
    out = HERE / "results" / "shard.json"
    out.write_text(json.dumps(dict(
        what="distc shard end to end (fresh process: start, parse, passes, print, write) vs Paddle 3.3.1's "
             "apply_partition_pass + apply_reshard_pass alone, medians of interleaved fresh-process runs",
        command="PYTHONPATH= .venv/bin/python bench/bench_shard.py",
        python=platform.python_version(), nproc=os.cpu_count(),
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), results=rows), indent=2) + "\n")


if __name__ == "__main__":
    main()
