"""Pipeline schedules and gradient merge at parity with Paddle 3.3.1 (tests/data/oracle/sched,
gen_pp.py --sched: the LLaMA model of pp/ with two decoder layers a stage, every rank).

From Paddle's stage-0 ``before_partition`` (and each rank's ``startup_after_remove``) the shard
pipeline (``distc.shard_ranks(..., pp_schedule=..., acc_steps=..., paddle_merge=True)``, what
``distc shard --pp-schedule S --acc-steps K --paddle`` runs) gives each rank's final dist program
(``dist_final``), ``dense`` program (as the scheduler leaves it), every job program, the job
list and ``startup_final``; each must be Paddle's byte for byte up to ring ids — for every rank
Paddle built (64 rank programs).  Each configuration is built once (the shared passes once for
all its ranks), its inputs parsed once a module.
"""

from __future__ import annotations

import functools

import pytest

import distc
import scheddata as S
from distc.pipeline import ShardOptions, shard, shard_ranks
from irutil import normalize_rings as canon


@functools.lru_cache(maxsize=None)
def parsed(name: str):
    """A stored program, parsed once (the pipeline works on copies)."""
    return distc.parse(S.text(name), name)


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


def options(case: str, mode: str, acc: int, stage: str, from_s0: bool, **kw) -> ShardOptions:
    return ShardOptions(stage=1 if stage == "s1" and from_s0 else 0, mesh_dims=S.MESH_DIMS[case],
                        pp_schedule=None if mode == "GM" else mode, acc_steps=acc, paddle_merge=True, **kw)


def build(case: str, mode: str, acc: int, stage: str, ranks: list[int]) -> dict[int, dict[str, str]]:
    """rank -> snapshot name -> distc's text, for one stored configuration."""
    src, from_s0 = main_input(case, mode, acc, stage)
    startups = {r: parsed(S.base(case, mode, acc, stage, r) + "startup_after_remove.ir") for r in ranks}
    res = shard_ranks(parsed(src), ranks, startup=startups, options=options(case, mode, acc, stage, from_s0))
    out: dict[int, dict[str, str]] = {}
    for r, x in res.items():
        got = out[r] = {"dist_final.ir": x.text, "dense.ir": str(x.dense), "jobs.txt": x.plan.job_list_text(),
                        "startup_final.ir": x.startup_text}
        got.update({f"job.{t}.ir": str(p) for t, p in x.plan.programs.items()})
    if stage == "s1" and from_s0:  # shard-optimizer on the stage-0 program: Paddle's stage-1 before_partition
        annotated = shard(parsed(src), ranks[0], stage=1, mesh_dims=S.MESH_DIMS[case], annotate_only=True).text
        for r in ranks:
            out[r]["before_partition.ir"] = annotated
    return out


GROUPS = S.groups()


def test_sched_data_complete():
    assert {(c, m) for c, m, *_ in GROUPS} >= {("llama_pp2dp2", "FThenB"), ("llama_pp2dp2", "1F1B")}
    for case, mode, acc, stage, ranks in GROUPS:
        assert ranks == list(range(len(ranks))), (case, mode, acc, stage)
    assert sum(len(g[-1]) for g in GROUPS) == 64  # rank programs Paddle built


@pytest.mark.parametrize("case,mode,acc,stage,ranks", [pytest.param(*g, id=f"{g[0]}.{g[1]}.a{g[2]}.{g[3]}")
                                                       for g in GROUPS])
def test_sched_parity(case, mode, acc, stage, ranks):
    bad = []
    for rank, got in build(case, mode, acc, stage, ranks).items():
        base = S.base(case, mode, acc, stage, rank)
        job_files = sorted(n[len(base):] for n in S.names() if n.startswith(base + "job."))
        assert sorted(k for k in got if k.startswith("job.")) == job_files, rank
        bad += [f"r{rank} {snap}" for snap, text in got.items() if canon(text) != canon(S.text(base + snap))]
    assert not bad


def test_paddle_refuses_eager_and_zero_bubble():
    refused = S.refusals()
    for mode in ("Eager1F1B", "ZBH1"):
        msg = refused[S.base("llama_pp2dp2", mode, 4, "s0", 0)[:-1]]
        assert "pipeline scheduler only support FThenB, 1F1B and VPP now" in msg and mode in msg


def test_kwarg_order_is_libstdcxx_unordered_map():
    """std::hash<std::string> and the prime rehash policy, against a job program of Paddle's."""
    import re

    from distc.dialects.pir_kwargs import cloned, inserted, std_hash

    assert std_hash("") == 6142509188972423790  # libstdc++ x86-64: std::hash<std::string>{}("")
    base = S.base("llama_pp2dp2", "1F1B", 4, "s0", 0)
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
    with pytest.raises(DiagnosticError, match="at least as many micro-batches as pipeline stages"):
        shard(parsed(S.base("llama_pp4", "1F1B", 4, "s0", 0) + "before_partition.ir"), 0, stage=0,
              pp_schedule="1F1B", acc_steps=2)


def test_library_dense_option_and_detached():
    """``dense=True``: the rank's program is the dense one (the job programs the same); a result
    detached for a worker keeps the job list and types, not the programs."""
    src, _ = main_input("llama_pp2dp2", "1F1B", 4, "s1")
    base = S.base("llama_pp2dp2", "1F1B", 4, "s1", 2)
    res = shard(parsed(src), 2, stage=1, mesh_dims=("dp",), pp_schedule="1F1B", acc_steps=4, paddle_merge=True,
                dense=True)
    assert res.dense is res.program and canon(res.text) == canon(S.text(base + "dense.ir"))
    assert canon(str(res.plan.programs["send_backward"])) == canon(S.text(base + "job.send_backward.ir"))
    d = res.detached()
    assert d.plan.jobs == res.plan.jobs and list(d.plan.programs) == list(res.plan.programs)
    assert d.program is d.dense is d.layouts is None and set(d.plan.programs.values()) == {None}
