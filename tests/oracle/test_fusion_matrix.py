"""Every rank of every tensor-fusion case Paddle 3.3.1 printed (gen_fusion.py: the MLP and the
LLaMA decoder on dp2, dp4, dp2 x mp2; fused, overlap, one buffer a parameter, released gradients,
overlap + released gradients): distc's fused program before partition, after reshard, dense and
startup_final equal Paddle's (ring ids renamed); and pp2 x dp2 without a schedule, with FThenB,
1F1B and gradient merge, and pp2 x dp2 x mp2 without a schedule and with 1F1B, every rank.  The
whole matrix takes minutes:
``make test-oracle`` (run by .ci/run); ``make test`` checks a part (tests/test_tensor_fusion.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

import fusiondata as F  # noqa: E402

CASES = [(c, v, r) for c, ranks in F.CASES.items() for v in F.VARIANTS for r in ranks]


@pytest.mark.parametrize("case,variant,rank", CASES)
def test_every_rank_equals_paddle(case, variant, rank):
    got = F.check(case, variant, rank)
    assert got == {"before": None, "main": None, "startup": None, "dense": None}, got


@pytest.mark.parametrize("case,rank", [(c, r) for c, rs in F.PP_RANKS.items() for r in rs])
def test_pp_every_rank_equals_paddle(case, rank):
    """pp2 x dp2 and pp2 x dp2 x mp2 without a schedule (gen_fusion.py PP_CASES ``fuse``)."""
    got = F.pp_check(rank, case)
    assert got == {"before": None, "main": None, "startup": None, "dense": None}, got


@pytest.mark.parametrize("case,variant", [(c, v) for c, vs in F.PP_CASES.items() for v, s in vs.items() if s])
def test_pp_schedules_every_rank_equal_paddle(case, variant):
    """FThenB, 1F1B and gradient merge on pp2 x dp2 (2 micro-batches), 1F1B on pp2 x dp2 x mp2 (4),
    every rank: dist_final, dense, each job program, the job list, startup_final."""
    assert F.pp_sched_mismatches(variant, F.PP_RANKS[case], case) == []
