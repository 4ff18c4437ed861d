"""The shard run's checks that look at part of a program answer as a whole walk does: a rank's
check stops at the first mesh holding it (``has_rank``), the unknown op names come from the ops'
index (``unknown_ops(by_name=)``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import distc
from distc.analysis.cost import has_rank, program_ranks
from distc.analysis.op_index import OpIndex
from distc.dialects.known_ops import unknown_op_warnings, unknown_ops

from conftest import DATA

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = [ROOT / "samples/mlp_dp2mp2_adamw.ir", ROOT / "samples/mlp_dp2mp2_adamw.startup.ir",
            ROOT / "samples/llama_dp2mp2_adamw.ir",
            *sorted((DATA / "corpus/paddle-3.3.1").rglob("*.ir"))[:40]]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_has_rank_is_membership_of_the_programs_ranks(path):
    prog = distc.parse(path.read_text(), str(path))
    known = program_ranks(prog)
    for r in range(max(known, default=0) + 3):
        assert has_rank(prog, r) == (r in known), r


@pytest.mark.parametrize("path", PROGRAMS[:3], ids=lambda p: p.name)
def test_unknown_ops_from_the_index_equal_the_walk(path):
    text = path.read_text().replace('"pd_op.matmul"', '"pd_op.matmull"').replace('"pd_op.add"', '"xx_op.add"', 3)
    prog = distc.parse(text, str(path))
    by_name = OpIndex(prog).by_name
    assert unknown_ops(prog, by_name) == unknown_ops(prog)
    assert [str(w) for w in unknown_op_warnings(prog, by_name=by_name)] == [str(w) for w in unknown_op_warnings(prog)]
    assert unknown_ops(prog) or "pd_op.matmul" not in path.read_text()
