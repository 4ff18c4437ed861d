"""The whole pipelined step, proven: every rank runs its job programs in its schedule order,
micro-batch by micro-batch (collectives and send/recv matched across ranks), and what the step
leaves (parameters, optimizer states, reset gradient-merge accumulators) equals the serial step
over the global batch — for every schedule, Paddle's and distc's own (Eager1F1B, ZBH1); Paddle's
gradient merge clips the sum of the micro-batch gradients (DIVERGED from the global batch whenever
the clip acts), distc averages first; a schedule that cannot finish is a located deadlock.  The
modelled cost: the bubble of each schedule; ``distc schedule`` end to end."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import distc
import scheddata as S
from distc.analysis.schedule_cost import CostModel, timeline
from distc.analysis.simulate.jobs import verify_pipeline
from distc.cli import main
from distc.passes import load_passes
from distc.passes.pipeline_schedule import build_schedules, rank_jobs
from test_shard_passes import canon

load_passes()
PP2 = "llama_pp2dp2"


def src(case: str, mode: str, acc: int = 4) -> str:
    return S.text(S.base(case, "VPP" if mode == "VPP" else "1F1B", acc, "s0" if case != "llama_pp2dp2mp2" or mode != "VPP"
                         else "s1", 0) + "before_partition.ir")


def ranks_of(case: str) -> range:
    return range(8 if case == "llama_pp2dp2mp2" else 4)


def prove(case: str, mode: str, k: int, *, paddle: bool = False, against_paddle: bool | None = None, jobs=None):
    text = src(case, mode)
    built = {r: rank_jobs(b) for r, b in build_schedules(distc.parse(text, "m"), ranks_of(case), mode, k,
                                                          paddle=paddle, keep_dist_text=False).items()}
    for r, j in (jobs or {}).items():
        built[r].jobs = j
    return verify_pipeline(distc.parse(text, "serial"), built, k,
                           paddle_merge=paddle if against_paddle is None else against_paddle)


@pytest.mark.parametrize("mode", ["FThenB", "1F1B", "VPP", "GM", "Eager1F1B", "ZBH1"])
def test_whole_step_equal(mode):
    rep = prove(PP2, mode, 4)
    assert rep.status == 0, rep.summary()
    assert rep.ranks == [0, 1, 2, 3] and rep.tensors >= 390 and rep.max_abs < 1e-12


@pytest.mark.parametrize("case,mode,k", [("llama_pp4", "ZBH1", 4), ("llama_pp4", "1F1B", 6),
                                         ("llama_pp2dp2mp2", "1F1B", 4)])
def test_whole_step_other_meshes(case, mode, k):
    rep = prove(case, mode, k)
    assert rep.status == 0, rep.summary()


def test_paddle_gradient_merge_clips_the_sum():
    """Paddle's program (--paddle) is its own gradient merge exactly (the clip sees the sum of
    the 4 micro-batch gradients, the update a quarter of the clipped sum), and so not the global
    batch's step here, where the clip acts (global norm ~4, clip 1)."""
    assert prove(PP2, "1F1B", 4, paddle=True).status == 0
    rep = prove(PP2, "1F1B", 4, paddle=True, against_paddle=False)
    assert rep.status == 1 and "after the step is not its piece of the serial value" in rep.summary()


def test_deadlock_is_located():
    """Stage 1 runs FThenB's order while stage 0 runs 1F1B's: rank 0 waits for a gradient of
    micro-batch 0 that rank 2 sends only after all its forwards, which wait for rank 0."""
    fthenb = [t for m in range(4) for t in (("recv_forward", m), ("forward", m))] + \
        [t for m in range(4) for t in (("backward", m), ("send_backward", m))] + [("optimizer", 0)]
    one = [("recv_forward", 0), ("forward", 0), ("backward", 0), ("send_backward", 0)] + \
        [t for m in range(1, 4) for t in (("recv_forward", m), ("forward", m), ("backward", m), ("send_backward", m))] \
        + [("optimizer", 0)]
    rep = prove(PP2, "1F1B", 4, jobs={0: one, 1: one, 2: fthenb, 3: fthenb})
    msg = rep.summary()
    assert rep.status == 1 and "deadlock" in msg and "rank 0 in job backward 0" in msg, msg


def _timeline(case: str, mode: str, k: int):
    rs = {r: rank_jobs(b) for r, b in build_schedules(distc.parse(src(case, mode), "m"), ranks_of(case), mode, k,
                                                       keep_dist_text=False).items()}
    return timeline(mode, {r: j.jobs for r, j in rs.items()}, {r: j.programs for r, j in rs.items()},
                    {r: j.rings for r, j in rs.items()}, CostModel(flops=1e9))


def test_bubbles():
    """pp4, 8 micro-batches: FThenB and 1F1B have the same step (1F1B saves memory, not time),
    ZBH1's weight-gradient jobs fill part of the bubble; pp2: VPP's chunks shorten it."""
    f, one, zb = (_timeline("llama_pp4", m, 8) for m in ("FThenB", "1F1B", "ZBH1"))
    assert abs(f.makespan - one.makespan) < 1e-9 * one.makespan
    assert 0.2 < one.bubble() < 0.4 and zb.bubble() < one.bubble() - 0.05 and zb.makespan < one.makespan
    v, o = _timeline(PP2, "VPP", 8), _timeline(PP2, "1F1B", 8)
    assert v.bubble() < o.bubble()
    doc = one.as_json()
    assert set(doc["timeline"]) == {"0", "1", "2", "3"} and doc["timeline"]["0"][0][:2] == ["recv_forward", 0]
    assert all(j[2] <= j[3] for js in doc["timeline"].values() for j in js)


def test_cli_schedule(tmp_path):
    case = PP2
    main_ir = tmp_path / "main.ir"
    main_ir.write_text(S.text(S.base(case, "1F1B", 4, "s0", 0) + "before_partition.ir"))
    r = CliRunner().invoke(main, ["schedule", str(main_ir), "--pp-schedule", "1F1B", "--acc-steps", "4",
                                  "--all-ranks", "--paddle", "-o", str(tmp_path / "r{rank}.{job}.ir"),
                                  "--jobs-out", str(tmp_path / "r{rank}.jobs.txt"), "--verify", "--cost", "--json"])
    assert r.exit_code == 0, r.output
    for rank in range(4):
        base = S.base(case, "1F1B", 4, "s0", rank)
        assert (tmp_path / f"r{rank}.jobs.txt").read_text() == S.text(base + "jobs.txt")
        for job in ("recv_forward", "forward", "backward", "send_backward", "optimizer"):
            assert canon((tmp_path / f"r{rank}.{job}.ir").read_text()) == canon(S.text(base + f"job.{job}.ir"))
    doc = json.loads(r.stderr.strip().splitlines()[-1])
    assert doc["verify"]["status"] == "equal" and doc["schedule"] == "1F1B"
    assert set(doc["timelines"]["1F1B"]) == {"0", "1", "2", "3"} and 0 <= doc["cost"]["bubble"] < 1
    r = CliRunner().invoke(main, ["schedule", str(main_ir), "--pp-schedule", "ZBH1", "--acc-steps", "4", "--rank", "2",
                                  "--cost"])
    assert r.exit_code == 0 and "backward_w 3" in r.stdout and "bubble" in r.stderr, r.output
    r = CliRunner().invoke(main, ["schedule", str(main_ir), "--acc-steps", "4", "-o", str(tmp_path / "x.ir")])
    assert r.exit_code == 2 and "{job}" in r.output
