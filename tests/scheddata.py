"""Paddle 3.3.1's pipeline-schedule and gradient-merge programs (tests/data/oracle/sched, made by
gen_pp.py --sched): one xz archive a mesh, ``CASE.MODE.aK.sN.rR.SNAPSHOT`` inside (see
tests/data/oracle/README.md); :func:`mismatches` holds distc to one stored configuration
(tests/test_sched_parity.py a part, tests/oracle/test_sched_matrix.py every one)."""

from __future__ import annotations

import functools
import io
import lzma
import re
import tarfile

from conftest import DATA

SCHED = DATA / "oracle/sched"
MESH_DIMS = {"llama_pp2dp2": ("dp",), "llama_pp2dp2mp2": ("dp", "mp"), "llama_pp4": ("dp",)}
_NAME = re.compile(r"(\w+)\.(\w+)\.a(\d+)\.(s\d)\.r(\d+)\.(.+)$")


@functools.lru_cache(maxsize=None)
def archive(case: str) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress((SCHED / f"{case}.tar.xz").read_bytes()))) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8") for m in tar.getmembers()}  # type: ignore[union-attr]


def names() -> list[str]:
    return sorted(n for case in MESH_DIMS if (SCHED / f"{case}.tar.xz").exists() for n in archive(case))


def text(name: str) -> str:
    return archive(name.split(".")[0])[name]


def has(name: str) -> bool:
    return name in archive(name.split(".")[0])


def groups() -> list[tuple[str, str, int, str, list[int]]]:
    """(case, mode, accumulate steps, stage, ranks) of every stored schedule case Paddle built."""
    out: dict[tuple, list[int]] = {}
    for n in names():
        m = _NAME.match(n)
        if m and m.group(6) == "dense.ir":
            out.setdefault((m.group(1), m.group(2), int(m.group(3)), m.group(4)), []).append(int(m.group(5)))
    return [(c, mo, a, s, sorted(rs)) for (c, mo, a, s), rs in sorted(out.items())]


def refusals() -> dict[str, str]:
    """name (without .error.txt) -> Paddle's message, where it refused."""
    return {n[:-len(".error.txt")]: text(n) for n in names() if n.endswith(".error.txt")}


def base(case: str, mode: str, acc: int, stage: str, rank: int) -> str:
    return f"{case}.{mode}.a{acc}.{stage}.r{rank}."


@functools.lru_cache(maxsize=None)
def parsed(name: str):
    """A stored program, parsed once a process (the pipeline works on copies)."""
    import distc

    return distc.parse(text(name), name)


def main_input(case: str, mode: str, acc: int, stage: str) -> tuple[str, bool]:
    """Paddle's stage-0 program for the case (the program does not depend on the schedule before
    the scheduler runs, except for VPP's chunks): (its name, whether it is stage 0)."""
    modes = [mode] + ([] if mode == "VPP" else [m for m in ("FThenB", "1F1B", "GM") if m != mode])
    for m in modes:
        for r in range(8):
            n = base(case, m, acc, "s0", r) + "before_partition.ir"
            if has(n):
                return n, True
    return base(case, mode, acc, stage, 0) + "before_partition.ir", False


def build(case: str, mode: str, acc: int, stage: str, ranks: list[int]) -> dict[int, dict[str, str]]:
    """rank -> snapshot name -> distc's text, for one stored configuration: from Paddle's stage-0
    ``before_partition`` and each rank's ``startup_after_remove``, the shard pipeline as ``distc
    shard --pp-schedule MODE --acc-steps K --paddle`` runs it (the shared passes once for all ranks)."""
    from distc.pipeline import ShardOptions, shard, shard_ranks

    src, from_s0 = main_input(case, mode, acc, stage)
    startups = {r: parsed(base(case, mode, acc, stage, r) + "startup_after_remove.ir") for r in ranks}
    opts = ShardOptions(stage=1 if stage == "s1" and from_s0 else 0, mesh_dims=MESH_DIMS[case],
                        pp_schedule=None if mode == "GM" else mode, acc_steps=acc, paddle_merge=True)
    res = shard_ranks(parsed(src), ranks, startup=startups, options=opts)
    out: dict[int, dict[str, str]] = {}
    for r, x in res.items():
        got = out[r] = {"dist_final.ir": x.text, "dense.ir": str(x.dense), "jobs.txt": x.plan.job_list_text(),
                        "startup_final.ir": x.startup_text}
        got.update({f"job.{t}.ir": str(p) for t, p in x.plan.programs.items()})
    if stage == "s1" and from_s0:  # shard-optimizer on the stage-0 program: Paddle's stage-1 before_partition
        annotated = shard(parsed(src), ranks[0], stage=1, mesh_dims=MESH_DIMS[case], annotate_only=True).text
        for r in ranks:
            out[r]["before_partition.ir"] = annotated
    return out


def mismatches(case: str, mode: str, acc: int, stage: str, ranks: list[int]) -> list[str]:
    """``rR SNAPSHOT`` of every file of the configuration where distc is not Paddle byte for byte
    (ring ids renamed), and the job types where the two plans differ."""
    from irutil import normalize_rings as canon

    bad = []
    for rank, got in build(case, mode, acc, stage, ranks).items():
        b = base(case, mode, acc, stage, rank)
        job_files = sorted(n[len(b):] for n in names() if n.startswith(b + "job."))
        if sorted(k for k in got if k.startswith("job.")) != job_files:
            bad.append(f"r{rank} job types {sorted(k for k in got if k.startswith('job.'))} != {job_files}")
        bad += [f"r{rank} {snap}" for snap, t in got.items() if canon(t) != canon(text(b + snap))]
    return bad
