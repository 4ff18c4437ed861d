"""`distc verify` speed and memory, 8 ranks (issue 17's target: a 48-layer GPT-2-sized program, about
14 MB of text, under a minute and under 2 GB on the 2-core machine).

Cases (each command a fresh process, the whole command: start, imports, parse, simulate, compare):

  llama   Paddle 3.3.1's own programs of clip/llama_dp2mp4.s1 (the LLaMA-style decoder, 2 layers,
          dp2 x mp4): the global-view program and every rank's after_reshard program, from the
          committed store (tests/data/oracle/llm), else made by tests/data/oracle/gen_llm.py
  gpt2    bench/data/gpt2_48.s0.r0.before_partition.ir.xz: Paddle's program of
          tests/data/oracle/gen_models.py's GPT-2 with 48 blocks (dropout, LayerNorm, GELU, tied
          head) on dp2 x mp4, AdamW, stage 0 (made by `bench/gen_big.py --gpt2 48` with Paddle, 8.2 MB);
          its 8 ZeRO-1 rank programs are distc's (`distc shard --stage 1 --all-ranks`, 12 MB
          each, written before the timed runs)

  verify   `distc verify SERIAL --ranks 'RANK{rank}'`
  shard    `distc shard SERIAL --stage 1 --all-ranks --verify -o OUT{rank}` (builds the 8 ranks too)

For each: median wall time over --repeat runs, CPU time (user + system) and peak resident memory
of the process, its forked workers included (CPU: their sum; memory: the process or its largest
worker). The machine is shared: CPU time says what the work costs when the cores are busy.

Usage:  .venv/bin/python bench/bench_verify.py [--repeat 3] [--cases llama,gpt2] [--data DIR]
        (writes bench/results/verify.json)
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
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
LLAMA = "clip/llama_dp2mp4.s1"
GEN = ROOT / "tests" / "data" / "oracle" / "gen_llm.py"
STORE = ROOT / "tests" / "data" / "oracle" / "llm"
GPT2 = HERE / "data" / "gpt2_48.s0.r0.before_partition.ir.xz"
# runs distc in this process and reports its peak memory (ru_maxrss, KiB on Linux: the process or
# its largest forked worker) and CPU time (the process and its workers)
WRAP = """import os, resource, sys
from distc.cli import main
try:
    main(sys.argv[1:], standalone_mode=True)
finally:
    u, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["DISTC_BENCH_STATS"], "w") as f:
        f.write(f"{max(u.ru_maxrss, c.ru_maxrss)} {u.ru_utime + u.ru_stime + c.ru_utime + c.ru_stime}")
"""


def from_store(data: Path) -> bool:
    """Write LLAMA's files from the committed store; False if the store lacks any of them."""
    table = {}
    for line in (STORE / "MANIFEST.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            name, h, _ = line.split("\t")
            table[name] = h
    names = [f"{LLAMA}.r0.before_partition.ir"] + [f"{LLAMA}.r{r}.after_reshard.ir" for r in range(8)]
    if not all(n in table for n in names):
        return False
    for n in names:
        out = data / n
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(gzip.decompress((STORE / "store" / f"{table[n]}.gz").read_bytes()))
    return True


def llama_data(data: Path, paddle: str | None) -> tuple[Path, str]:
    serial = data / f"{LLAMA}.r0.before_partition.ir"
    pattern = str(data / f"{LLAMA}.r{{rank}}.after_reshard.ir")
    if all(Path(pattern.replace("{rank}", str(r))).exists() for r in range(8)) and serial.exists():
        return serial, pattern
    if from_store(data):
        return serial, pattern
    if paddle is None or not GEN.exists():
        sys.exit(f"no data in {data} and no way to make it (need Paddle's python and {GEN})")
    print(f"generating {LLAMA} (8 ranks) with {paddle} ...", flush=True)
    subprocess.run([paddle, str(GEN), "--out", str(data), "-j", "1", LLAMA], check=True)
    return serial, pattern


def gpt2_data(data: Path) -> tuple[Path, str]:
    """The 48-layer GPT-2 program and distc's 8 rank programs of it."""
    if not GPT2.exists():
        sys.exit(f"no {GPT2}: make it with `/tmp/paddle/bin/python bench/gen_big.py --gpt2 48`")
    serial = data / "gpt2_48.s0.r0.before_partition.ir"
    pattern = str(data / "gpt2_48.s1.r{rank}.ir")
    data.mkdir(parents=True, exist_ok=True)
    serial.write_bytes(lzma.decompress(GPT2.read_bytes()))
    subprocess.run([sys.executable, "-m", "distc", "shard", str(serial), "--stage", "1", "--all-ranks", "-q",
                    "-o", pattern], check=True)
    return serial, pattern


def timed(args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS bytes) of one `distc ARGS` process."""
    with tempfile.NamedTemporaryFile("r", suffix=".stats") as st:
        env = dict(os.environ, DISTC_BENCH_STATS=st.name)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", WRAP, *args], capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): distc {' '.join(args)}\n{r.stdout}{r.stderr}")
        rss, cpu = st.read().split()
    return dt, float(cpu), int(rss) * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="llama,gpt2")
    ap.add_argument("--data", type=Path, default=Path("/tmp/distc-bench-verify"))
    default_py = next((p for p in ("/work/paddle/bin/python", "/tmp/paddle/bin/python") if os.path.exists(p)), None)
    ap.add_argument("--paddle-python", default=default_py)
    a = ap.parse_args()
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in a.cases.split(","):
            serial, pattern = llama_data(a.data, a.paddle_python) if case == "llama" else gpt2_data(a.data)
            size = serial.stat().st_size + sum(Path(pattern.replace("{rank}", str(r))).stat().st_size for r in range(8))
            runs = {
                "verify": ["verify", str(serial), "--ranks", pattern],
                "shard --all-ranks --verify": ["shard", str(serial), "--stage", "1", "--all-ranks", "--verify",
                                               "-q", "-o", os.path.join(tmp, "r{rank}.ir")],
            }
            for name, args in runs.items():
                ts = [timed(args) for _ in range(a.repeat)]
                wall, cpu, rss = (statistics.median(t[i] for t in ts) for i in range(3))
                res[f"{case}: {name}"] = {"median_s": round(wall, 2), "cpu_s": round(cpu, 2),
                                          "peak_rss_mb": round(rss / 2 ** 20), "runs_s": [round(t[0], 2) for t in ts],
                                          "input_mb": round(size / 2 ** 20, 1)}
                print(f"{case:6s} {name:27s} 8 ranks, {size / 2 ** 20:5.1f} MB of programs: median {wall:6.2f} s wall, "
                      f"{cpu:6.2f} s CPU, peak {rss / 2 ** 20:5.0f} MB (runs {', '.join(f'{t[0]:.2f}' for t in ts)})",
                      flush=True)
    out = {"cases": {"llama": LLAMA, "gpt2": str(GPT2.relative_to(ROOT))}, "ranks": 8,
           "machine": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average": os.getloadavg(), "results": res}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "verify.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
