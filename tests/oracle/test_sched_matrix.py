"""Every stored pipeline-schedule and gradient-merge configuration Paddle 3.3.1 built (gen_pp.py
--sched: FThenB, 1F1B, VPP and gradient merge alone on pp2 x dp2, pp2 x dp2 x mp2 and pp4, ZeRO
stages 0 and 1, accumulate steps 2 and 4), every rank: distc's dist_final, dense, every job program,
the job list and startup_final equal Paddle's (ring ids renamed).  ``make test-oracle`` (run by
.ci/run); ``make test`` checks one configuration of each kind (tests/test_sched_parity.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

import scheddata as S  # noqa: E402

GROUPS = S.groups()


# The matrix issue 18 asks for: mesh x ZeRO stage x accumulate steps x (FThenB, 1F1B, VPP, gradient
# merge alone), every cell built or refused.  Cells Paddle refuses hold its message (error.txt, every rank).
NOT_GENERATED: set[tuple] = set()
REFUSED = {  # cell -> Paddle's message (its start)
    ("llama_pp4", "1F1B", 2, "s0"): "Num of micro batches should larger than or equal to pp degree",
    ("llama_pp4", "1F1B", 2, "s1"): "Num of micro batches should larger than or equal to pp degree",
    ("llama_pp4", "VPP", 2, "s0"): "Unsupported reshard function: RToSReshardFunctionCrossMesh",
    ("llama_pp4", "VPP", 2, "s1"): "Unsupported reshard function: RToSReshardFunctionCrossMesh",
    ("llama_pp4", "VPP", 4, "s0"): "Unsupported reshard function: RToSReshardFunctionCrossMesh",
    ("llama_pp4", "VPP", 4, "s1"): "Unsupported reshard function: RToSReshardFunctionCrossMesh",
}


def matrix() -> dict[tuple, str]:
    """cell -> 'built' (every rank stored), 'refused' or 'not generated'."""
    built = {tuple(g[:4]) for g in GROUPS}
    refused = {k.rsplit(".r", 1)[0] for k in S.refusals()}
    out = {}
    for case in S.MESH_DIMS:
        for mode in ("FThenB", "1F1B", "VPP", "GM"):
            for acc in (2, 4):
                for st in ("s0", "s1"):
                    cell = (case, mode, acc, st)
                    out[cell] = "built" if cell in built else "refused" if \
                        S.base(case, mode, acc, st, 0)[:-4] in refused else "not generated"
    return out


def test_every_configuration_stored():
    assert sum(len(g[-1]) for g in GROUPS) == 232  # rank programs Paddle built, 42 configurations
    assert len(GROUPS) == 42
    cells = matrix()
    assert {c for c, v in cells.items() if v == "not generated"} == NOT_GENERATED
    assert {c for c, v in cells.items() if v == "refused"} == set(REFUSED)
    for (case, mode, acc, st), msg in REFUSED.items():
        ranks = range(8 if case == "llama_pp2dp2mp2" else 4)
        assert all(msg in S.refusals()[S.base(case, mode, acc, st, r)[:-1]] for r in ranks)
    for case, mode, acc, st, ranks in GROUPS:  # every rank of every cell built
        assert ranks == list(range(8 if case == "llama_pp2dp2mp2" else 4)), (case, mode, acc, st)


@pytest.mark.parametrize("case,mode,acc,stage,ranks", [pytest.param(*g, id=f"{g[0]}.{g[1]}.a{g[2]}.{g[3]}")
                                                       for g in GROUPS])
def test_every_rank_equals_paddle(case, mode, acc, stage, ranks):
    assert S.mismatches(case, mode, acc, stage, ranks) == []


def _proof_cases():
    """(mesh, schedule, ZeRO stage, micro-batches): every schedule distc builds on every mesh, stages 0
    and 1, with 4 micro-batches and with 2 wherever the schedule takes 2 (not Eager1F1B, which needs
    2 (P - S) - 1 on stage S, nor 1F1B and ZBH1 on pp4); VPP where Paddle printed a program placed in
    chunks (pp2 x dp2 and pp2 x dp2 x mp2; on pp4 it refuses)."""
    out = []
    for case in S.MESH_DIMS:
        for acc in (4, 2):
            for mode in ("FThenB", "1F1B", "Eager1F1B", "ZBH1", "VPP", "GM"):
                if (mode == "VPP" and case == "llama_pp4") or (acc == 2 and (
                        mode == "Eager1F1B" or (case == "llama_pp4" and mode in ("1F1B", "ZBH1")))):
                    continue
                out += [(case, mode, st, acc) for st in (0, 1)]
    return out


def _source(case: str, mode: str):
    return S.parsed(S.base(case, "VPP" if mode == "VPP" else "1F1B", 4, "s0", 0) + "before_partition.ir")


@pytest.mark.parametrize("case,mode,zero,acc", _proof_cases())
def test_whole_step_every_schedule_mesh_and_stage(case, mode, zero, acc):
    """The whole pipelined step (Eager1F1B on pp4: 8 micro-batches, as it needs 2 (P - S) - 1 on
    stage S) of distc's default program equals the serial step over the global batch on every rank."""
    from distc.pipeline import ShardOptions, shard_ranks
    from distc.pipeline.schedule import prove_step

    src = _source(case, mode)
    o = ShardOptions(stage=zero, mesh_dims=S.MESH_DIMS[case], pp_schedule=None if mode == "GM" else mode,
                     acc_steps=8 if (case, mode) == ("llama_pp4", "Eager1F1B") else acc)
    rep = prove_step(src, shard_ranks(src, options=o), o)
    assert rep.status == 0, rep.summary()
    assert rep.ranks == list(range(8 if case == "llama_pp2dp2mp2" else 4))


@pytest.mark.parametrize("case,mode,needs", [("llama_pp2dp2", "Eager1F1B", "at least 2 (P - S) - 1 = 3"),
                                             ("llama_pp4", "1F1B", "at least as many micro-batches as pipeline"),
                                             ("llama_pp4", "ZBH1", "at least as many micro-batches as pipeline")])
def test_two_micro_batches_too_few(case, mode, needs):
    """The cells of the proof matrix left out above: a located error, no plan (Paddle asserts alike)."""
    from distc.pipeline import ShardOptions, shard_ranks
    from distc.syntax.diagnostics import DiagnosticError

    o = ShardOptions(stage=1, mesh_dims=S.MESH_DIMS[case], pp_schedule=mode, acc_steps=2)
    with pytest.raises(DiagnosticError, match=re.escape(needs)):
        shard_ranks(_source(case, mode), options=o)


# what distc says where Paddle refuses: too few micro-batches for 1F1B (Paddle's reason too), and
# VPP on a program not placed in chunks: distc's own reason, not Paddle's.  Paddle refuses VPP on pp4
# while it assigns the chunks (a cross-mesh reshard it has no function for), before it prints any
# program, so the only pp4 program there is, the 1F1B one, has every chunk_id -1; distc does not
# place layers in chunks itself, so it does not build VPP on pp4 from it (README, schedules).
_DISTC_REFUSES = {"1F1B": "at least as many micro-batches as pipeline",
                  "VPP": "the chunk_id of op 'pd_op.embedding' is not set (Paddle: 'Please check the chunk_id setting')"}


@pytest.mark.parametrize("case,mode,acc,stage", sorted(REFUSED))
def test_refused_cells_refused_by_distc(case, mode, acc, stage):
    """Every cell Paddle refuses: distc refuses it too, no plan, at a line of the input: VPP at the
    first op without a chunk (the input has none: its own reason, not Paddle's cross-mesh reshard),
    1F1B's too few micro-batches at the op that fixes the pp degree."""
    from distc.pipeline import ShardOptions, shard_ranks
    from distc.syntax.diagnostics import DiagnosticError

    src = _source(case, "1F1B")
    if mode == "VPP":
        assert set(re.findall(r"chunk_id:(-?\d+)", str(src))) == {"-1"}  # placed in no chunk
    o = ShardOptions(stage=int(stage[1]), mesh_dims=S.MESH_DIMS[case], pp_schedule=mode, acc_steps=acc)
    with pytest.raises(DiagnosticError, match=re.escape(_DISTC_REFUSES[mode])) as err:
        shard_ranks(src, options=o)
    assert err.value.filename and err.value.line, err.value.render()
    assert "CrossMesh" not in err.value.render()
