"""Pipeline schedules and gradient merge at parity with Paddle 3.3.1 (tests/data/oracle/sched,
gen_pp.py --sched: the LLaMA model of pp/ with two decoder layers a stage, every rank).

From Paddle's stage-0 ``before_partition`` (and each rank's ``startup_after_remove``) distc runs
[shard-optimizer,] partition, reshard, remove-other-rank, gradient-merge (Paddle's dist program
after the pass: ``dist_final``), dist-to-dense and the scheduler pass, and must print Paddle's
``dense`` program (as the scheduler leaves it), every job program, the job list and
``startup_final``, byte for byte up to ring ids — for every rank Paddle built.
"""

from __future__ import annotations

import pytest

import distc
import scheddata as S
from distc.passes import load_passes
from distc.passes.base import REGISTRY, PassContext, PassManager
from distc.passes.gradient_merge import zero_accumulators
from distc.passes.pipeline_schedule import build_schedule
from distc.passes.shard_startup import persistable_layouts, persistable_ranks, shard_startup
from test_shard_passes import canon

load_passes()


def main_input(case: str, mode: str, acc: int, stage: str) -> tuple[str, bool]:
    """Paddle's stage-0 program for the case (the program does not depend on the schedule before
    the scheduler runs, except for VPP's chunks): (its name, whether it is stage 0)."""
    modes = [mode] + ([] if mode == "VPP" else [m for m in ("FThenB", "1F1B", "GM") if m != mode])
    for m in modes:
        for r in range(8):
            n = S.base(case, m, acc, "s0", r) + "before_partition.ir"
            if S.has(n):
                return n, True
    return S.base(case, mode, acc, stage, 0) + "before_partition.ir", False


def build(case: str, mode: str, acc: int, stage: str, rank: int, src: str, from_s0: bool) -> dict[str, str]:
    prog = distc.parse(S.text(src), src)
    if stage == "s1" and from_s0:
        PassManager([REGISTRY["shard-optimizer"](stage=1, axis="", mesh_dims=S.MESH_DIMS[case], amp=False)],
                    verify_each=False).run(prog, PassContext())
    out = {"before_partition.ir": str(prog)}
    layouts, params, owners = persistable_layouts(prog), persistable_layouts(prog, params=True), persistable_ranks(prog)
    rs = build_schedule(prog, rank, mode, acc, paddle=True)  # Paddle's gradient merge, as it is
    out["dist_final.ir"] = rs.dist_text
    out["dense.ir"] = str(rs.dense)
    out["jobs.txt"] = rs.plan.job_list_text()
    for t, p in rs.plan.programs.items():
        out[f"job.{t}.ir"] = str(p)
    sname = S.base(case, mode, acc, stage, rank) + "startup_after_remove.ir"
    sprog = distc.parse(S.text(sname), sname)
    shard_startup(sprog, layouts, rank, PassContext(), params=params, owners=owners)
    zero_accumulators(sprog, rs.ctx.stats.merged_grads)
    out["startup_final.ir"] = str(sprog)
    return out


GROUPS = S.groups()
# Known differences, pinned (each must still differ, so that a fix shows): none left.
KNOWN_DIFF: dict[tuple, set[str]] = {}


def test_sched_data_complete():
    assert {(c, m) for c, m, *_ in GROUPS} >= {("llama_pp2dp2", "FThenB"), ("llama_pp2dp2", "1F1B")}
    for case, mode, acc, stage, ranks in GROUPS:
        assert ranks == list(range(len(ranks))), (case, mode, acc, stage)


@pytest.mark.parametrize("case,mode,acc,stage,ranks", [pytest.param(*g, id=f"{g[0]}.{g[1]}.a{g[2]}.{g[3]}")
                                                       for g in GROUPS])
def test_sched_parity(case, mode, acc, stage, ranks):
    src, from_s0 = main_input(case, mode, acc, stage)
    bad = []
    for rank in ranks:
        got = build(case, mode, acc, stage, rank, src, from_s0)
        base = S.base(case, mode, acc, stage, rank)
        job_files = sorted(n[len(base):] for n in S.names() if n.startswith(base + "job."))
        assert sorted(k for k in got if k.startswith("job.")) == job_files, rank
        for snap, text in got.items():
            if snap == "before_partition.ir" and not (stage == "s1" and from_s0):
                continue
            if canon(text) != canon(S.text(base + snap)):
                bad.append(f"r{rank} {snap}")
    known = KNOWN_DIFF.get((case, mode, acc, stage), set())
    if known:
        assert {b.split()[1] for b in bad} == known, bad
    else:
        assert not bad


def test_paddle_refuses_eager_and_zero_bubble():
    refused = S.refusals()
    for mode in ("Eager1F1B", "ZBH1"):
        msg = refused[S.base("llama_pp2dp2", mode, 4, "s0", 0)[:-1]]
        assert "pipeline scheduler only support FThenB, 1F1B and VPP now" in msg and mode in msg


def test_kwarg_order_is_libstdcxx_unordered_map():
    """std::hash<std::string> and the prime rehash policy, against a job program of Paddle's."""
    from distc.dialects.pir_kwargs import cloned, inserted, std_hash

    assert std_hash("") == 6142509188972423790  # libstdc++ x86-64: std::hash<std::string>{}("")
    base = S.base("llama_pp2dp2", "1F1B", 4, "s0", 0)
    import re
    order = lambda snap: re.findall(r"^        %kwarg_(\S+)", S.text(base + snap), re.M)  # noqa: E731
    made = re.findall(r'output_name:"([^"]*@GRAD@MERGE)"', S.text(base + "startup_final.ir"))
    assert inserted(made) == order("dist_final.ir")
    assert cloned(order("dist_final.ir")) == order("dense.ir")
    assert cloned(order("dense.ir")) == order("job.forward.ir")


def test_too_few_micro_batches_refused_alike():
    """pp4 1F1B with 2 micro-batches: Paddle asserts, distc says why (a located error, no plan)."""
    from distc.syntax.diagnostics import DiagnosticError

    assert "Num of micro batches should larger than or equal to pp degree" in \
        S.refusals()[S.base("llama_pp4", "1F1B", 2, "s0", 0)[:-1]]
    prog = distc.parse(S.text(S.base("llama_pp4", "1F1B", 4, "s0", 0) + "before_partition.ir"), "m")
    with pytest.raises(DiagnosticError, match="at least as many micro-batches as pipeline stages"):
        build_schedule(prog, 0, "1F1B", 2)


@pytest.mark.parametrize("mode,acc,stage,rank", [("1F1B", 4, "s1", 2), ("GM", 2, "s0", 1)])
def test_library_shard_pipeline(mode, acc, stage, rank):
    """``distc.shard(main, rank, pp_schedule=..., acc_steps=...)``: the shard pipeline runs the
    scheduler too; its result carries Paddle's dense program, job plan and startup program."""
    from distc.pipeline.shard import shard

    src, _ = main_input("llama_pp2dp2", mode, acc, stage)
    base = S.base("llama_pp2dp2", mode, acc, stage, rank)
    startup = distc.parse(S.text(base + "startup_after_remove.ir"), "startup.ir")
    res = shard(distc.parse(S.text(src), src), rank, startup=startup, stage=int(stage[1]), mesh_dims=("dp",),
                pp_schedule=None if mode == "GM" else mode, acc_steps=acc, paddle_merge=True)
    assert canon(res.text) == canon(S.text(base + "dense.ir"))
    assert res.plan.job_list_text() == S.text(base + "jobs.txt")
    for t, p in res.plan.programs.items():
        assert canon(str(p)) == canon(S.text(base + f"job.{t}.ir")), t
    assert canon(res.startup_text) == canon(S.text(base + "startup_final.ir"))
