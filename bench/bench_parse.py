"""Parse + print throughput and peak memory of distc on big real Paddle programs.

Each measurement runs in a fresh Python process; parse and print are timed after imports.  Memory
is the peak of Python allocations during a second parse + print (tracemalloc, which includes the
output string but not the input text), and the growth of the process's peak RSS during the first.  Usage:

    .venv/bin/python bench/bench_parse.py [FILE.ir[.gz] ...]

Without arguments it uses bench/data/*.ir.gz (real Paddle 3.3.1 dumps made by bench/gen_big.py)
and writes bench/results/parse.json; with files, bench/results/parse_NAME.json (NAME: the first
file's name up to its first dot, e.g. parse_mlp680.json).
"""

from __future__ import annotations

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

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import distc
from distc import parse, print_program  # noqa: F401 (``import distc`` alone loads them at first use)
t_import = time.perf_counter() - t0
text = open(sys.argv[1], encoding="utf-8").read()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c0 = time.process_time()
t0 = time.perf_counter()
prog = distc.parse(text, sys.argv[1])
t1 = time.perf_counter()
c1 = time.process_time()
out = str(prog)
t2 = time.perf_counter()
c2 = time.process_time()
assert out == text, "round trip failed"
from distc.syntax.printer import print_program
t3 = time.perf_counter()
canon = print_program(prog, canonical=True)
t4 = time.perf_counter()
assert canon == text
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ops = sum(1 for _ in prog.walk())
del prog, out, canon
import gc, tracemalloc
gc.collect()
tracemalloc.start()
prog = distc.parse(text, sys.argv[1])
out = str(prog)
traced_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"import_s": t_import, "parse_s": t1 - t0, "print_s": t2 - t1,
                  "parse_cpu_s": c1 - c0, "print_cpu_s": c2 - c1,
                  "canonical_print_s": t4 - t3, "rss_before_kb": rss0, "rss_peak_kb": rss1,
                  "traced_peak_bytes": traced_peak, "ops": ops}))
"""


def measure(path: Path, repeat: int = 5) -> dict:
    if path.suffix == ".gz":
        tmp = tempfile.NamedTemporaryFile("w", suffix=".ir", delete=False, encoding="utf-8")
        tmp.write(gzip.open(path, "rt", encoding="utf-8").read())
        tmp.close()
        src = Path(tmp.name)
    else:
        src = path
    size = src.stat().st_size
    runs = []
    for _ in range(repeat):
        r = subprocess.run([sys.executable, "-c", CHILD, str(src)], capture_output=True, text=True, check=True)
        runs.append(json.loads(r.stdout))
    if src is not path:
        os.unlink(src)
    best = min(runs, key=lambda r: r["parse_s"] + r["print_s"])
    best_cpu = min(runs, key=lambda r: r["parse_cpu_s"] + r["print_cpu_s"])
    mb = size / 1e6
    return {
        "file": path.name,
        "bytes": size,
        "ops": best["ops"],
        "parse_s": round(best["parse_s"], 4),
        "print_s": round(best["print_s"], 4),
        "canonical_print_s": round(best["canonical_print_s"], 4),
        "parse_print_MB_per_s": round(mb / (best["parse_s"] + best["print_s"]), 2),
        # CPU time of the process (time.process_time): what the machine's other jobs do not add to
        "parse_cpu_s": round(best_cpu["parse_cpu_s"], 4),
        "print_cpu_s": round(best_cpu["print_cpu_s"], 4),
        "parse_print_MB_per_cpu_s": round(mb / (best_cpu["parse_cpu_s"] + best_cpu["print_cpu_s"]), 2),
        "parse_print_MB_per_cpu_s_median": round(mb / statistics.median(
            r["parse_cpu_s"] + r["print_cpu_s"] for r in runs), 2),
        "parse_canonical_print_MB_per_s": round(mb / (best["parse_s"] + best["canonical_print_s"]), 2),
        "peak_rss_growth_MB": round((best["rss_peak_kb"] - best["rss_before_kb"]) / 1024, 1),
        "peak_rss_growth_x_input": round((best["rss_peak_kb"] - best["rss_before_kb"]) * 1024 / size, 2),
        "peak_python_alloc_MB": round(best["traced_peak_bytes"] / 1e6, 1),
        "peak_python_alloc_x_input": round(best["traced_peak_bytes"] / size, 2),
        "import_s": round(best["import_s"], 3),
        "runs": repeat,
    }


def main() -> None:
    files = [Path(a) for a in sys.argv[1:]] or sorted((HERE / "data").glob("*.ir.gz"))
    load_before = [round(x, 2) for x in os.getloadavg()]
    results = []
    for f in files:
        r = measure(f)
        results.append(r)
        print(f"{r['file']:45s} {r['bytes'] / 1e6:6.2f} MB  {r['ops']:6d} ops  parse {r['parse_s']:.3f}s  "
              f"print {r['print_s']:.3f}s  => {r['parse_print_MB_per_s']:5.1f} MB/s "
              f"(CPU: {r['parse_cpu_s']:.3f}s + {r['print_cpu_s']:.3f}s = {r['parse_print_MB_per_cpu_s']:.1f} MB/s) "
              f"(canonical printer {r['parse_canonical_print_MB_per_s']:.1f} MB/s)  "
              f"memory: parse+print allocate at peak {r['peak_python_alloc_MB']} MB = "
              f"{r['peak_python_alloc_x_input']}x input (RSS growth {r['peak_rss_growth_x_input']}x)")
    # (given files: results/parse_NAME.json, NAME the first file's name up to its first dot)
    out = HERE / "results" / ("parse.json" if not sys.argv[1:] else f"parse_{files[0].name.split('.')[0]}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "what": "distc parse + print of real Paddle dumps, best of 5 fresh processes (wall and CPU time)",
        "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "command": " ".join([".venv/bin/python bench/bench_parse.py", *sys.argv[1:]]),
        "python": platform.python_version(), "nproc": os.cpu_count(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": results,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
