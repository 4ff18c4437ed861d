"""Program.clone() is structural (no print and re-parse): the copy prints exactly as the original,
shares no ops or values with it, and behaves like the re-parsed program under passes."""

import pytest

import distc
from distc.passes.base import PassContext, PassManager, parse_pipeline

from conftest import DATA, ir_files
from irutil import structure

FILES = ir_files("corpus/legacy", "oracle/syntax") + sorted((DATA / "corpus/paddle-3.3.1/stage1").glob("mlp_dp2mp2*.ir"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_clone_prints_like_the_original(path):
    s = path.read_text()
    prog = distc.parse(s, str(path))
    c = prog.clone()
    assert str(c) == s
    assert structure(c) == structure(prog)
    assert c.style == prog.style and c.style is not prog.style
    old = {id(v) for v in prog.values()} | {id(op) for op in prog.walk()}
    assert not old & ({id(v) for v in c.values()} | {id(op) for op in c.walk()})


def test_clone_is_independent_and_keeps_dirty_state():
    path = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s1.r0.before_partition.ir"
    prog = distc.parse(path.read_text(), str(path))
    PassManager(parse_pipeline("shard-optimizer{axis=0},partition")).run(prog, PassContext())
    before = str(prog)
    c = prog.clone()
    assert str(c) == before == str(distc.parse(before))
    # a pass on the copy gives what it gives on a re-parsed copy, and leaves the original alone
    reparsed = distc.parse(before, str(path))
    for p in (c, reparsed):
        PassManager(parse_pipeline("reshard{rank=0}")).run(p, PassContext())
    assert str(c) == str(reparsed)
    assert str(prog) == before
    # uses are kept per value, in program order
    for v in c.values():
        for op, i in v.uses:
            assert op.operand(i) is v
