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


def _proof_cases():
    """(mesh, schedule, ZeRO stage): every schedule distc builds on every mesh, stages 0 and 1 (VPP
    where Paddle printed a program placed in chunks: pp2 x dp2, and pp2 x dp2 x mp2 whose chunked
    program is already stage 1's)."""
    out = [(case, mode, st) for case in S.MESH_DIMS for mode in ("FThenB", "1F1B", "Eager1F1B", "ZBH1", "GM")
           for st in (0, 1)]
    return out + [("llama_pp2dp2", "VPP", 0), ("llama_pp2dp2", "VPP", 1), ("llama_pp2dp2mp2", "VPP", 0)]


@pytest.mark.parametrize("case,mode,zero", _proof_cases())
def test_whole_step_every_schedule_mesh_and_stage(case, mode, zero):
    """The whole pipelined step (4 micro-batches; Eager1F1B on pp4: 8, as it needs 2 (P - S) - 1 on
    stage S) of distc's default program equals the serial step over the global batch on every rank."""
    from distc.pipeline import ShardOptions, shard_ranks
    from distc.pipeline.schedule import prove_step

    stage = "s1" if case == "llama_pp2dp2mp2" and mode == "VPP" else "s0"
    src = S.parsed(S.base(case, "VPP" if mode == "VPP" else "1F1B", 4, stage, 0) + "before_partition.ir")
    o = ShardOptions(stage=zero, mesh_dims=S.MESH_DIMS[case], pp_schedule=None if mode == "GM" else mode,
                     acc_steps=8 if (case, mode) == ("llama_pp4", "Eager1F1B") else 4)
    rep = prove_step(src, shard_ranks(src, options=o), o)
    assert rep.status == 0, rep.summary()
    assert rep.ranks == list(range(8 if case == "llama_pp2dp2mp2" else 4))
