"""Pipeline schedules and gradient merge at parity with Paddle 3.3.1 (tests/data/oracle/sched,
gen_pp.py --sched: the LLaMA model of pp/ with two decoder layers a stage, every rank).

From Paddle's stage-0 ``before_partition`` (and each rank's ``startup_after_remove``) the shard
pipeline (``distc.shard_ranks(..., pp_schedule=..., acc_steps=..., paddle_merge=True)``, what
``distc shard --pp-schedule S --acc-steps K --paddle`` runs) gives each rank's final dist program
(``dist_final``), ``dense`` program (as the scheduler leaves it), every job program, the job
list and ``startup_final``; each must be Paddle's byte for byte up to ring ids.  Here one
configuration of each kind (1F1B from stage 0 to stage 1, VPP, gradient merge alone, pp4 FThenB
with 2 micro-batches; 1F1B a4 through the CLI in test_sched_verify.py); every stored configuration,
every rank: tests/oracle/test_sched_matrix.py (``make test-oracle``).
"""

from __future__ import annotations

import pytest

import scheddata as S
from distc.pipeline import shard
from irutil import normalize_rings as canon

parsed = S.parsed
GROUPS = S.groups()
FAST = [("llama_pp2dp2", "1F1B", 4, "s1"), ("llama_pp2dp2", "VPP", 4, "s0"), ("llama_pp2dp2", "GM", 2, "s0"),
        ("llama_pp4", "FThenB", 2, "s1")]


def test_sched_data_complete():
    assert {(c, m) for c, m, *_ in GROUPS} >= {("llama_pp2dp2", "FThenB"), ("llama_pp2dp2", "1F1B")}
    for case, mode, acc, stage, ranks in GROUPS:
        assert ranks == list(range(len(ranks))), (case, mode, acc, stage)
    assert sum(len(g[-1]) for g in GROUPS) >= 232  # rank programs Paddle built
    assert set(FAST) <= {tuple(g[:4]) for g in GROUPS}


@pytest.mark.parametrize("case,mode,acc,stage,ranks", [pytest.param(*g, id=f"{g[0]}.{g[1]}.a{g[2]}.{g[3]}")
                                                       for g in GROUPS if tuple(g[:4]) in FAST])
def test_sched_parity(case, mode, acc, stage, ranks):
    assert S.mismatches(case, mode, acc, stage, ranks) == []


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


def test_too_few_micro_batches_refused_alike(tmp_path):
    """pp4 1F1B (and ZBH1) with 2 micro-batches: Paddle asserts, distc says why (a located error, no plan)."""
    from distc.syntax.diagnostics import DiagnosticError

    assert "Num of micro batches should larger than or equal to pp degree" in \
        S.refusals()[S.base("llama_pp4", "1F1B", 2, "s0", 0)[:-1]]
    name = S.base("llama_pp4", "1F1B", 4, "s0", 0) + "before_partition.ir"
    for mode, acc, message in (("1F1B", 2, "at least as many micro-batches as pipeline stages"),
                               ("ZBH1", 2, "at least as many micro-batches as pipeline stages"),
                               ("Eager1F1B", 6, r"Eager1F1B needs at least 2 \(P - S\) - 1 = 7 micro-batches on "
                                                r"stage 0 \(Paddle asserts the same\); 6 given")):
        with pytest.raises(DiagnosticError, match=message) as err:  # (Eager1F1B's: the file's error after reshard)
            shard(parsed(name), 0, stage=0, pp_schedule=mode, acc_steps=acc)
        # at the parameter that makes the 4 stages: Paddle declares the last stage's first, so the
        # first on mesh [0] (the CLI contract's FILE:LINE:COL and caret; it was the file's error)
        lines = S.text(name).splitlines()
        at = next(i for i, x in enumerate(lines, 1) if '"builtin.parameter"' in x and "process_ids:[0]}" in x)
        e = err.value
        assert (e.line, e.col) == (at, 5), e.render()
        assert e.notes == ["4 stages: the meshes of the parameters ([3], [2], [1], [0] as they appear); this "
                           "parameter's is the last to appear (--acc-steps sets the micro-batches)"]
    from click.testing import CliRunner

    from distc.cli import main

    (tmp_path / "pp4.ir").write_text(S.text(name))
    r = CliRunner().invoke(main, ["shard", str(tmp_path / "pp4.ir"), "--pp-schedule", "1F1B", "--acc-steps", "2",
                                  "--all-ranks", "-q", "-o", str(tmp_path / "o.r{rank}.ir")])
    err = r.stderr.splitlines()
    i = next(i for i, x in enumerate(err) if ": error: " in x)
    assert r.exit_code == 1 and err[i].startswith(f"{tmp_path / 'pp4.ir'}:{at}:5: error: 1F1B needs"), r.stderr
    assert err[i + 1].startswith('    (%356) = "builtin.parameter"') and err[i + 2] == "    ^", r.stderr
    assert not list(tmp_path.glob("o.r*.ir"))


def test_library_dense_option_and_detached():
    """``dense=True``: the rank's program is the dense one (the job programs the same); a result
    detached for a worker keeps the job list and types, not the programs."""
    src, _ = S.main_input("llama_pp2dp2", "1F1B", 4, "s1")
    base = S.base("llama_pp2dp2", "1F1B", 4, "s1", 2)
    res = shard(parsed(src), 2, stage=1, mesh_dims=("dp",), pp_schedule="1F1B", acc_steps=4, paddle_merge=True,
                dense=True)
    assert res.dense is res.program and canon(res.text) == canon(S.text(base + "dense.ir"))
    assert canon(str(res.plan.programs["send_backward"])) == canon(S.text(base + "job.send_backward.ir"))
    d = res.detached()
    assert d.plan.jobs == res.plan.jobs and list(d.plan.programs) == list(res.plan.programs)
    assert d.program is d.dense is d.layouts is None and set(d.plan.programs.values()) == {None}


def test_too_few_micro_batches_vpp_uses_the_vpp_degree(monkeypatch):
    """The early check of VPP's micro-batches builds the job list with the --vpp-degree given (it
    used 2 whatever was given): the chunks of Paddle's VPP program (vpp_degree 2, 2 stages)."""
    from distc.passes import pipeline_vpp
    from distc.syntax.diagnostics import DiagnosticError

    seen, real = [], pipeline_vpp.jobs_vpp
    monkeypatch.setattr(pipeline_vpp, "jobs_vpp", lambda n, p, s, v: seen.append(v) or real(n, p, s, v))
    name = S.base("llama_pp2dp2", "VPP", 4, "s0", 0) + "before_partition.ir"
    for v in (2, 3):
        with pytest.raises(DiagnosticError, match=r"VPP needs at least as many micro-batches as pipeline stages "
                                                  r"\(1 < 2\)") as err:
            shard(parsed(name), 0, stage=0, pp_schedule="VPP", acc_steps=1, vpp_degree=v)
        assert err.value.line is not None
    assert seen == [2, 3]
