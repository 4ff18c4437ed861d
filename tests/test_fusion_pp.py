"""Tensor fusion with pipeline stages (issue 19): Paddle 3.3.1 builds ``enable_tensor_fusion``
(``ShardingStage1``) on pp2 x dp2 without a schedule, with FThenB and 1F1B (accumulate_steps 2),
VPP (4) and with gradient merge alone (k_steps 2), and on pp2 x dp2 x mp2 without a schedule and
with 1F1B (4); it refuses Eager1F1B and ZBH1 (as without fusion) -- gen_fusion.py's PP_CASES,
every rank, stored in tests/data/oracle/fusion/llama_pp2dp2*.tar.xz.  distc equals Paddle's programs (without a schedule:
before partition, after reshard, dense, startup; with one: dist_final, dense, each job program,
the job list, startup) and proves them (the whole pipelined step on every rank).  Here a part;
every rank of every variant is ``make test-oracle`` (tests/oracle/test_fusion_matrix.py).

And the startup proof on constant-initialised models: constants kept under a name get a pattern
of that name's own (the simulator's ``tags``), so a piece of a zero-filled tensor taken from the
wrong place is DIVERGED, as it was not before."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import fusiondata as F
import llmdata
import scheddata as S
from distc.cli import main

ALL_SAME = {"before": None, "main": None, "startup": None, "dense": None}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("rank", [0, 3])
def test_no_schedule_equals_paddle(rank):
    """Each stage's buffers on its mesh (the other stage's written with the rank's own sharding
    communicator, as Paddle does), the clip's norms resharded to stage 0 and the scale back, a
    learning-rate parameter per run of same-mesh updates."""
    assert F.pp_check(rank) == ALL_SAME


@pytest.mark.parametrize("variant,rank", [("FThenB.a2.fuse", 1), ("1F1B.a2.fuse", 2), ("GM.a2.fuse", 3),
                                          ("VPP.a4.fuse", 0)])
def test_schedules_equal_paddle(variant, rank):
    """dist_final, dense, every job program, the job list and startup_final of the rank."""
    assert F.pp_sched_mismatches(variant, [rank]) == []


@pytest.fixture(scope="module")
def pp_inputs(tmp_path_factory):
    """The stage-0 programs: without a schedule (gen_pp.py JOBS) and the schedule model (SCHED)."""
    d = tmp_path_factory.mktemp("pp")
    for r in range(4):
        for snap in ("before_partition", "startup_after_remove"):
            (d / f"{snap}.r{r}.ir").write_text(llmdata.get("clip", F.PP, "s0", r, snap, root=llmdata.PP))
            (d / f"sched.{snap}.r{r}.ir").write_text(S.text(S.base(F.PP, "FThenB", 2, "s0", r) + snap + ".ir"))
    return d


def _shard(d, tmp_path, *opts, prefix=""):
    return run("shard", d / f"{prefix}before_partition.r0.ir", "--tensor-fusion", *opts, "--all-ranks",
               "-o", tmp_path / "m.r{rank}.ir", "--startup", d / (prefix + "startup_after_remove.r{rank}.ir"),
               "--startup-out", tmp_path / "s.r{rank}.ir", "--verify")


def test_verify_no_schedule(pp_inputs, tmp_path):
    r = _shard(pp_inputs, tmp_path)
    assert r.exit_code == 0, r.output
    assert "verify: EQUAL: 140 values" in r.output
    assert len(re.findall(r"^verify startup \(rank \d\): EQUAL", r.output, re.M)) == 4


@pytest.mark.parametrize("opts", [["--pp-schedule", "1F1B", "--acc-steps", "2"], ["--acc-steps", "2"]])
def test_verify_schedules(pp_inputs, tmp_path, opts):
    """The whole pipelined step on every rank: the job programs run in schedule order on the
    buffers as the startup programs leave them (parameters views of them), against the serial
    step over the global batch; each rank's startup program with its slice@ states."""
    r = _shard(pp_inputs, tmp_path, *opts, prefix="sched.")
    assert r.exit_code == 0, r.output
    assert "verify (the whole pipelined step): EQUAL: 287 values" in r.output
    counts = [int(n) for n in re.findall(r"^verify startup \(rank \d\): EQUAL: (\d+) values", r.output, re.M)]
    assert len(counts) == 4 and min(counts) >= 65, r.output


def test_wrong_fused_job_program_diverges():
    """Rank 0's optimizer job without the share_var that writes the gathered shards back into the
    fused buffer (its parameters stay as they were): DIVERGED."""
    import distc
    from distc.pipeline.schedule import prove_step

    opts, res = F.pp_sched_build("FThenB.a2.fuse", [0, 1, 2, 3])
    src, _ = S.main_input(F.PP, "FThenB", 2, "s0")
    serial = distc.parse(S.text(src), src)
    assert prove_step(serial, res, opts).status == 0
    job = res[0].plan.programs["optimizer"]
    text = str(job)
    cut = re.search(r'\n *\(\) = "pd_op\.share_var" \(%kwarg_fused@[^\n]*', text)
    assert cut
    res[0].plan.programs["optimizer"] = distc.parse(text[:cut.start()] + text[cut.end():])
    rep = prove_step(serial, res, opts)
    assert rep.status == 1 and rep.divergence.rank == 0, rep.summary()


@pytest.mark.parametrize("variant", F.PP_REFUSED)
def test_refused_schedules_built_and_proven(variant):
    """Eager1F1B and ZBH1 with tensor fusion: Paddle 3.3.1 refuses on every rank (as without
    fusion); distc's default builds them, proven on every rank (the whole pipelined step)."""
    import distc
    from distc.pipeline.schedule import prove_step

    for r in range(4):
        assert F.pp_refusal(variant, r) == ("AssertionError: pipeline scheduler only support FThenB, 1F1B and VPP "
                                            f"now, but receive {variant.split('.')[0]}\n")
    opts, res = F.pp_sched_build(variant, [0, 1, 2, 3])
    src, _ = S.main_input(F.PP, variant.split(".")[0], 4, "s0")
    rep = prove_step(distc.parse(S.text(src), src), res, opts)
    assert rep.status == 0 and rep.ranks == [0, 1, 2, 3] and rep.tensors == 287, rep.summary()


# ------------------------------------------------------------ the startup proof on constant-initialised models
def _verify_startups(main_in, ranks_pattern, startup_pattern, startups_out):
    return run("verify", main_in, "--ranks", ranks_pattern, "--startup", startup_pattern,
               "--startup-ranks", startups_out)


def test_fused_startup_mutations_diverge(pp_inputs, tmp_path):
    """LLaMA pp2 x dp2, whose startup programs fill every parameter and state with zeros: rank 0's
    startup program with two parameters' slice@ views swapped, or one view of the wrong range of
    the shard, is DIVERGED (both passed while the zeros were compared as zeros)."""
    r = run("shard", pp_inputs / "before_partition.r0.ir", "--tensor-fusion", "--all-ranks", "-q",
            "-o", tmp_path / "m.r{rank}.ir", "--startup", pp_inputs / "startup_after_remove.r{rank}.ir",
            "--startup-out", tmp_path / "s.r{rank}.ir")
    assert r.exit_code == 0, r.output
    args = (pp_inputs / "before_partition.r0.ir", tmp_path / "m.r{rank}.ir",
            pp_inputs / "startup_after_remove.r{rank}.ir", tmp_path / "t.r{rank}.ir")
    good = (tmp_path / "s.r0.ir").read_text()
    for k in range(1, 4):
        (tmp_path / f"t.r{k}.ir").write_text((tmp_path / f"s.r{k}.ir").read_text())
    (tmp_path / "t.r0.ir").write_text(good)
    r = _verify_startups(*args)
    assert r.exit_code == 0 and r.output.count("EQUAL") == 5, r.output
    a, b = 'parameter_name:"slice@linear_6.w_0.dist"', 'parameter_name:"slice@linear_5.w_0.dist"'
    assert a in good and b in good
    (tmp_path / "t.r0.ir").write_text(good.replace(a, "@A@").replace(b, a).replace("@A@", b))
    r = _verify_startups(*args)
    assert r.exit_code == 1 and re.search(r"DIVERGED on rank 0 at 'pd_op.view_slice': slice@linear_\d.w_0.dist",
                                          r.output), r.output
    wrong = re.sub(r"begin_idx:0,(chunk_id:-1,)end_idx:2048", r"begin_idx:32,\1end_idx:2080", good, count=1)
    assert wrong != good
    (tmp_path / "t.r0.ir").write_text(wrong)
    r = _verify_startups(*args)
    assert r.exit_code == 1 and "DIVERGED on rank 0" in r.output, r.output


def test_sliced_constant_state_of_wrong_range_diverges(tmp_path):
    """MoE at ZeRO-1: rank 0's startup program makes a state as zeros and slices its rows; rows
    [8, 16) (rank 1's) instead of [0, 8): DIVERGED (EQUAL before, zeros being zeros)."""
    for r in range(4):
        for snap in ("before_partition", "startup_after_remove"):
            (tmp_path / f"{snap}.r{r}.ir").write_text(llmdata.text(f"moe/moe_dp2ep2.s0.r{r}.{snap}.ir",
                                                                   root=llmdata.FUSION))
    r = run("shard", tmp_path / "before_partition.r0.ir", "--stage", "1", "--all-ranks", "-q",
            "-o", tmp_path / "m.r{rank}.ir", "--startup", tmp_path / "startup_after_remove.r{rank}.ir",
            "--startup-out", tmp_path / "s.r{rank}.ir")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "s.r0.ir").read_text()
    m = re.search(r'\(%(\d+)\) = "pd_op.full_int_array" \(\) \{[^}]*value:\[0\]\}[^\n]*\n'
                  r' *\(%(\d+)\) = "pd_op.full_int_array" \(\) \{[^}]*value:\[8\]\}', text)
    assert m
    seg = m.group(0).replace("value:[8]", "value:[16]").replace("value:[0]", "value:[8]")
    (tmp_path / "s.r0.ir").write_text(text[:m.start()] + seg + text[m.end():])
    r = _verify_startups(tmp_path / "before_partition.r0.ir", tmp_path / "m.r{rank}.ir",
                         tmp_path / "startup_after_remove.r{rank}.ir", tmp_path / "s.r{rank}.ir")
    assert r.exit_code == 1, r.output
    assert re.search(r"DIVERGED on rank 0 at 'pd_op.slice': \S+_moment1_0 is not its piece", r.output), r.output


# ------------------------------------------------------------ pp2 x dp2 x mp2
MP = "llama_pp2dp2mp2"


def test_mp_no_schedule_equals_paddle():
    """A rank of stage 1 of pp2 x dp2 x mp2: the stage meshes are 2-D, the clip all-reduces the
    mp-sharded pieces' norms over the sharding and the mp group of the first stage."""
    assert F.pp_check(5, MP) == ALL_SAME


def test_mp_1f1b_equals_paddle():
    assert F.pp_sched_mismatches("1F1B.a4.fuse", [6], MP) == []


def test_mp_1f1b_whole_step_proven():
    """Every rank's job programs (1F1B, 4 micro-batches) against the serial step: the ranks number
    their rings in their own order (the fused buffers' groups first), so a send and a receive
    meet on the same ordered group, not the same ring id."""
    import distc
    from distc.pipeline.schedule import prove_step

    opts, res = F.pp_sched_build("1F1B.a4.fuse", F.PP_RANKS[MP], MP)
    src, _ = S.main_input(MP, "1F1B", 4, "s0")
    rep = prove_step(distc.parse(S.text(src), src), res, opts)
    assert rep.status == 0, rep.summary()
    assert rep.ranks == list(range(8)) and rep.tensors >= 590


def test_stage3_with_schedule_proven(pp_inputs, tmp_path):
    """Beyond Paddle: fused ZeRO-3 (parameters gathered at the step's start, kept as the rank's
    shard) under 1F1B on pp2 x dp2, every rank proven."""
    r = _shard(pp_inputs, tmp_path, "--stage", "3", "--pp-schedule", "1F1B", "--acc-steps", "2", prefix="sched.")
    assert r.exit_code == 0, r.output
    assert "verify (the whole pipelined step): EQUAL: 209 values" in r.output
    assert len(re.findall(r"^verify startup \(rank \d\): EQUAL", r.output, re.M)) == 4
