"""Wrong inputs a new user tries, for every command: a located error (or a usage error, exit 2),
never a traceback, never a silent success (the new-user pass of Dec 1)."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from distc.cli import main

from conftest import DATA

SAMPLE = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.before_partition.ir"
COMMANDS = {"fmt": ["fmt"], "opt": ["opt", "-p", "partition"], "shard": ["shard"], "reshard": ["reshard"],
            "verify": ["verify", "--ranks", "r{rank}.ir"], "diff": ["diff", SAMPLE]}


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def with_file(cmd: str, path) -> list:
    c = COMMANDS[cmd]
    return [c[0], path, *c[1:]]


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_binary_file_is_located(tmp_path, cmd):
    f = tmp_path / "prog.ir"
    f.write_bytes(b"{\n    (%0) = \"pd_op.data\" () {name:\"\xff\xfe\"} : () -> tensor<1xf32>\n}\n")
    r = run(*with_file(cmd, f))
    assert r.exit_code == 1 and r.stdout == ""
    assert f"{f}:2:35: error: not UTF-8 text (byte 0xff: invalid start byte in UTF-8)" in r.stderr
    assert '{name:"\ufffd\ufffd"}' in r.stderr and "\n" + " " * 34 + "^" in r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_nul_bytes_are_a_binary_file(tmp_path, cmd):
    f = tmp_path / "a.out"
    f.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    r = run(*with_file(cmd, f))
    assert r.exit_code == 1
    assert f"{f}:1:8: error: a binary file, not PIR text (a NUL byte)" in r.stderr
    assert "\x00" not in r.stderr and "\x7f" not in r.stderr  # control characters shown as U+FFFD


def test_binary_stdin_is_named_stdin():
    r = run("fmt", "-", input=b"\xff\n")
    assert r.exit_code == 1 and "<stdin>:1:1: error: not UTF-8 text" in r.stderr


def test_control_characters_in_the_shown_line(tmp_path):
    f = tmp_path / "ctrl.ir"
    f.write_text("{\n  \x01\x02 (%0)\n}\n")
    r = run("fmt", f)
    assert r.exit_code == 1 and "\n  \ufffd\ufffd (%0)\n  ^\n" in r.stderr


def test_a_huge_rank_range_is_an_error_at_once():
    t0 = time.perf_counter()
    r = run("shard", SAMPLE, "--ranks", "0-99999999999", "-o", "m.r{rank}.ir")
    assert time.perf_counter() - t0 < 10
    assert r.exit_code == 1
    assert "ranks 4-99999999999 are in none of the program's meshes (ranks 0, 1, 2, 3)" in r.stderr
    r = run("shard", SAMPLE, "--ranks", "5-7,1,9", "-o", "m.r{rank}.ir")
    assert r.exit_code == 1 and "ranks 5-7, 9 are in none" in r.stderr


@pytest.mark.parametrize("ranks", ["+1", "1.0", "0x1", "1-", "-1", "3-1", "", "0,,1", "1 2", "0-1-2"])
def test_bad_rank_lists_are_usage_errors(ranks):
    r = run("shard", SAMPLE, "--ranks", ranks, "-o", "m.r{rank}.ir")
    assert r.exit_code == 2 and "expected ranks like 0-3,6" in r.stderr


def test_reshard_all_ranks_checks_its_outputs_before_any_work(tmp_path):
    r = run("reshard", "--from", "p", "--to", "r", "--all-ranks", "-o", tmp_path / "nodir" / "x.ir")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.startswith(f"{tmp_path / 'nodir' / 'x.r0.ir'}: error: cannot write: no directory")
    assert "communication" not in r.stderr


def test_opt_empty_pipeline_is_a_usage_error():
    for p in ("", " , "):
        r = run("opt", SAMPLE, "-p", p)
        assert r.exit_code == 2 and "names no pass" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("pipeline", ["reshard{rank=9}", "partition,reshard{rank=4}",
                                      "shard-optimizer,partition,reshard{rank=0},dist-to-dense{rank=5}"])
def test_opt_rank_option_in_no_mesh_is_an_error(pipeline):
    r = run("opt", SAMPLE, "-p", pipeline)
    assert r.exit_code == 1 and r.stdout == ""
    assert "is in none of the program's meshes (ranks 0, 1, 2, 3)" in r.stderr


def test_diff_rank_in_no_mesh_is_an_error():
    r = run("diff", SAMPLE, SAMPLE, "--rank", "9")
    assert r.exit_code == 1 and f"{SAMPLE}: error: rank 9 is in none of the program's meshes" in r.stderr
    assert run("diff", SAMPLE, SAMPLE, "--rank", "3").exit_code == 0


def test_reshard_of_a_program_without_reshards_warns():
    r = run("reshard", SAMPLE, "-q")
    assert r.exit_code == 0
    assert f"{SAMPLE}: warning: no dist_op.reshard in the program: nothing to lower" in r.stderr
    before = sorted((DATA / "corpus/paddle-3.3.1/reshard").glob("*.before.ir"))[0]
    r = run("reshard", before, "-q")
    assert r.exit_code == 0 and "warning" not in r.stderr


@pytest.mark.parametrize("cmd", [
    lambda d: ["shard", d / "main.ir", "-o", d / "main.ir"],
    lambda d: ["shard", d / "main.ir", "-o", d / "link.ir"],  # a symlink to the input
    lambda d: ["shard", d / "main.ir", "-o", d / "hard.ir"],  # a hard link
    lambda d: ["shard", d / "main.ir", "--startup", d / "st.ir", "--startup-out", d / "st.ir"],
    lambda d: ["shard", d / "main.ir", "--startup", d / "st.ir", "--startup-out", d / "x.ir", "-o", d / "st.ir"],
    lambda d: ["shard", d / "m2.ir", "--ranks", "0,2", "-o", d / "m{rank}.ir"],
    lambda d: ["reshard", d / "main.ir", "-o", d / "main.ir"],
    lambda d: ["reshard", d / "main.ir", "--all-ranks", "-o", d / "main.r{rank}.ir"],
    lambda d: ["opt", d / "main.ir", "-p", "partition", "-o", d / "main.ir"],
])
def test_an_output_never_overwrites_an_input(tmp_path, cmd):
    import os

    text = SAMPLE.read_text()
    for name in ("main.ir", "m2.ir"):
        (tmp_path / name).write_text(text)
    (tmp_path / "st.ir").write_text((DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.startup_after_remove.ir")
                                    .read_text())
    os.symlink(tmp_path / "main.ir", tmp_path / "link.ir")
    os.link(tmp_path / "main.ir", tmp_path / "hard.ir")
    args = cmd(tmp_path)
    if args[0] == "reshard" and "--all-ranks" in args:  # main.r0.ir, a program with reshards, is the input
        (tmp_path / "main.r0.ir").write_text(sorted((DATA / "corpus/paddle-3.3.1/reshard").glob("*.before.ir"))[0]
                                             .read_text())
        args[1] = tmp_path / "main.r0.ir"
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert "distc does not overwrite its inputs" in r.stderr
    assert (tmp_path / "main.ir").read_text() == text and (tmp_path / "m2.ir").read_text() == text


def test_fmt_in_place_is_allowed(tmp_path):
    f = tmp_path / "p.ir"
    f.write_text(SAMPLE.read_text())
    assert run("fmt", f, "-o", f).exit_code == 0 and f.read_text() == SAMPLE.read_text()


def test_shard_of_a_dense_program_is_an_error():
    dense = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.dense.ir"
    r = run("shard", dense)
    assert r.exit_code == 1 and r.stdout == ""
    assert f"{dense}: error: MAIN has no dist types: it is a dense program" in r.stderr
    assert "collectives inserted" not in r.stderr


@pytest.mark.parametrize("stage", ["0", "1", "3"])
def test_after_reshard_as_main_names_the_mistake(stage):
    """Paddle's `after_reshard` given as MAIN (a plain data-parallel one: no optimizer shows it, its
    gradients' all_reduce does): 'already partitioned', at the collective, never the partition
    pass's 'pd_op.slice has 3 operand(s) but its op_dist_attr has 1'."""
    f = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.after_reshard.ir"
    r = run("shard", f, "--stage", stage, "-q")
    assert r.exit_code == 1 and r.stdout == ""
    assert f"{f}:32:5: error: MAIN was already partitioned and lowered" in r.stderr
    assert "this program is already partitioned" in r.stderr and "'before_partition'" in r.stderr
    assert "op_dist_attr has" not in r.stderr and "Traceback" not in r.output


def test_sharding_over_an_axis_named_otherwise_is_a_warning(tmp_path):
    """--mesh-dims mp,dp without --axis: Paddle's rule picks mesh dim 0 (named mp here): said as a
    warning without --explain (and with -q), naming the option that shards over dp."""
    r = run("shard", SAMPLE, "--mesh-dims", "mp,dp", "-q", "-o", tmp_path / "m.ir")
    assert r.exit_code == 0
    assert (f"{SAMPLE}: warning: ZeRO shards over mesh dim 0 (mp): Paddle's rule picks it, not mesh dim 1 "
            "named dp; --axis dp shards over dp") in r.stderr
    r = run("shard", SAMPLE, "--mesh-dims", "dp,mp", "-q", "-o", tmp_path / "m.ir")
    assert r.exit_code == 0 and "warning" not in r.stderr


def test_sgd_at_stage1_says_it_has_no_states_to_shard(tmp_path):
    sgd = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2_sgd.s0.r0.before_partition.ir"
    r = run("shard", sgd, "--stage", "1", "-o", tmp_path / "m.ir")
    assert r.exit_code == 0
    assert "warning: the optimizer ('pd_op.sgd_') keeps no optimizer states" in r.stderr
    assert "ZeRO-1 on rank 0: no optimizer states to shard" in r.stderr and "saving on rank" not in r.stderr
    r = run("shard", sgd, "--stage", "3", "-o", tmp_path / "m.ir")  # stage 3 shards parameters: no warning
    assert r.exit_code == 0 and "keeps no optimizer states" not in r.stderr and "ZeRO-3 saving on rank 0" in r.stderr
