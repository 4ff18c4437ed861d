"""End to end: ``partition`` then ``reshard{rank=R}`` on Paddle's ZeRO-1 training programs gives
Paddle's ``after_reshard`` snapshot (ring ids up to renaming), for every rank captured."""

from __future__ import annotations

import re

import pytest

import distc
from distc.passes.base import PassManager, parse_pipeline

from conftest import DATA
from test_reshard_parity import canon_ring_ids

BEFORE = sorted(p for d in ("corpus/paddle-3.3.1/stage1", "oracle/stage1")
                for p in (DATA / d).glob("*.before_partition.ir")
                if p.with_name(p.name.replace("before_partition", "after_reshard")).exists())


@pytest.mark.parametrize("paddle_only", [True, False], ids=["paddle", "default"])
@pytest.mark.parametrize("before", BEFORE, ids=lambda p: p.name[: -len(".before_partition.ir")])
def test_partition_then_reshard_matches_paddle(before, paddle_only):
    pytest.importorskip("distc.passes.partition")
    rank = int(re.search(r"\.r(\d+)\.", before.name).group(1))
    after = before.with_name(before.name.replace("before_partition", "after_reshard")).read_text()
    prog = distc.parse(before.read_text(), str(before))
    flag = ",paddle=true" if paddle_only else ""
    PassManager(parse_pipeline(f"partition,reshard{{rank={rank}{flag}}}")).run(prog)
    assert canon_ring_ids(str(prog)) == canon_ring_ids(after)
