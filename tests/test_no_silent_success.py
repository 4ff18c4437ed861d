"""Issue 10 point 5: wrong-but-parseable requests are errors, never a silent success."""

from __future__ import annotations

import io
import os
import sys

import pytest
from click.testing import CliRunner

from distc.cli import main
from distc.driver import read_text

from conftest import DATA

SAMPLE = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.before_partition.ir"


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def test_reshard_rank_in_no_mesh_is_an_error():
    r = run("reshard", SAMPLE, "--rank", "7")
    assert r.exit_code == 1
    assert f"{SAMPLE}: error: rank 7 is in none of the program's meshes (ranks 0, 1, 2, 3)" in r.stderr
    assert r.stdout == ""
    r = run("reshard", "--from", "s0", "--to", "r", "--mesh-ids", "2,3")  # rank 0 by default
    assert r.exit_code == 1 and "rank 0 is in none of the program's meshes (ranks 2, 3)" in r.stderr
    assert run("reshard", "--from", "s0", "--to", "r", "--mesh-ids", "2,3", "--rank", "3").exit_code == 0


@pytest.mark.parametrize("cmd", [["reshard", "--from", "s0", "--to", "r", "--all-ranks"],
                                 ["shard", str(SAMPLE), "--all-ranks"]])
@pytest.mark.parametrize("pattern", ["o.{rnk}.ir", "o.{rank!r}.ir", "o.{rank:03d}.ir", "o.{}.ir", "o.{rank}}.ir"])
def test_output_pattern_with_an_unknown_field_is_a_usage_error(tmp_path, cmd, pattern):
    r = run(*cmd, "-o", tmp_path / pattern)
    assert r.exit_code == 2, r.output
    assert "unknown field" in r.stderr or "a brace outside {rank}" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cmd", [["reshard", "--from", "s0", "--to", "r"], ["shard", str(SAMPLE)]])
def test_rank_pattern_without_several_ranks_is_a_usage_error(tmp_path, cmd):
    r = run(*cmd, "-o", tmp_path / "o.{rank}.ir")
    assert r.exit_code == 2
    assert "has {rank}: that is for several ranks (--all-ranks" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_an_unwritable_output_names_the_users_path():
    r = run("fmt", SAMPLE, "-o", "/dev/full")
    assert r.exit_code == 1 and r.stderr.startswith("/dev/full: error: No space left on device")


def test_an_output_in_a_directory_that_refuses_files_names_the_users_path():
    # sysfs refuses new files even to root; elsewhere the directory check refuses first
    target = "/sys/kernel/distc-out.ir" if os.path.isdir("/sys/kernel") else "/nonexistent/x.ir"
    r = run("fmt", SAMPLE, "-o", target)
    assert r.exit_code == 1
    assert r.stderr.startswith(f"{target}: error:") and ".distc-" not in r.stderr


def test_reading_a_terminal_says_it_is_waiting(monkeypatch, capsys):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Tty(SAMPLE.read_text()))
    assert read_text("-") == SAMPLE.read_text()
    assert "reading a program from the terminal (stdin); end it with Ctrl-D" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.StringIO("x"))
    assert read_text("-") == "x"
    assert capsys.readouterr().err == ""


def test_exit_statuses_are_documented():
    text = run("--help").stdout
    assert "Exit status:" in text and "2   usage error" in text and "70  internal error" in text
    assert run("reshard", "--frobnicate").exit_code == 2


def test_reshard_all_ranks_writes_every_file_or_none(tmp_path):
    (tmp_path / "o.1.ir").mkdir()  # rank 1's output cannot be written
    r = run("reshard", "--from", "s0", "--to", "r", "--all-ranks", "-o", tmp_path / "o.{rank}.ir", "-q")
    assert r.exit_code == 1 and "o.1.ir" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.1.ir"]  # no rank 0 file, no temporary
    (tmp_path / "o.1.ir").rmdir()
    assert run("reshard", "--from", "s0", "--to", "r", "--all-ranks", "-o", tmp_path / "o.{rank}.ir", "-q").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.0.ir", "o.1.ir"]
