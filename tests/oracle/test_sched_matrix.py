"""Every stored pipeline-schedule and gradient-merge configuration Paddle 3.3.1 built (gen_pp.py
--sched: FThenB, 1F1B, VPP and gradient merge alone on pp2 x dp2, pp2 x dp2 x mp2 and pp4, ZeRO
stages 0 and 1, accumulate steps 2 and 4), every rank: distc's dist_final, dense, every job program,
the job list and startup_final equal Paddle's (ring ids renamed).  ``make test-oracle`` (run by
.ci/run); ``make test`` checks one configuration of each kind (tests/test_sched_parity.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

import scheddata as S  # noqa: E402

GROUPS = S.groups()


def test_every_configuration_stored():
    assert sum(len(g[-1]) for g in GROUPS) >= 64


@pytest.mark.parametrize("case,mode,acc,stage,ranks", [pytest.param(*g, id=f"{g[0]}.{g[1]}.a{g[2]}.{g[3]}")
                                                       for g in GROUPS])
def test_every_rank_equals_paddle(case, mode, acc, stage, ranks):
    assert S.mismatches(case, mode, acc, stage, ranks) == []
