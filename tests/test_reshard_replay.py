"""Each distinct reshard lowered once and replayed (``distc.passes.reshard.replay``) gives exactly
what lowering every reshard one by one gives: the same program text byte for byte, the same
collective records and the same steps, on every rank of every ZeRO program we have."""

from __future__ import annotations

import gzip
import pathlib

import pytest

import distc
from distc.passes.base import PassContext
from distc.passes.partition import PartitionPass
from distc.passes.shard_optimizer import ShardOptimizerPass
from distc.passes.reshard import lower as L
from distc.passes.reshard.replay import Replayer

from conftest import DATA
from test_shard_passes import SNAPS

BENCH = pathlib.Path(__file__).parent.parent / "bench" / "data"


def _inputs():
    out = []
    for (d, case, stage, rank), files in sorted(SNAPS.items()):
        if rank == 0 and "before_partition" in files:
            out.append(pytest.param(files["before_partition"], stage, id=f"{d.split('/')[0]}/{case}.{stage}"))
    return out


def _partitioned(text: str, stage: str, name: str):
    prog = distc.parse(text, name)
    ctx = PassContext()
    if stage == "s0":  # the s0 dumps come before shard-optimizer; s1 ones already have it
        ShardOptimizerPass().apply(prog, ctx)
    PartitionPass().apply(prog, ctx)
    return prog


def _ranks(prog) -> list[int]:
    ids: set[int] = set()
    for op in prog.walk():
        if op.dist_attr is not None:
            ids |= set(op.dist_attr.mesh.process_ids)
    return sorted(ids)


def _lower(text: str, stage: str | None, name: str, rank: int, replay: bool, counter: list | None = None):
    """(``stage`` None: ``text`` is partitioned already.)"""
    prog = _partitioned(text, stage, name) if stage is not None else distc.parse(text, name)
    made = []
    real = L.Replayer

    def spy(lower_one):
        r = real(lower_one)
        made.append(r)
        return r

    L.Replayer = spy
    try:
        res = L.lower_program(prog, rank, replay=replay)
    finally:
        L.Replayer = real
    if counter is not None:
        counter.extend(r.replayed for r in made)
    records = [(r.as_dict(), r.layouts) for r in res.records]
    return str(prog), records, res.steps, res.notes


def _same(text: str, stage: str, name: str, ranks=None) -> int:
    replayed: list[int] = []
    for rank in ranks if ranks is not None else _ranks(_partitioned(text, stage, name)):
        one = _lower(text, stage, name, rank, replay=False)
        rep = _lower(text, stage, name, rank, replay=True, counter=replayed)
        assert rep[0] == one[0], f"rank {rank}: program text differs"
        assert rep[1] == one[1], f"rank {rank}: collective records differ"
        assert rep[2] == one[2], f"rank {rank}: steps differ"
        assert rep[3] == one[3], f"rank {rank}: notes differ"
    return sum(replayed)


@pytest.mark.parametrize("path,stage", _inputs())
def test_replay_equals_one_by_one_lowering_on_every_rank(path, stage):
    _same(path.read_text(), stage, str(path))


def test_replay_is_used_on_a_deep_program():
    text = gzip.decompress((BENCH / "mlp96.s0.r0.before_partition.ir.gz").read_bytes()).decode()
    n = _same(text, "s0", "mlp96", ranks=[3])
    assert n > 500  # nearly every reshard of a 96-layer MLP is a repeat


def _global_to_sub_program() -> str:
    """Copies of Paddle's global [0,1,2,3] -> sub mesh [0,1] reshard; the last two inputs also go
    to [2,3] (two users: a share_data_ carries the new type, instead of retyping the input)."""
    lines = (DATA / "oracle/reshard/g4_to_m2_R_to_R.r0.before.ir").read_text().splitlines()
    data, shard, resh = lines[1], lines[2], lines[3]
    out = ["{", data]
    for k in range(4):
        a, b = 10 * k + 1, 10 * k + 2
        out.append(shard.replace("(%1) =", f"(%{a}) =", 1))
        out.append(resh.replace("(%2) =", f"(%{b}) =", 1).replace("(%1)", f"(%{a})", 1))
        if k >= 2:
            out.append(resh.replace("(%2) =", f"(%{b + 1}) =", 1).replace("(%1)", f"(%{a})", 1)
                       .replace("process_ids:[0,1],dims", "process_ids:[2,3],dims"))
    return "\n".join(out + ["}"]) + "\n"


def test_a_lowering_that_retypes_its_input_is_not_replayed():
    text = _global_to_sub_program()
    for rank in range(4):
        one = _lower(text, "s1", "g", rank, replay=False)
        rep = _lower(text, "s1", "g", rank, replay=True)
        assert rep == one
    prog = distc.parse(text)
    r = Replayer(L.lower_reshard)
    L.lower_block(prog, prog.block, L.Lowering(0, L.RingAllocator()), lower_one=r)
    kept = [t for t in r.templates.values() if t is not None]
    assert None in r.templates.values()  # the in-place retype: lowered one by one
    assert kept and r.replayed >= 1  # the share_data_ one: replayed


def test_replay_into_reshards_read_from_the_input():
    """A replay makes the reshard op itself its template's last op: reshards read from the input
    (named results, source lines, clean users; a blank line before some, which goes with the
    reshard when it is lowered) print what one-by-one lowering prints."""
    text = gzip.decompress((BENCH / "mlp96.s0.r0.before_partition.ir.gz").read_bytes()).decode()
    lines, n = [], 0
    for ln in str(_partitioned(text, "s0", "mlp96")).split("\n"):
        if '"dist_op.reshard"' in ln:
            n += 1
            if n % 7 == 0:
                lines.append("")
        lines.append(ln)
    mid = "\n".join(lines)
    assert n > 500 and "\n\n" in mid
    for rank in (0, 3):
        replayed: list[int] = []
        one = _lower(mid, None, "parsed", rank, replay=False)
        rep = _lower(mid, None, "parsed", rank, replay=True, counter=replayed)
        assert sum(replayed) > 500
        assert rep[0] == one[0], f"rank {rank}: program text differs"
        assert rep[1:] == one[1:], f"rank {rank}: records, steps or notes differ"
