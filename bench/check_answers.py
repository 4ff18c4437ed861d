"""The check answers of a distc checkout: for every stored program (tests/data, samples/,
bench/data, /work/shared/corpus) and for a few thousand corruptions of the shardable ones, the
exit status, stderr, stdout and output files (sha256) of ``distc opt -p verify`` (the full
verifier), ``distc fmt --check``, ``distc shard -q`` and, where that succeeds, ``distc shard`` with
its summary, ``--json``, ``--all-ranks``, ``--stage 0/3``, ``--dense``, ``--annotate-only``,
``--verify-each``, ``--startup`` and ``distc verify --ranks`` (the simulator) — the regression
set the checks' work keeps identical.  Each command runs in a process forked from one that
imported the checkout's distc (``PYTHONPATH``), through ``distc.cli.run`` as the executable does.

    PYTHONPATH=/tmp/base python bench/check_answers.py --out /tmp/base.json
    PYTHONPATH=$PWD   python bench/check_answers.py --out /tmp/new.json
    python bench/check_answers.py --compare /tmp/base.json /tmp/new.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import lzma
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIRS = [ROOT / "tests/data", ROOT / "samples", ROOT / "bench/data", Path("/work/shared/corpus")]
TIMEOUT = 120


def programs() -> list[Path]:
    out = []
    for d in DIRS:
        for p in sorted(d.rglob("*")):
            if p.is_file() and (".ir" in p.name or p.suffix == ".log"):
                out.append(p)
    return out


def text_of(p: Path) -> str:
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    elif data[:6] == b"\xfd7zXZ\x00":
        data = lzma.decompress(data)
    return data.decode("utf-8", "replace")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


LOG = None  # (a file the answers are appended to as they come, one JSON line each)


def run_case(argv: list[str], work: Path) -> dict:
    """One command in a forked child (cwd ``work``, emptied first): exit, stdout sha, stderr, outputs."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "out").mkdir(parents=True)  # (the --all-ranks patterns' folder)
    out_f, err_f = work / ".stdout", work / ".stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.chdir(work)
            fd_in = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd_in, 0)
            fo = os.open(out_f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fe = os.open(err_f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            signal.alarm(TIMEOUT)
            sys.argv = ["distc", *argv]
            import distc.cli

            distc.cli.run("distc")
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    err = err_f.read_text("utf-8", "replace").replace(str(work), "<WORK>")
    outs = {}
    for p in sorted(work.rglob("*")):
        if p.is_file() and p.name not in (".stdout", ".stderr"):
            outs[str(p.relative_to(work))] = digest(p.read_bytes())
    r = {"argv": argv, "exit": code, "stdout": digest(out_f.read_bytes()), "stderr": err, "outputs": outs}
    if LOG is not None:
        LOG.write(json.dumps(r) + "\n")
        LOG.flush()
    return r


# ------------------------------------------------------------------------------ corruptions
OPLINE = re.compile(r"^(\s*)\((%[^)]*)\) = \"([\w.]+)\" \(([^)]*)\)")
VAL = re.compile(r"%[\w.]+")


def corruptions(text: str, rng: random.Random, n: int) -> list[tuple[str, str]]:
    """``n`` corrupted copies of ``text``: (kind, text)."""
    lines = text.split("\n")
    ops = [i for i, line in enumerate(lines) if OPLINE.match(line)]
    with_operands = [i for i in ops if OPLINE.match(lines[i]).group(4).strip()]
    names = sorted({v for i in ops for v in VAL.findall(OPLINE.match(lines[i]).group(2))})
    opt = [i for i in ops if re.search(r'"pd_op\.(adamw_|adam_|sgd_|momentum_|lamb_)"', lines[i])]
    out: list[tuple[str, str]] = []

    def sub_once(line: str, pat: str, repl, kind: str) -> None:
        hits = list(re.finditer(pat, line))
        if not hits:
            return
        m = rng.choice(hits)
        new = m.group(0).__class__(repl(m) if callable(repl) else repl)
        out.append((kind, line[:m.start()] + new + line[m.end():]))

    kinds = ["operand", "delete", "dup_result", "dim", "dtype", "dims_mapping", "mesh_ids", "mesh_shape",
             "null_operand", "op_name", "swap", "drop_operand", "type_dims_mapping", "placements"]
    tries = 0
    while len(out) < n and tries < n * 20 and ops:
        tries += 1
        kind = rng.choice(kinds)
        k = rng.choice(ops)
        line = lines[k]
        new_lines = None
        if kind == "operand" and with_operands and names:
            k = rng.choice(with_operands)
            m = OPLINE.match(lines[k])
            vals = list(VAL.finditer(m.group(4)))
            if vals:
                v = rng.choice(vals)
                s = m.start(4) + v.start()
                e = m.start(4) + v.end()
                new_lines = lines[:k] + [lines[k][:s] + rng.choice(names) + lines[k][e:]] + lines[k + 1:]
        elif kind == "delete":
            new_lines = lines[:k] + lines[k + 1:]
        elif kind == "dup_result" and len(names) > 1:
            m = OPLINE.match(line)
            res = VAL.findall(m.group(2))
            if res:
                r = rng.choice(res)
                other = rng.choice(names)
                new_lines = lines[:k] + [line[:m.start(2)] + m.group(2).replace(r, other, 1) + line[m.end(2):]] + lines[k + 1:]
        elif kind == "null_operand" and opt:
            k = rng.choice(opt)
            m = OPLINE.match(lines[k])
            vals = list(VAL.finditer(m.group(4)))
            if vals:
                v = rng.choice(vals)
                s, e = m.start(4) + v.start(), m.start(4) + v.end()
                new_lines = lines[:k] + [lines[k][:s] + "<<NULL VALUE>>" + lines[k][e:]] + lines[k + 1:]
        elif kind == "drop_operand" and with_operands:
            k = rng.choice(with_operands)
            m = OPLINE.match(lines[k])
            parts = [p for p in m.group(4).split(", ")]
            if parts:
                del parts[rng.randrange(len(parts))]
                new_lines = lines[:k] + [lines[k][:m.start(4)] + ", ".join(parts) + lines[k][m.end(4):]] + lines[k + 1:]
        elif kind == "swap":
            j = ops.index(k)
            if j + 1 < len(ops):
                k2 = ops[j + 1]
                new_lines = list(lines)
                new_lines[k], new_lines[k2] = lines[k2], lines[k]
        elif kind == "op_name":
            m = OPLINE.match(line)
            choices = ["pd_op.add", "pd_op.matmul", "pd_op.sgd_", "pd_op.adamw_", "pd_op.relu", "pd_op.full",
                       "builtin.combine", "pd_op.assign_out_", "pd_op.c_allreduce_sum_", "dist_op.reshard",
                       "pd_op.all_gather", "pd_op.nosuchop"]
            new_lines = lines[:k] + [line[:m.start(3)] + rng.choice(choices) + line[m.end(3):]] + lines[k + 1:]
        else:
            pats = {
                "dim": (r"(?<=tensor<)[0-9x-]+(?=x\w)", lambda m: "x".join(
                    (rng.choice(["-2", "0", "3", "7", "99999999999999999999", "1"]) if i == rng.randrange(
                        len(m.group(0).split("x"))) else d) for i, d in enumerate(m.group(0).split("x")))),
                "dtype": (r"x(f32|f16|bf16|i64|i32|b)(?=[,>])", lambda m: "x" + rng.choice(["f16", "bf16", "i64", "f64", "b"])),
                "dims_mapping": (r"dims_mappings:\[[^\]]*\]", lambda m: "dims_mappings:" + rng.choice(
                    ["[]", "[0]", "[-1]", "[0,-1]", "[-1,1]", "[5,-1]", "[0,0]", "[1,-1,-1]", "[-1,-1,-1,-1]"])),
                "type_dims_mapping": (r"(?<=xf32, )mesh_shape:[^>]*dims_mappings:\[[^\]]*\]", lambda m: re.sub(
                    r"dims_mappings:\[[^\]]*\]", "dims_mappings:" + rng.choice(["[0]", "[-1,-1,-1]", "[]", "[3,-1]"]),
                    m.group(0))),
                "mesh_ids": (r"process_ids:\[[^\]]*\]", lambda m: "process_ids:" + rng.choice(
                    ["[0,0,2,3]", "[]", "[-1,1]", "[0,1]", "[0,1,2,3,4,5,6,7]", "[7,6,5,4]", "[0,1,2,2]"])),
                "mesh_shape": (r"(mesh_shape|shape):\[[^\]]*\](?=,process_ids)", lambda m: m.group(1) + ":" + rng.choice(
                    ["[2,0]", "[4]", "[]", "[1,4]", "[2,2,2]", "[0]"])),
                "placements": (r"Shard\(dim=\d\)|Replicate\(\)|Partial\([^)]*\)", lambda m: rng.choice(
                    ["Shard(dim=0)", "Shard(dim=1)", "Replicate()", "Partial(reduce_type=SUM)", "Shard(dim=5)"])),
            }
            if kind in pats:
                pat, repl = pats[kind]
                hits = list(re.finditer(pat, line))
                if hits:
                    m = rng.choice(hits)
                    new_lines = lines[:k] + [line[:m.start()] + repl(m) + line[m.end():]] + lines[k + 1:]
        if new_lines is not None:
            t = "\n".join(new_lines)
            if t != text:
                out.append((kind, t))
    return out


def cases(tmp: Path, n_corrupt: int) -> list[tuple[str, list[str]]]:
    """(id, argv) in a fixed order; corrupted inputs written under ``tmp``."""
    out: list[tuple[str, list[str]]] = []
    for p in programs():
        s = str(p)
        out.append((f"verify {s}", ["opt", "-p", "verify", s, "-o", "o.ir"]))
        out.append((f"fmt {s}", ["fmt", "--check", s]))
        out.append((f"shard {s}", ["shard", s, "-q", "-o", "o.ir"]))
    return out


def shardable_more(p: str, size: int) -> list[tuple[str, list[str]]]:
    """The variants run on a program ``shard -q`` accepted."""
    out = [(f"shard-summary {p}", ["shard", p, "-o", "o.ir"]),
           (f"shard-json {p}", ["shard", p, "-o", "o.ir", "--json"])]
    if size < 3_000_000:
        out += [(f"shard-{v} {p}", ["shard", p, "-q", "-o", "o.ir", *v.split()])
                for v in ["--stage 0", "--stage 3", "--dense", "--annotate-only", "--verify-each", "--rank 1",
                          "--amp"]]
        out.append((f"shard-all {p}", ["shard", p, "-q", "--all-ranks", "-j", "1", "-o", "out/m.r{rank}.ir"]))
        out.append((f"shard-all-summary {p}", ["shard", p, "--all-ranks", "-j", "1", "-o", "out/m.r{rank}.ir"]))
        st = re.sub(r"before_partition", "startup_after_remove", p)
        if st != p and os.path.exists(st):
            out.append((f"shard-startup {p}", ["shard", p, "-q", "-o", "o.ir", "--startup", st,
                                               "--startup-out", "s.ir"]))
            out.append((f"shard-startup-summary {p}", ["shard", p, "-o", "o.ir", "--startup", st,
                                                       "--startup-out", "s.ir"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--corrupt", type=int, default=40, help="corruptions per shardable program")
    ap.add_argument("--compare", nargs=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--variants-only", metavar="ANSWERS", help="only the variants of the programs ANSWERS "
                    "(an earlier --out) found shardable: a quick rerun after a change")
    ap.add_argument("--corrupt-max", type=int, default=300_000, help="corrupt programs up to this size (and mlp96)")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    import numpy  # noqa: F401  (verify's simulator: loaded once, before the forks)
    import distc.cli  # noqa: F401
    import distc.commands.shard  # noqa: F401

    print("distc from", distc.cli.__file__, flush=True)
    global LOG
    LOG = open(args.out + ".log", "w")
    tmp = Path(tempfile.mkdtemp(prefix="check_answers_"))
    work = tmp / "w"
    rng = random.Random(23)
    res: dict[str, dict] = {}
    t0 = time.time()
    todo = cases(tmp, args.corrupt)
    if args.limit:
        todo = todo[:args.limit]
    shardable: list[str] = []
    if args.variants_only:
        earlier = json.loads(Path(args.variants_only).read_text())
        shardable = [r["argv"][1] for cid, r in earlier.items() if cid.startswith("shard ") and r["exit"] == 0]
        todo = []
    for k, (cid, argv) in enumerate(todo):
        r = res[cid] = run_case(argv, work)
        if cid.startswith("shard ") and r["exit"] == 0:
            shardable.append(argv[1])
        if k % 500 == 0:
            print(f"{k}/{len(todo)} {time.time() - t0:.0f}s", flush=True)
    print(f"{len(shardable)} shardable", flush=True)
    for p in shardable:
        size = len(text_of(Path(p)))
        for cid, argv in shardable_more(p, size):
            res[cid] = run_case(argv, work)
        if size < 200_000 and res[f"shard-all {p}"]["exit"] == 0:
            # the proof: rebuild the ranks, then distc verify (the simulator) over them
            shutil.rmtree(tmp / "ranks", ignore_errors=True)
            keep = tmp / "ranks"
            keep.mkdir()
            r0 = run_case(["shard", p, "-q", "--all-ranks", "-j", "1", "-o", str(keep / "m.r{rank}.ir")], work)
            if r0["exit"] == 0:
                res[f"verify-ranks {p}"] = run_case(["verify", p, "--ranks", str(keep / "m.r{rank}.ir")], work)
                v = res[f"verify-ranks {p}"]
                v["stderr"] = v["stderr"].replace(str(keep), "<RANKS>")
                v["argv"] = [a.replace(str(keep), "<RANKS>") for a in v["argv"]]
    print(f"variants done {time.time() - t0:.0f}s, {len(res)} answers", flush=True)
    if args.variants_only:
        Path(args.out).write_text(json.dumps(res, indent=0, sort_keys=True))
        return
    # corruptions of the shardable programs under 1 MB (and of mlp96, a few)
    cdir = tmp / "c"
    cdir.mkdir()
    n = 0
    for p in shardable:
        text = text_of(Path(p))
        if len(text) > args.corrupt_max and "mlp96.s0" not in p:
            continue
        k = args.corrupt if len(text) <= args.corrupt_max else 6
        for j, (kind, t) in enumerate(corruptions(text, rng, k)):
            f = cdir / f"{n:05d}.{kind}.ir"
            n += 1
            f.write_text(t)
            for cid, argv in [("verify", ["opt", "-p", "verify", str(f), "-o", "o.ir"]),
                              ("shard", ["shard", str(f), "-q", "-o", "o.ir"]),
                              ("fmt", ["fmt", "--check", str(f)])]:
                key = f"corrupt-{cid} {p} #{j} {kind}"
                r = res[key] = run_case(argv, work)
                r["stderr"] = r["stderr"].replace(str(cdir), "<C>")
                r["argv"] = [a.replace(str(cdir), "<C>") for a in argv]
            if res[f"corrupt-shard {p} #{j} {kind}"]["exit"] == 0 and len(t) < 300_000:
                key = f"corrupt-shard-all {p} #{j} {kind}"
                res[key] = run_case(["shard", str(f), "-q", "--all-ranks", "-j", "1", "-o", "out/m.r{rank}.ir"], work)
                res[key]["stderr"] = res[key]["stderr"].replace(str(cdir), "<C>")
                res[key]["argv"] = []
        if n and n % 200 < args.corrupt:
            print(f"{n} corruptions {time.time() - t0:.0f}s", flush=True)
    print(f"done: {len(res)} answers, {n} corruptions, {time.time() - t0:.0f}s", flush=True)
    Path(args.out).write_text(json.dumps(res, indent=0, sort_keys=True))
    shutil.rmtree(tmp, ignore_errors=True)


def compare(a: str, b: str) -> None:
    """The answers of two runs; a --variants-only run against a whole one: the answers both hold."""
    A, B = json.loads(Path(a).read_text()), json.loads(Path(b).read_text())
    if len(A) != len(B) and min(len(A), len(B)) < max(len(A), len(B)) // 2:
        both = set(A) & set(B)
        A, B = {k: A[k] for k in both}, {k: B[k] for k in both}
    bad = 0
    for k in sorted(set(A) | set(B)):
        if A.get(k) != B.get(k):
            bad += 1
            if bad <= 20:
                print("DIFF", k)
                for f in ("exit", "stdout", "stderr", "outputs"):
                    x, y = (A.get(k) or {}).get(f), (B.get(k) or {}).get(f)
                    if x != y:
                        print(f"  {f}: {str(x)[:600]!r}\n     vs {str(y)[:600]!r}")
    exits: dict = {}
    for r in A.values():
        exits[r["exit"]] = exits.get(r["exit"], 0) + 1
    print(f"{len(A)} vs {len(B)} answers, {bad} differ; exits in the first: {dict(sorted(exits.items()))}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
