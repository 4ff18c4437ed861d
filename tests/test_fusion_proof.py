"""Fused ZeRO proven by the simulator (issue 19, points 1 and 4): what one step of the fused
programs leaves in every parameter and optimizer state (each ``slice@`` piece against its piece of
the serial value) equals the serial step, on every rank -- Paddle's fused programs, distc's
(``--tensor-fusion --verify``), and distc's stage-3 fusion, which Paddle does not build, with and
without mp.  A layout mistake (views swapped) or a missing gather diverges."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import fusiondata as F
from distc.analysis.simulate.proof import verify_step
from distc.cli import main
from distc.pipeline import ShardOptions, shard_ranks
from distc.syntax.parser import parse_program
from distc.syntax.printer import print_program


def serial(case: str):
    return parse_program(F.text(case, "s0", 0, "before_partition"))


def ranks_of(case: str, **opts) -> dict:
    """distc's rank programs of ``case`` (dense: no startup needed)."""
    res = shard_ranks(serial(case), F.CASES[case], options=ShardOptions(tensor_fusion=True, **opts))
    return {r: parse_program(x.text) for r, x in res.items()}


def status(report) -> str:
    return "EQUAL" if report.status == 0 else str(report.divergence)


@pytest.mark.parametrize("case,variant", [("mlp_dp2mp2", "buf0"), ("mlp_dp4", "ovrel")])
def test_paddles_fused_programs_are_the_serial_step(case, variant):
    """Paddle's own after-reshard programs, every rank (a 2-D mesh: the fused collectives carry
    the whole [2,2] mesh and nranks 2; the simulator takes the 1-D group their ring names)."""
    progs = {r: parse_program(F.text(case, variant, r, "after_reshard")) for r in F.CASES[case]}
    rep = verify_step(serial(case), progs)
    assert status(rep) == "EQUAL"
    assert rep.tensors >= 40


@pytest.mark.parametrize("case,stage,opts", [
    ("mlp_dp2mp2", 1, {"overlap": True}),
    ("mlp_dp2mp2", 3, {}),                      # beyond Paddle: stage 3 with mp
    ("mlp_dp4", 3, {"comm_buffer_mb": 0}),      # a buffer a parameter, some ranks own none of one
    ("mlp_dp2", 3, {"overlap": True, "release_gradients": True}),
])
def test_distc_fused_programs_every_rank(case, stage, opts):
    rep = verify_step(serial(case), ranks_of(case, stage=stage, **opts))
    assert status(rep) == "EQUAL"
    assert set(rep.ranks) == set(F.CASES[case])


def _swap_views(text: str) -> str:
    """The stage-3 parameters' views of the gathered buffer: the first two of the same length
    swapped (a layout mistake that type-checks)."""
    views = [m for m in re.finditer(r'"pd_op\.view_slice" \(%kwarg_fused@[^)]*\) \{begin_idx:(\d+),end_idx:(\d+)', text)]
    by_len: dict[int, list] = {}
    for m in views:
        by_len.setdefault(int(m.group(2)) - int(m.group(1)), []).append(m)
    a, b = next(v[:2] for v in by_len.values() if len(v) >= 2)
    spans = sorted([(a.span(1)[0], a.span(2)[1], b.group(1), b.group(2)), (b.span(1)[0], b.span(2)[1], a.group(1), a.group(2))],
                   reverse=True)
    for lo, hi, beg, end in spans:
        text = text[:lo] + f"{beg},end_idx:{end}" + text[hi:]
    return text


def test_wrong_fused_programs_diverge():
    case = "mlp_dp2"
    progs = ranks_of(case, stage=3)
    assert status(verify_step(serial(case), progs)) == "EQUAL"
    # the parameters read at the wrong place of the gathered buffer
    bad = {**progs, 0: parse_program(_swap_views(print_program(progs[0])))}
    rep = verify_step(serial(case), bad)
    assert rep.status == 1  # (rank 0's gradients reach rank 1's shard too)
    # the gathered buffer never written back (no share_var): rank 1 reads the shards it does not hold
    rep = verify_step(serial(case), {**progs, 1: parse_program(_drop_gather_back(print_program(progs[1])))})
    assert rep.status == 1


def _shard_verify(tmp_path, case: str, *args: str):
    """``distc shard MAIN --tensor-fusion --all-ranks --verify`` with the startup programs, every
    rank EQUAL: (MAIN's path, stderr)."""
    m = tmp_path / "main.ir"
    m.write_text(F.text(case, "s0", 0, "before_partition"))
    for r in F.CASES[case]:
        (tmp_path / f"startup.r{r}.ir").write_text(F.text(case, "s0", r, "startup_after_remove"))
    r = CliRunner().invoke(main, ["shard", str(m), *args, "--tensor-fusion", "--all-ranks", "--verify",
                                  "-o", str(tmp_path / "m.r{rank}.ir"), "--startup", str(tmp_path / "startup.r{rank}.ir"),
                                  "--startup-out", str(tmp_path / "s.r{rank}.ir")])
    assert r.exit_code == 0, r.output
    out = r.stderr
    assert re.search(r"^verify: EQUAL: \d+ values .* on ranks \[0, 1, 2, 3\]", out, re.M), out
    assert out.count("verify startup (rank") == 4 and "DIVERGED" not in out
    return m, out


def test_cli_verify_stage3_and_summary(tmp_path):
    """``--stage 3 --tensor-fusion --verify``, startup too, and the summary against unfused ZeRO-3."""
    m, out = _shard_verify(tmp_path, "mlp_dp2mp2", "--stage", "3")
    assert "bytes sent per rank: tensor fusion vs unfused ZeRO-3" in out
    assert "per rank (4 ranks, stage 3" in out and "after ZeRO-3:" in out
    # the startup programs: each rank's slice@ pieces (parameters, moments) against the serial ones
    counts = [int(n) for n in re.findall(r"^verify startup \(rank \d\): EQUAL: (\d+) values", out, re.M)]
    assert len(counts) == 4 and min(counts) >= 5, out
    assert "no rank's startup program initializes it" not in out
    # a slice@ state of rank 0's startup initialized wrong (beta1^0 = 0.5, not 0.9): DIVERGED, exit 1
    text = (tmp_path / "s.r0.ir").read_text()
    v = re.search(r'\(%(\w+)\) \{[^}]*output_name:"slice@\S+_beta1_pow_acc_0"', text)
    assert v
    d = re.search(r'(\(%' + v.group(1) + r'\) = "pd_op\.full" \(\) \{[^}]*value:)0\.9\b', text)
    (tmp_path / "s.r0.ir").write_text(text[:d.start()] + d.group(1) + "0.5" + text[d.end():])
    r = CliRunner().invoke(main, ["verify", str(m), "--ranks", str(tmp_path / "m.r{rank}.ir"), "--startup",
                                  str(tmp_path / "startup.r{rank}.ir"), "--startup-ranks", str(tmp_path / "s.r{rank}.ir")])
    assert r.exit_code == 1, r.output
    assert re.search(r"startup.*DIVERGED on rank 0", r.output), r.output


def test_cli_shard_verify_zero1(tmp_path):
    """``distc shard --tensor-fusion --verify`` (Paddle's ZeRO-1 fusion) on every rank of dp4, the
    startup programs too."""
    _, out = _shard_verify(tmp_path, "mlp_dp4")
    assert "bytes sent per rank: tensor fusion vs unfused ZeRO-1" in out


def _drop_gather_back(text: str) -> str:
    """The ``share_var`` that writes the all-gathered shards into the fused parameter buffer,
    removed: the rank's parameters keep the other ranks' pieces stale."""
    m = re.search(r'\(%(\w+)\) = "pd_op\.all_gather" \(%kwarg_shard@fused@', text)
    assert m
    text, n = re.subn(r'\n\s*\(\) = "pd_op\.share_var" \(%kwarg_fused@[^,]*, %' + m.group(1) + r'\)[^\n]*', "", text)
    assert n == 1
    return text


def test_cli_verify_paddles_fused_programs(tmp_path):
    """``distc verify`` on Paddle's own fused ZeRO-1 rank programs (dp2, the LLaMA with its sharded
    global-norm clip): EQUAL; rank 1 without its gather-back: DIVERGED, exit 1, naming rank 1."""
    case, variant = "llama_dp2", "fuse"
    s = tmp_path / "serial.ir"
    s.write_text(F.text(case, "s0", 0, "before_partition"))
    for r in F.CASES[case]:
        (tmp_path / f"r{r}.ir").write_text(F.text(case, variant, r, "after_reshard"))
    args = ["verify", str(s), "--ranks", str(tmp_path / "r{rank}.ir")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert re.search(r"EQUAL: \d+ values .* on ranks \[0, 1\]", r.output + r.stderr), r.output
    (tmp_path / "r1.ir").write_text(_drop_gather_back(F.text(case, variant, 1, "after_reshard")))
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    assert "DIVERGED" in r.output + r.stderr and "rank 1" in r.output + r.stderr


@pytest.mark.parametrize("case", ["mlp_dp2mp2_lamb", "mlp_dp4_lamb"])
def test_lamb_is_refused_under_tensor_fusion(tmp_path, case):
    """lamb_'s trust ratio takes the norms of the whole parameter and update: a fused buffer's slice
    updated alone is numerically wrong (the fused program diverged from the serial step at
    linear_1.w_0 before this refusal: max rel error 0.087 on dp2mp2, 1.52 on dp4), so --tensor-fusion
    refuses it at the op, writing nothing; without it the same program shards and proves EQUAL."""
    import modelsdata as M
    src = M.write(tmp_path, "mlp", case, "s0", 0, "before_partition")
    out = tmp_path / "o.r{rank}.ir"
    r = CliRunner().invoke(main, ["shard", str(src), "--tensor-fusion", "--all-ranks", "-o", str(out)])
    assert r.exit_code == 1, r.output
    assert re.search(r":45:5: error: tensor-fusion: 'pd_op.lamb_' needs its whole parameter and update", r.output)
    assert not list(tmp_path.glob("o.r*.ir"))
    r = CliRunner().invoke(main, ["shard", str(src), "--all-ranks", "-o", str(out), "--verify", "-q"])
    assert r.exit_code == 0 and "verify: EQUAL" in r.output, r.output
