"""A `distc shard` run's start-up, split: the interpreter's start, the imports, the work (issue 23: the
imports under 0.1 s).

For each checkout given (this one by default; give another, e.g. `git archive BASE | tar -x -C DIR`,
to compare: the runs interleaved so that both see the same machine; each run with PYTHONPATH=CHECKOUT
and its bytecode compiled first, as `pip install` does), median of --repeat fresh processes:

  start      `python -c "import os; os._exit(0)"`: the interpreter's own start (site, encodings)
  imports    `python -c "import distc.cli, ..."` of every distc module a `distc shard --rank 0` run
             imports (those it imports late included), minus `start`
  importtime the sum of the top-level entries of `python -X importtime -m distc shard ...` (what
             bench_shard.py reports as import_s; the interpreter's own imports included).  It misses
             the modules imported by importlib.import_module (their own time: the command's module,
             the reshard functions), which -X importtime does not see; `imports` has them
  help       `python -m distc --help`, whole
  run        `python -m distc shard SAMPLE --rank 0 -o OUT -q`, whole; `work` is run - start - imports

CPU figures are the children's user + system time (getrusage), wall figures perf_counter; the load
average is printed with them (a loaded machine slows every figure, the wall ones most).  Usage:

    .venv/bin/python bench/bench_startup.py [--repeat 15] [--sample samples/mlp_dp2mp2_adamw.ir]
                                            [--checkout DIR ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LIST = r"""
import json, sys
before = set(sys.modules)
sys.argv = ["distc", *json.loads(sys.argv[1])]
from distc.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps([m for m in sys.modules if m.startswith("distc") and m not in before]))
"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], cwd: str, env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one process."""
    c0, t0 = _cpu(), time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, _cpu() - c0


def importtime(cmd: list[str], cwd: str, env: dict) -> float:
    r = subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    total = 0
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and not line.startswith("import time: self"):
            _, cum, name = line[len("import time:"):].split("|")
            if not name[1:].startswith(" "):
                total += int(cum)
    return total / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--sample", default=str(ROOT / "samples" / "mlp_dp2mp2_adamw.ir"))
    ap.add_argument("--checkout", action="append", default=None,
                    help="a checkout whose distc is imported (default: this one); repeat to compare")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    checkouts = [str(Path(c).resolve()) for c in args.checkout or [ROOT]]
    sample = str(Path(args.sample).resolve())
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        out = str(Path(d) / "out.ir")
        shard = ["-m", "distc", "shard", sample, "--rank", "0", "-o", out, "-q"]
        cmds, envs = {}, {}
        for c in checkouts:
            envs[c] = env = dict(os.environ, PYTHONPATH=c)
            subprocess.run([py, "-m", "compileall", "-q", str(Path(c) / "distc")], check=True)
            mods = json.loads(subprocess.run([py, "-c", LIST, json.dumps(shard[2:])], cwd=d, env=env, check=True,
                                             capture_output=True, text=True).stdout.strip().splitlines()[-1])
            # distc.cli first, as the command imports it (the rest in the order they were loaded)
            mods = ["distc.cli", *(m for m in mods if m != "distc.cli")]
            # each ends as `distc` does (os._exit: no tear-down of the modules and objects)
            cmds[c] = dict(start=[py, "-c", "import os; os._exit(0)"],
                           imports=[py, "-c", "import " + ", ".join(mods) + "; import os; os._exit(0)"],
                           help=[py, "-m", "distc", "--help"], run=[py, *shard], modules=len(mods))
        res = {c: {k: [] for k in ("start", "imports", "help", "run", "importtime")} for c in checkouts}
        loads = []
        for _ in range(args.repeat):
            for c in checkouts:
                for k in ("start", "imports", "help", "run"):
                    res[c][k].append(timed(cmds[c][k], d, envs[c]))
                res[c]["importtime"].append(importtime([py, "-X", "importtime", *shard], d, envs[c]))
            loads.append(os.getloadavg()[0])
    doc = {"repeat": args.repeat, "load_1min": [round(min(loads), 2), round(statistics.median(loads), 2),
                                                round(max(loads), 2)], "sample": Path(sample).name, "runs": {}}
    print(f"load (1 min) {doc['load_1min'][0]}-{doc['load_1min'][2]}, median {doc['load_1min'][1]}; "
          f"median of {args.repeat} processes; ms")
    for c in checkouts:
        r = res[c]
        med = {k: (statistics.median(w for w, _ in r[k]), statistics.median(c for _, c in r[k]))
               for k in ("start", "imports", "help", "run")}
        imp = (med["imports"][0] - med["start"][0], med["imports"][1] - med["start"][1])
        work = (med["run"][0] - med["imports"][0], med["run"][1] - med["imports"][1])
        row = {"distc_modules": cmds[c]["modules"],
               "start_ms": [round(x * 1e3, 1) for x in med["start"]],
               "imports_ms": [round(x * 1e3, 1) for x in imp],
               "importtime_ms": round(statistics.median(r["importtime"]) * 1e3, 1),
               "help_ms": [round(x * 1e3, 1) for x in med["help"]],
               "run_ms": [round(x * 1e3, 1) for x in med["run"]],
               "work_ms": [round(x * 1e3, 1) for x in work]}
        doc["runs"][c] = row
        print(f"{c}: {row['distc_modules']} distc modules")
        print("  (wall, CPU)  start {start_ms}  imports {imports_ms}  work {work_ms}  | run {run_ms}  "
              "help {help_ms}  | importtime sum (wall) {importtime_ms}".format(**row))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
