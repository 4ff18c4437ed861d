"""`distc shard` (one rank, and every rank) versus Paddle's own passes, timed in the same run.

For each deep MLP program (bench/data/mlpN.s0.r0.before_partition.ir.gz, printed by Paddle 3.3.1
itself; see gen_big.py; mesh [[0,1],[2,3]], so 4 ranks) and each repeat, in fresh processes,
interleaved so that all see the same machine state:

  distc one   `python -m distc shard IN --rank 0 -o OUT -q`: the whole command (process start,
              imports, parse, shard-optimizer, partition, reshard, print, write);
  distc all   `python -m distc shard IN --all-ranks -o 'DIR/main.r{rank}.ir' -q`: the same for all
              4 ranks (rank-independent passes once, ranks in forked workers, -j = cores);
  Paddle      `gen_big.py --worker N s1 0` with PADDLE_TRAINER_ID=R, once per rank R (Paddle lowers
              one rank per process, as it must): builds the model and times (perf_counter) only
              `apply_partition_pass` + `ReshardPasses.apply_reshard_pass` on the stage-1 program,
              Paddle's two passes alone, without its own program building or printing.

The imports of a `--rank 0` run are timed too (`python -X importtime`, every import of the run
summed, deferred ones included: ``import_s``; issue 23's target is 0.1 s).

distc's bytecode is compiled first (python -m compileall distc), as `pip install` does.

Reported per program: medians over the repeats, and the ratios the issue sets targets for, both
against Paddle's rank-0 time of the same repeat: one rank / Paddle rank 0 (issue 23: <= 0.1) and all
ranks / Paddle rank 0 (issue 23: <= 0.25); the spread is the range of the per-repeat ratios.  The
machine's load average is recorded before and after (timings are only as quiet as the machine).
Each is given in wall time and in CPU time (distc: user + system time of its process and of the
workers it forks, summed; Paddle: the thread time of its two passes), which a shared machine's
other jobs add much less noise to.

Paddle is not a dependency of distc: give its interpreter with --paddle-python (default
/work/paddle/bin/python or /tmp/paddle/bin/python, when one exists).  Without it only distc is
timed and the Paddle columns are read from results/paddle_passes*.json (rank 0) and marked so.

Usage:  .venv/bin/python bench/bench_shard.py [--repeat 3] [--paddle-python PY] [LAYERS ...]
        (default layers: 96 256 680; writes bench/results/shard.json)
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
RANKS = (0, 1, 2, 3)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], **kw) -> tuple[float, float]:
    """(wall, CPU) seconds of a command; CPU is user + system time of the process and of every
    process it forked and reaped (the --all-ranks workers)."""
    c0 = _children_cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)
    return time.perf_counter() - t0, _children_cpu() - c0


def distc_one(src: Path, out: Path) -> tuple[float, float]:
    return timed([sys.executable, "-m", "distc", "shard", str(src), "--rank", "0", "-o", str(out), "-q"])


def distc_all(src: Path, outdir: Path) -> tuple[float, float]:
    return timed([sys.executable, "-m", "distc", "shard", str(src), "--all-ranks", "-o",
                  str(outdir / "main.r{rank}.ir"), "-q"])


def distc_imports(src: Path, out: Path) -> tuple[float, int]:
    """(seconds, modules) of every import of `distc shard IN --rank 0` (those deferred to the run
    included): the top-level entries of ``python -X importtime``, summed; the command as timed above."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "distc", "shard", str(src), "--rank", "0", "-o",
                        str(out), "-q"], check=True, cwd=ROOT, capture_output=True, text=True)
    total, n = 0, 0
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and not line.startswith("import time: self"):
            _, cum, name = line[len("import time:"):].split("|")
            n += 1
            if not name[1:].startswith(" "):  # (a top-level entry holds its children's times)
                total += int(cum)
    return total / 1e6, n


def paddle_time(py: str, layers: int, rank: int) -> tuple[float, float]:
    """(wall, CPU) seconds of Paddle's two passes in one process; CPU is the time of the thread
    that runs them (time.thread_time: threads Paddle may start are not counted, in its favour)."""
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "w.json")
        # (one OpenMP thread: on a loaded machine Paddle's threads wait on each other for minutes;
        # its pass times barely move, 2.9-3.2 s of CPU on mlp96 either way at load 8-10)
        env = dict(os.environ, PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM="8",
                   GLOG_minloglevel="2", OMP_NUM_THREADS="1")
        subprocess.run([py, str(HERE / "gen_big.py"), "--worker", str(layers), "s1", "0", js], env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t = json.load(open(js))["timings"]
        return t["partition"] + t["reshard"], t["partition_cpu"] + t["reshard_cpu"]


def stored_paddle(layers: int) -> list[float] | None:
    for f in sorted((HERE / "results").glob("paddle_passes*.json")):
        for r in json.load(open(f))["results"]:
            if r["layers"] == layers and r["stage"] == "s1":
                return r["total_s"]
    return None


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def r3(xs):
    return [round(x, 3) for x in xs]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("layers", nargs="*", type=int, default=[96, 256, 680])
    ap.add_argument("--repeat", type=int, default=3)
    default_py = next((p for p in ("/work/paddle/bin/python", "/tmp/paddle/bin/python") if os.path.exists(p)), None)
    ap.add_argument("--paddle-python", default=default_py)
    ap.add_argument("--out", default=str(HERE / "results" / "shard.json"))
    ap.add_argument("--paddle-ranks", default="0,1,2,3",
                    help="the ranks Paddle is timed on (the ratios need only rank 0; a Paddle process of mlp680 "
                         "takes a minute)")
    args = ap.parse_args()
    paddle_ranks = tuple(int(r) for r in args.paddle_ranks.split(","))
    if 0 not in paddle_ranks:
        ap.error("--paddle-ranks must hold rank 0 (the ratios are against Paddle's rank-0 time)")
    # distc as installed: `pip install` compiles the bytecode; an editable install under
    # PYTHONDONTWRITEBYTECODE=1 would compile every module on every run instead
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "distc")], check=True)
    rows = []
    load_before = load()
    for n in args.layers:
        gz = HERE / "data" / f"mlp{n}.s0.r0.before_partition.ir.gz"
        if not gz.exists():
            print(f"skip {n}: {gz.name} missing (make it with gen_big.py)")
            continue
        one, every, pad = [], [], {r: [] for r in paddle_ranks}
        one_cpu, every_cpu, pad_cpu = [], [], {r: [] for r in paddle_ranks}
        imports, modules = [], 0
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / gz.name[:-3]
            src.write_bytes(gzip.decompress(gz.read_bytes()))
            out = Path(d) / "out.ir"
            outdir = Path(d) / "all"
            outdir.mkdir()
            for _ in range(args.repeat):  # interleaved: every column sees the same machine state
                for (w, c), walls, cpus in ((distc_one(src, out), one, one_cpu),
                                            (distc_all(src, outdir), every, every_cpu)):
                    walls.append(w)
                    cpus.append(c)
                t_imp, modules = distc_imports(src, out)
                imports.append(t_imp)
                if args.paddle_python:
                    for r in paddle_ranks:
                        w, c = paddle_time(args.paddle_python, n, r)
                        pad[r].append(w)
                        pad_cpu[r].append(c)
            size_in, size_out = src.stat().st_size, out.stat().st_size
            assert out.read_bytes() == (outdir / "main.r0.ir").read_bytes(), "--all-ranks differs from --rank 0"
        row = dict(layers=n, input_bytes=size_in, output_bytes=size_out,
                   distc_one_rank_s=r3(one), distc_all_ranks_s=r3(every),
                   distc_one_rank_median_s=round(statistics.median(one), 3),
                   distc_all_ranks_median_s=round(statistics.median(every), 3),
                   distc_one_rank_cpu_s=r3(one_cpu), distc_all_ranks_cpu_s=r3(every_cpu),
                   distc_one_rank_cpu_median_s=round(statistics.median(one_cpu), 3),
                   distc_all_ranks_cpu_median_s=round(statistics.median(every_cpu), 3),
                   # the imports of a --rank 0 run (python -X importtime, deferred ones included; issue 23: < 0.1 s)
                   import_s=r3(imports), import_median_s=round(statistics.median(imports), 3), import_modules=modules)
        if args.paddle_python:
            p0 = pad[0]
            ratio_one = [a / b for a, b in zip(one, p0)]
            ratio_all = [a / b for a, b in zip(every, p0)]
            row.update(
                paddle_source="measured in this run, once per rank and repeat",
                paddle_rank_s={str(r): r3(v) for r, v in pad.items()},
                paddle_rank0_median_s=round(statistics.median(p0), 3),
                paddle_all_ranks_median_s=(round(statistics.median([sum(x) for x in zip(*pad.values())]), 3)
                                           if len(pad) == len(RANKS) else None),
                one_rank_vs_paddle_rank0=round(statistics.median(ratio_one), 3),
                one_rank_vs_paddle_rank0_range=[round(min(ratio_one), 3), round(max(ratio_one), 3)],
                all_ranks_vs_paddle_rank0=round(statistics.median(ratio_all), 3),
                all_ranks_vs_paddle_rank0_range=[round(min(ratio_all), 3), round(max(ratio_all), 3)])
            # the same in CPU time (distc: its process and workers; Paddle: the thread of its passes)
            c0 = pad_cpu[0]
            cratio_one = [a / b for a, b in zip(one_cpu, c0)]
            cratio_all = [a / b for a, b in zip(every_cpu, c0)]
            row.update(
                paddle_rank_cpu_s={str(r): r3(v) for r, v in pad_cpu.items()},
                paddle_rank0_cpu_median_s=round(statistics.median(c0), 3),
                one_rank_vs_paddle_rank0_cpu=round(statistics.median(cratio_one), 3),
                one_rank_vs_paddle_rank0_cpu_range=[round(min(cratio_one), 3), round(max(cratio_one), 3)],
                all_ranks_vs_paddle_rank0_cpu=round(statistics.median(cratio_all), 3),
                all_ranks_vs_paddle_rank0_cpu_range=[round(min(cratio_all), 3), round(max(cratio_all), 3)])
        else:
            p0 = stored_paddle(n) or []
            row.update(paddle_source="rank 0 from results/paddle_passes*.json (Paddle not available in this run)",
                       paddle_rank_s={"0": r3(p0)},
                       paddle_rank0_median_s=round(statistics.median(p0), 3) if p0 else None)
            if p0:
                row["one_rank_vs_paddle_rank0"] = round(row["distc_one_rank_median_s"] / statistics.median(p0), 3)
                row["all_ranks_vs_paddle_rank0"] = round(row["distc_all_ranks_median_s"] / statistics.median(p0), 3)
        rows.append(row)
        msg = (f"mlp{n}: {size_in / 1e6:.1f} MB -> {size_out / 1e6:.1f} MB  distc --rank 0 "
               f"{row['distc_one_rank_median_s']:.2f}s, --all-ranks {row['distc_all_ranks_median_s']:.2f}s; "
               f"Paddle rank 0 {row['paddle_rank0_median_s']}s")
        if "one_rank_vs_paddle_rank0" in row:
            msg += (f"  -> one rank {row['one_rank_vs_paddle_rank0']}x "
                    f"{row.get('one_rank_vs_paddle_rank0_range', '')}, all ranks {row['all_ranks_vs_paddle_rank0']}x "
                    f"{row.get('all_ranks_vs_paddle_rank0_range', '')} of Paddle's rank-0 time")
        if "one_rank_vs_paddle_rank0_cpu" in row:
            msg += (f"\n  CPU: distc --rank 0 {row['distc_one_rank_cpu_median_s']:.2f}s, --all-ranks "
                    f"{row['distc_all_ranks_cpu_median_s']:.2f}s; Paddle rank 0 {row['paddle_rank0_cpu_median_s']}s"
                    f"  -> one rank {row['one_rank_vs_paddle_rank0_cpu']}x "
                    f"{row['one_rank_vs_paddle_rank0_cpu_range']}, all ranks {row['all_ranks_vs_paddle_rank0_cpu']}x "
                    f"{row['all_ranks_vs_paddle_rank0_cpu_range']}")
        msg += f"\n  imports of a --rank 0 run: {row['import_median_s']:.3f}s median ({modules} modules; {r3(imports)})"
        print(msg, flush=True)
        write(args, rows, load_before)  # (after each program: a run cut short keeps what it measured)


def write(args, rows: list, load_before: list) -> None:
    Path(args.out).write_text(json.dumps(dict(
        what="distc shard end to end (fresh process: start, parse, passes, print, write), one rank (--rank 0) and "
             "all 4 ranks (--all-ranks), vs Paddle 3.3.1's apply_partition_pass + apply_reshard_pass alone, once per "
             "rank; medians of interleaved fresh-process runs; ratios against Paddle's rank-0 time of the same repeat; "
             "wall time and CPU time (distc: user + system of the process and its workers; Paddle: thread time of "
             "its passes)",
        command="PYTHONPATH= .venv/bin/python bench/bench_shard.py --repeat %d --paddle-ranks %s %s" % (
            args.repeat, args.paddle_ranks, " ".join(map(str, args.layers))),
        python=platform.python_version(), nproc=os.cpu_count(), repeat=args.repeat,
        load_average_before=load_before, load_average_after=load(),
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), results=rows), indent=2) + "\n")


if __name__ == "__main__":
    main()
