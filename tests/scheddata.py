"""Paddle 3.3.1's pipeline-schedule and gradient-merge programs (tests/data/oracle/sched, made by
gen_pp.py --sched): one xz archive a mesh, ``CASE.MODE.aK.sN.rR.SNAPSHOT`` inside (see
tests/data/oracle/README.md)."""

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
