"""The whole pipelined step, proven: every rank runs its job programs in its schedule order,
micro-batch by micro-batch (collectives and send/recv matched across ranks), and what the step
leaves (parameters, optimizer states, reset gradient-merge accumulators) equals the serial step
over the global batch — for every schedule, Paddle's and distc's own (Eager1F1B, ZBH1); Paddle's
gradient merge clips the sum of the micro-batch gradients (DIVERGED from the global batch whenever
the clip acts), distc averages first and warns; a schedule that cannot finish is a located
deadlock.  The modelled cost (``distc schedule``) and ``distc shard --pp-schedule`` end to end.

Each configuration is built once (module-scoped), through the shard pipeline as ``distc shard``
builds it; each schedule is proven once, at pp2 x dp2 with 4 micro-batches, and the other meshes
once each (pp4: 4 stages; pp2 x dp2 x mp2: collectives inside the job programs)."""

from __future__ import annotations

import functools
import json

import pytest
from click.testing import CliRunner

import distc
import scheddata as S
from distc.cli import main
from distc.pipeline import ShardOptions, shard_ranks
from distc.pipeline.schedule import peak_activations, prove_step, schedule_timeline
from irutil import normalize_rings as canon

PP2 = "llama_pp2dp2"


def src(case: str, mode: str) -> str:
    """Paddle's stage-0 program (VPP's: the model placed in chunks; pp2 x dp2 x mp2 VPP: stage 1's)."""
    stage = "s1" if case == "llama_pp2dp2mp2" and mode == "VPP" else "s0"
    return S.base(case, "VPP" if mode == "VPP" else "1F1B", 4, stage, 0) + "before_partition.ir"


@functools.lru_cache(maxsize=None)
def parsed(case: str, mode: str):
    return distc.parse(S.text(src(case, mode)), src(case, mode))


@functools.lru_cache(maxsize=None)
def built(case: str, mode: str, k: int, paddle: bool = False):
    """(options, every rank's result), once a module."""
    o = ShardOptions(stage=0, pp_schedule=None if mode == "GM" else mode, acc_steps=k, paddle_merge=paddle)
    return o, shard_ranks(parsed(case, mode), options=o)


def prove(case: str, mode: str, k: int, paddle: bool = False, **kw):
    o, res = built(case, mode, k, paddle)
    return prove_step(parsed(case, mode), res, o, **kw)


@pytest.mark.parametrize("mode", ["FThenB", "VPP", "GM", "Eager1F1B", "ZBH1"])  # (1F1B: test_cli_shard_schedule)
def test_whole_step_equal(mode):
    rep = prove(PP2, mode, 4)
    assert rep.status == 0, rep.summary()
    assert rep.ranks == [0, 1, 2, 3] and rep.tensors >= 390 and rep.max_abs < 1e-12


@pytest.mark.parametrize("case,mode,k", [("llama_pp4", "ZBH1", 4), ("llama_pp2dp2mp2", "1F1B", 4)])
def test_whole_step_other_meshes(case, mode, k):
    rep = prove(case, mode, k)
    assert rep.status == 0, rep.summary()
    assert rep.ranks == list(range(8 if case == "llama_pp2dp2mp2" else 4))


def test_paddle_gradient_merge_clips_the_sum():
    """Paddle's program (paddle_merge) is its own gradient merge exactly (the clip sees the sum of
    the 4 micro-batch gradients, the update a quarter of the clipped sum), and so not the global
    batch's step here, where the clip acts (global norm ~4, clip 1)."""
    o, res = built(PP2, "1F1B", 4, True)
    assert prove_step(parsed(PP2, "1F1B"), res, o).status == 0
    from dataclasses import replace

    rep = prove_step(parsed(PP2, "1F1B"), res, replace(o, paddle_merge=False))
    assert rep.status == 1 and "after the step is not its piece of the serial value" in rep.summary()
    w = [x for x in res.warnings if "gradient merge over 4 micro-batches, as Paddle 3.3.1" in x]
    assert w and "as if the clip norm were 4x smaller" in w[0]


def test_deadlock_is_located():
    """Stage 1 runs FThenB's order while stage 0 runs 1F1B's: rank 0 waits for a gradient of
    micro-batch 0 that rank 2 sends only after all its forwards, which wait for rank 0."""
    from distc.analysis.simulate.jobs import verify_pipeline
    from distc.passes.pipeline_schedule import rank_jobs

    fthenb = [t for m in range(4) for t in (("recv_forward", m), ("forward", m))] + \
        [t for m in range(4) for t in (("backward", m), ("send_backward", m))] + [("optimizer", 0)]
    one = [t for m in range(4) for t in (("recv_forward", m), ("forward", m), ("backward", m), ("send_backward", m))] \
        + [("optimizer", 0)]
    _, res = built(PP2, "1F1B", 4, True)
    jobs = {r: rank_jobs(x.plan, x.rings, x.layouts) for r, x in res.items()}
    for r, order in {0: one, 1: one, 2: fthenb, 3: fthenb}.items():
        jobs[r].jobs = order
    rep = verify_pipeline(parsed(PP2, "1F1B"), jobs, 4, paddle_merge=True)
    msg = rep.summary()
    assert rep.status == 1 and "deadlock" in msg and "rank 0 in job backward 0" in msg, msg


def test_bubbles_and_activations():
    """pp4, 4 micro-batches: FThenB and 1F1B have the same step (1F1B saves activation memory,
    not time: on stage 3 one micro-batch at a time instead of 4), ZBH1's weight-gradient jobs fill
    part of the bubble; pp2: VPP's chunks shorten it."""
    tl = {m: schedule_timeline(built("llama_pp4", m, 4)[1]) for m in ("FThenB", "1F1B", "ZBH1")}
    f, one, zb = tl["FThenB"], tl["1F1B"], tl["ZBH1"]
    assert abs(f.makespan - one.makespan) < 1e-9 * one.makespan
    assert 0.3 < one.bubble() < 0.5 and zb.bubble() < one.bubble() - 0.05 and zb.makespan < one.makespan
    assert schedule_timeline(built(PP2, "VPP", 4)[1]).bubble() < schedule_timeline(built(PP2, "FThenB", 4)[1]).bubble()
    assert [peak_activations(built("llama_pp4", "1F1B", 4)[1][r].plan.jobs) for r in (0, 1, 2, 3)] == [4, 3, 2, 1]
    assert peak_activations(built("llama_pp4", "FThenB", 4)[1][0].plan.jobs) == 4
    doc = one.as_json()
    assert set(doc["timeline"]) == {"0", "1", "2", "3"} and doc["timeline"]["0"][0][:2] == ["recv_forward", 0]
    assert all(j[2] <= j[3] for js in doc["timeline"].values() for j in js)


def cli(*args, code: int = 0):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == code, (r.output, r.exception)
    return r


def test_cli_shard_schedule(tmp_path):
    """``distc shard --pp-schedule 1F1B --acc-steps 4 --all-ranks``: every rank's dist_final (-o),
    job programs (--job-out), job list (--job-list) and startup program in one transaction;
    --paddle gives Paddle's files byte for byte (ring ids up to renaming); --verify proves the whole
    step of distc's default (which warns how it differs from Paddle's) and the startup programs."""
    base = lambda r: S.base(PP2, "1F1B", 4, "s0", r)  # noqa: E731
    main_ir = tmp_path / "main.ir"
    main_ir.write_text(S.text(base(0) + "before_partition.ir"))
    for r in range(4):
        (tmp_path / f"startup.r{r}.ir").write_text(S.text(base(r) + "startup_after_remove.ir"))
    outs = ["-o", tmp_path / "r{rank}.dist_final.ir", "--job-out", tmp_path / "r{rank}.job.{job}.ir",
            "--job-list", tmp_path / "r{rank}.jobs.txt", "--startup", tmp_path / "startup.r{rank}.ir",
            "--startup-out", tmp_path / "r{rank}.startup_final.ir"]
    cli("shard", main_ir, "--stage", 0, "--pp-schedule", "1F1B", "--acc-steps", 4, "--all-ranks", "--paddle", *outs,
        "-q")
    for r in range(4):
        for snap in ("dist_final.ir", "jobs.txt", "startup_final.ir", "job.recv_forward.ir", "job.forward.ir",
                     "job.backward.ir", "job.send_backward.ir", "job.optimizer.ir"):
            assert canon((tmp_path / f"r{r}.{snap}").read_text()) == canon(S.text(base(r) + snap)), (r, snap)
    r = cli("shard", main_ir, "--stage", 0, "--pp-schedule", "1F1B", "--acc-steps", 4, "--all-ranks", *outs,
            "--verify", "--json")
    doc = json.loads(r.stderr.strip().splitlines()[-1])
    step = doc["verify"]["verify (the whole pipelined step)"]
    assert step["status"] == "equal" and step["ranks"] == [0, 1, 2, 3], step
    assert all(v["status"] == "equal" for k, v in doc["verify"].items() if k.startswith("verify startup"))
    assert doc["schedule"] == "1F1B" and doc["micro_batches"] == 4
    assert doc["ranks"]["2"]["jobs"][:3] == [["recv_forward", 0], ["forward", 0], ["backward", 0]]
    assert any("--paddle gives Paddle's program" in w for w in doc["warnings"])
    assert (tmp_path / "r2.jobs.txt").read_text() == "".join(f"{t} {m}\n" for t, m in doc["ranks"]["2"]["jobs"])


def test_cli_shard_schedule_one_rank_and_usage(tmp_path):
    """One rank: the dense program (--dense), the ZBH1 job programs and the job list on stdout's
    place (-); gradient merge alone (--acc-steps without --pp-schedule: 'optimize'); usage errors."""
    main_ir = tmp_path / "main.ir"
    main_ir.write_text(S.text(src(PP2, "1F1B")))
    r = cli("shard", main_ir, "--stage", 0, "--pp-schedule", "ZBH1", "--acc-steps", 4, "--rank", 2, "--dense",
            "-o", tmp_path / "r2.ir", "--job-out", tmp_path / "r2.{job}.ir", "--job-list", "-")
    assert r.stdout.splitlines()[-4:] == ["backward_b 3", "backward_w 3", "backward_w 0", "optimizer 0"], r.stdout
    assert {p.name for p in tmp_path.glob("r2.*.ir")} == {f"r2.{t}.ir" for t in (
        "forward", "backward", "backward_b", "backward_w", "optimizer")}
    assert "pd_dist" not in (tmp_path / "r2.ir").read_text()  # dense
    assert "ZBH1, 4 micro-batches, rank 2 (pipeline stage 1 of 2)" in r.stderr
    r = cli("shard", main_ir, "--stage", 0, "--acc-steps", 2, "--rank", 1, "-o", tmp_path / "gm.ir",
            "--job-list", tmp_path / "gm.txt", "--json")
    assert (tmp_path / "gm.txt").read_text() == "forward 0\nbackward 0\nforward 1\nbackward 1\noptimize 0\n"
    assert "@GRAD@MERGE" in (tmp_path / "gm.ir").read_text()
    for args, msg in ((["--job-list", "x.txt"], "--pp-schedule or --acc-steps"),
                      (["--acc-steps", 2, "--job-out", "x.ir"], "{job}"),
                      (["--pp-schedule", "1F1B", "--vpp-degree", 3], "VPP"),
                      (["--paddle"], "--acc-steps K > 1"),
                      (["--acc-steps", 2, "--annotate-only"], "--annotate-only"),
                      (["--acc-steps", 2, "--all-ranks", "-o", "r{rank}.ir", "--job-list", "jobs.txt"], "{rank}")):
        r = cli("shard", main_ir, "--stage", 0, *args, code=2)
        assert msg in r.output, (args, r.output)


def test_cli_schedule_compares(tmp_path):
    """``distc schedule A B``: the schedules of a model and VPP of the model placed in chunks,
    one table and one --json line (what distc report --schedule draws)."""
    a, b = tmp_path / "pp.ir", tmp_path / "vpp.ir"
    a.write_text(S.text(src(PP2, "1F1B")))
    b.write_text(S.text(src(PP2, "VPP")))
    r = cli("schedule", a, b, "--acc-steps", 4, "--json")
    doc = json.loads(r.stderr.strip().splitlines()[-1])
    assert list(doc["schedules"]) == ["FThenB", "1F1B", "Eager1F1B", "ZBH1", "VPP"]
    assert doc["schedules"]["VPP"]["program"] == str(b)
    assert set(doc["timelines"]["ZBH1"]) == {"0", "1", "2", "3"}
    assert doc["schedules"]["1F1B"]["peak_activations"] == 2 and doc["schedules"]["FThenB"]["peak_activations"] == 4
    assert doc["schedules"]["ZBH1"]["bubble"] < doc["schedules"]["1F1B"]["bubble"]
    r = cli("schedule", a, "--acc-steps", 1, "--pp-schedule", "1F1B,FThenB")
    assert "1F1B: not built: 1F1B needs at least as many micro-batches as pipeline stages (1 < 2)" in r.stderr
    assert "FThenB" in r.stderr and "bubble" in r.stderr
