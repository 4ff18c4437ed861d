"""``distc verify --startup`` of a ZeRO-3 startup program that ``distc shard --stage 3`` builds
from a stage-0 startup: its dense per-rank values carry no layout, so each parameter's layout is
taken from the rank programs of MAIN; what it cannot check is said, never a silent success."""

from __future__ import annotations

import re

from click.testing import CliRunner

from distc.cli import main

import llmdata as L


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _build(tmp_path, dense_main=False):
    src = L.write(tmp_path, "clip", "llama_dp4", "s0", 0, "before_partition")
    st0 = L.write(tmp_path, "clip", "llama_dp4", "s0", 0, "startup_after_remove")
    r = cli("shard", src, "--stage", "3", "--all-ranks", *(["--dense"] if dense_main else []),
            "-o", tmp_path / "m.r{rank}.ir", "--startup", st0, "--startup-out", tmp_path / "s.r{rank}.ir", "-q")
    assert r.exit_code == 0, r.output
    return src, st0, ["--ranks", tmp_path / "m.r{rank}.ir", "--startup", st0,
                      "--startup-ranks", tmp_path / "s.r{rank}.ir"]


def test_stage3_startup_from_stage0_verifies(tmp_path):
    src, st0, args = _build(tmp_path)
    assert "tensor<8x32xf32>" in (tmp_path / "s.r1.ir").read_text()  # dense quarter of a 32x32 weight
    r = cli("verify", src, *args)
    assert r.exit_code == 0, r.output
    assert re.search(r"startup: EQUAL: \d{3} values", r.output) and "note:" not in r.output
    # shard --verify checks the same startup programs before writing them
    r = cli("shard", src, "--stage", "3", "--all-ranks", "-o", tmp_path / "v.r{rank}.ir", "--startup", st0,
            "--startup-out", tmp_path / "vs.r{rank}.ir", "--verify", "-q")
    assert r.exit_code == 0 and "verify startup: EQUAL" in r.stderr, r.output


def test_a_parameter_a_rank_does_not_initialize_is_said(tmp_path):
    src, _, args = _build(tmp_path)
    f = tmp_path / "s.r1.ir"
    lines = f.read_text().split("\n")
    k = next(i for i, x in enumerate(lines) if 'parameter_name:"linear_0.w_0.dist"' in x)
    f.write_text("\n".join(lines[:k] + lines[k + 1:]))
    r = cli("verify", src, *args)
    assert "note: linear_0.w_0.dist: not initialized by the startup program of rank(s) [1]" in r.output, r.output


def test_dense_main_programs_are_refused_not_passed(tmp_path):
    src, _, args = _build(tmp_path, dense_main=True)
    r = cli("verify", src, *args)
    assert r.exit_code == 1 and "is dense (no dist types)" in r.output and "EQUAL" not in r.output, r.output
