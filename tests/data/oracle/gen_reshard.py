#!/usr/bin/env python3
"""Generate reshard oracle cases with real PaddlePaddle 3.3.1 (CPU).

Same scheme as shared/corpus/paddle-3.3.1/reshard: for every case NAME and rank R,
  NAME.rR.before.ir   str(main) before any pass (rank independent)
  NAME.rR.after.ir    str(clone) after ReshardPasses.apply_reshard_pass(clone)
  NAME.rR.error.txt   instead of both, the last line of the exception Paddle raised

Usage (with the throwaway venv that has paddlepaddle==3.3.1 and numpy<2.3):
  /tmp/paddle/bin/python gen_reshard.py                  # all groups, all ranks -> ./reshard/
  /tmp/paddle/bin/python gen_reshard.py --verify CORPUS  # rank-0 corpus cases into a temp dir,
                                                         # diffed against CORPUS (ring ids renamed)
  /tmp/paddle/bin/python gen_reshard.py --out DIR [GROUP...]  # elsewhere / only some groups
  /tmp/paddle/bin/python gen_reshard.py --list           # print the case table (markdown)

One Python process is started per (group, rank); the environment is set before
`import paddle` (PYTHONHASHSEED=0, PADDLE_TRAINER_ID=rank, PADDLE_TRAINERS_NUM=8).
Within a process the cases of the group run in the fixed order below, so ring ids are
reproducible, but they depend on the group (compare them up to a bijective renaming).
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "reshard")

# ----------------------------------------------------------------------------- cases
# A mesh is (nested process ids, dim names). Placements are strings of tokens:
# R, S<d>, P (SUM), Pavg, Pmax -- one token per mesh dim.

M2 = ([0, 1], ["x"])
M3 = ([0, 1, 2], ["x"])
M22 = ([[0, 1], [2, 3]], ["x", "y"])
M222 = ([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], ["x", "y", "z"])
M2B = ([2, 3], ["x"])
M4 = ([0, 1, 2, 3], ["x"])
M4567 = ([4, 5, 6, 7], ["x"])
M45_67 = ([[4, 5], [6, 7]], ["x", "y"])
M45 = ([4, 5], ["x"])
M67 = ([6, 7], ["x"])
M01_2D = ([[0, 1]], ["x", "y"])


def case(name, src, sp, dst, dp, shape, ranks):
    return dict(name=name, src=src, sp=sp, dst=dst, dp=dp, shape=list(shape), ranks=list(ranks))


def corpus_cases():
    """The 124 cases of the shared corpus (rank 0 there); here for ranks in the meshes."""
    out = []
    p1 = ["R", "P", "S0", "S1", "Pavg", "Pmax"]
    for a in p1:
        for b in p1:
            if a != b:
                out.append(case(f"m2_{a}_to_{b}", M2, a, M2, b, (4, 8), [0, 1]))
    p2 = ["RR", "S0R", "RS1", "S0S1", "PR", "RP", "PS1", "S1S0", "PP", "S0S0"]
    for a in p2:
        for b in p2:
            if a != b:
                out.append(case(f"m22_{a}_to_{b}", M22, a, M22, b, (8, 12), [0, 1, 2, 3]))
    for a in ["R", "S0", "S1", "P"]:
        out.append(case(f"cross_m2_{a}", M2, a, M2B, a, (4, 8), [0, 1, 2, 3]))
    return out


def uneven1d_cases():
    out = []
    pl = ["R", "S0", "S1", "P"]
    for mname, mesh, n in (("u2", M2, 2), ("u3", M3, 3)):
        for shape in ((5, 7), (7, 5)):
            sname = "x".join(map(str, shape))
            for a in pl:
                for b in pl:
                    if a != b:
                        out.append(case(f"{mname}_{sname}_{a}_to_{b}", mesh, a, mesh, b, shape, range(n)))
    return out


def uneven2d_cases():
    pairs = [("RR", "S0S1"), ("S0S1", "RR"), ("S0R", "RR"), ("RS1", "RR"), ("S0S1", "S1S0"),
             ("S0S0", "RR"), ("RR", "S0S0"), ("PR", "S0R"), ("PS1", "RS1"), ("PP", "S0S1"),
             ("S0R", "RS0"), ("RS1", "S1R")]
    return [case(f"m22u_7x9_{a}_to_{b}", M22, a, M22, b, (7, 9), range(4)) for a, b in pairs]


def mesh3d_cases():
    pairs = [("RRR", "S0S1S2"), ("S0S1S2", "RRR"), ("RRS2", "RRR"), ("RRR", "RRS2"),
             ("S2RR", "RRS2"), ("S0S1S2", "S2S1S0"), ("PRR", "RRR"), ("RPR", "RRS2"),
             ("PPP", "RRR"), ("RRP", "S0RR"), ("S0RR", "RRP"), ("S2S2R", "RRR"),
             ("S0RS2", "RS1S2"), ("PRS2", "S1RS2")]
    return [case(f"m222_{a}_to_{b}", M222, a, M222, b, (4, 8, 12), (0, 5)) for a, b in pairs]


def cross_cases():
    out = []
    pairs = [("S0", "R"), ("R", "S1"), ("P", "R"), ("S0", "S1"), ("S1", "S0"), ("R", "S0"),
             ("P", "S0"), ("R", "P")]
    for a, b in pairs:
        out.append(case(f"cross_m2_{a}_to_{b}", M2, a, M2B, b, (4, 8), range(4)))
    # global mesh <-> sub-mesh
    for a, b in (("RR", "R"), ("S0R", "S0"), ("RS1", "S1"), ("S0S1", "R"), ("PR", "R"), ("RP", "R")):
        out.append(case(f"g22_to_m2_{a}_to_{b}", M22, a, M2, b, (8, 12), range(4)))
    for a, b in (("R", "RR"), ("S0", "S0R"), ("S1", "RS1"), ("R", "S0S1"), ("P", "RR")):
        out.append(case(f"m2_to_g22_{a}_to_{b}", M2, a, M22, b, (8, 12), range(4)))
    for a, b in (("R", "R"), ("S0", "R"), ("R", "S0"), ("S0", "S0")):
        out.append(case(f"g4_to_m2_{a}_to_{b}", M4, a, M2, b, (8, 12), range(4)))
        out.append(case(f"m2_to_g4_{a}_to_{b}", M2, a, M4, b, (8, 12), range(4)))
    return out


def offset_cases():
    out = []
    for a, b in (("R", "S0"), ("S0", "R"), ("S1", "S0"), ("P", "R"), ("P", "S1"), ("R", "P"),
                 ("S0", "S1")):
        out.append(case(f"m4567_{a}_to_{b}", M4567, a, M4567, b, (8, 12), (4, 6)))
    for a, b in (("RR", "S0S1"), ("S0S1", "RR"), ("PR", "RR"), ("RP", "RS1"), ("S0R", "RS0"),
                 ("RR", "PR")):
        out.append(case(f"m45_67_{a}_to_{b}", M45_67, a, M45_67, b, (8, 12), (4, 6)))
    for a, b in (("R", "R"), ("S0", "S0"), ("S0", "R"), ("P", "R")):
        out.append(case(f"cross_m45_m67_{a}_to_{b}", M45, a, M67, b, (4, 8), (4, 6)))
    return out


def partial_kinds_cases():
    """Partial(MAX/AVG) next to a shard: the nd-mesh path splits and concatenates a value still
    partial over another mesh dim (which dist attr do split and concat keep?)."""
    pairs = [("PmaxS1", "RR"), ("PavgS1", "RR"), ("S1Pmax", "RR"), ("S0Pavg", "RR"), ("PmaxS1", "S0R"),
             ("RPmax", "S1R")]
    out = [case(f"m22pk_{a}_to_{b}", M22, a, M22, b, (8, 12), (0, 3)) for a, b in pairs]
    out.append(case("m222pk_S2RPmax_to_RRR", M222, "S2RPmax", M222, "RRR", (8, 12, 4), (0, 5)))
    return out


GROUPS = {
    "corpus": corpus_cases,
    "partial_kinds": partial_kinds_cases,
    "uneven1d": uneven1d_cases,
    "uneven2d": uneven2d_cases,
    "mesh3d": mesh3d_cases,
    "cross": cross_cases,
    "offset": offset_cases,
}
CORPUS_GROUP = "corpus"  # its rank-0 files are the shared corpus: only verified, never saved


# ----------------------------------------------------------------------------- worker

def _placements(dist, s, ndim):
    toks = re.findall(r"Pavg|Pmax|P|R|S\d", s)
    assert "".join(toks) == s and len(toks) == ndim, (s, ndim)
    out = []
    for t in toks:
        if t == "R":
            out.append(dist.Replicate())
        elif t[0] == "S":
            out.append(dist.Shard(int(t[1:])))
        elif t == "P":
            out.append(dist.Partial(dist.ReduceType.kRedSum))
        elif t == "Pavg":
            out.append(dist.Partial(dist.ReduceType.kRedAvg))
        elif t == "Pmax":
            out.append(dist.Partial(dist.ReduceType.kRedMax))
    return out


def _last_line(e):
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def worker(group, rank, outdir, start=0, progress=None):
    assert os.environ.get("PADDLE_TRAINER_ID") == str(rank)
    import paddle
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static.pir_pass import ReshardPasses

    paddle.enable_static()

    def mesh(spec):
        ids, names = spec
        return dist.ProcessMesh(ids, dim_names=names)

    def write(path, text):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")

    for i, c in enumerate(GROUPS[group]()):
        if i < start or rank not in c["ranks"]:
            continue
        if progress:
            with open(progress, "w") as f:
                f.write(str(i))
        base = os.path.join(outdir, f"{c['name']}.r{rank}")
        before = None
        try:
            src, dst = mesh(c["src"]), mesh(c["dst"])
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                x = paddle.static.data("x", c["shape"], "float32")
                y = dist.shard_tensor(x, src, _placements(dist, c["sp"], src.ndim))
                dist.reshard(y, dst, _placements(dist, c["dp"], dst.ndim))
            before = str(main)
            clone = main.clone()
            ReshardPasses.apply_reshard_pass(clone)
            after = str(clone)
        except Exception as e:  # Paddle refuses: keep its message
            write(base + ".error.txt", _last_line(e))
            continue
        write(base + ".before.ir", before)
        write(base + ".after.ir", after)


# ----------------------------------------------------------------------------- driver

def run_worker(group, rank, outdir):
    """Run the group for one rank in a fresh process. If Paddle crashes the process
    (it segfaults on a few uneven cases), record the crash as that case's error.txt and
    continue with the next case in a new process (ring ids restart there)."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM="8",
               GLOG_minloglevel="2")
    cases = GROUPS[group]()
    start = 0
    with tempfile.TemporaryDirectory() as tmp:
        progress = os.path.join(tmp, "progress")
        while True:
            if os.path.exists(progress):
                os.remove(progress)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", group, str(rank),
                                outdir, str(start), progress],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode == 0:
                return
            i = int(open(progress).read())
            frames = re.findall(r"^\d+\s+(\S+?)\(", p.stdout, re.M)
            fatal = re.findall(r"(FatalError: `[^`]*` is detected by the operating system\.)", p.stdout)
            msg = (fatal[-1] if fatal else f"process exited with {p.returncode}")
            if frames:
                msg += f" (innermost C++ frame: {frames[-1]})"
            name = cases[i]["name"]
            print(f"  CRASH {name}.r{rank}: {msg}", flush=True)
            with open(os.path.join(outdir, f"{name}.r{rank}.error.txt"), "w", encoding="utf-8") as f:
                f.write("CRASH: " + msg + "\n")
            start = i + 1


def all_ranks(group):
    return sorted({r for c in GROUPS[group]() for r in c["ranks"]})


def canon(text):
    """Rename ring ids by order of first appearance (equal iff a bijection exists)."""
    m = {}
    return re.sub(r"ring_id:(\d+)", lambda g: "ring_id:R%d" % m.setdefault(g.group(1), len(m)), text)


def verify(corpus_dir):
    with tempfile.TemporaryDirectory() as tmp:
        run_worker(CORPUS_GROUP, 0, tmp)
        ours, theirs = sorted(os.listdir(tmp)), sorted(os.listdir(corpus_dir))
        theirs = [f for f in theirs if ".r0." in f]
        bad = 0
        if ours != theirs:
            print("file sets differ:", sorted(set(ours) ^ set(theirs)))
            bad += 1
        exact = 0
        for f in sorted(set(ours) & set(theirs)):
            a = open(os.path.join(tmp, f), encoding="utf-8").read()
            b = open(os.path.join(corpus_dir, f), encoding="utf-8").read()
            exact += a == b
            if canon(a) != canon(b):
                print("DIFF", f)
                bad += 1
        print(f"verified {len(ours)} files against {corpus_dir}: {bad} mismatches, "
              f"{exact} byte-identical including ring ids")
        return bad == 0


def table():
    print("| group | case | source mesh | src placements | dest mesh | dst placements | shape | ranks |")
    print("|---|---|---|---|---|---|---|---|")
    for g in GROUPS:
        for c in GROUPS[g]():
            ranks = [r for r in c["ranks"] if not (g == CORPUS_GROUP and r == 0)]
            print(f"| {g} | `{c['name']}` | `{c['src'][0]}` | {c['sp']} | `{c['dst'][0]}` | {c['dp']} | "
                  f"{'x'.join(map(str, c['shape']))} | {','.join(map(str, ranks))} |")


def main(argv):
    if argv[:1] == ["--worker"]:
        worker(argv[1], int(argv[2]), argv[3], int(argv[4]) if len(argv) > 4 else 0,
               argv[5] if len(argv) > 5 else None)
        return 0
    if argv[:1] == ["--verify"]:
        return 0 if verify(argv[1]) else 1
    if argv[:1] == ["--list"]:
        table()
        return 0
    out = OUT
    if argv[:1] == ["--out"]:
        out, argv = argv[1], argv[2:]
    groups = argv or list(GROUPS)
    os.makedirs(out, exist_ok=True)
    for g in groups:
        for r in all_ranks(g):
            if g == CORPUS_GROUP and r == 0:
                continue  # identical to the shared corpus (checked by --verify)
            print(f"group {g} rank {r}", flush=True)
            run_worker(g, r, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
