"""Every command with --json reports its errors as one JSON object on stdout too (bad input exit 1,
usage exit 2), beside the located text diagnostic on stderr (distc.driver.error_doc)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from distc.cli import main
from distc.driver import WorkerFailed
from distc.workers import fork_each
from distc.syntax.diagnostics import DiagnosticError

from conftest import DATA

SAMPLE = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.before_partition.ir"
BAD = '{\n    (%0) = "pd_op.data" () {name:"x"} : () -> \n}\n'


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_json(stdout: str) -> dict:
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, stdout
    return json.loads(lines[0])


def commands(path) -> dict[str, list]:
    return {"shard": ["shard", path], "reshard": ["reshard", path], "opt": ["opt", path, "-p", "partition"],
            "verify": ["verify", path, "--ranks", "r{rank}.ir"], "diff": ["diff", path, SAMPLE]}


@pytest.mark.parametrize("cmd", ["shard", "reshard", "opt", "verify", "diff"])
def test_parse_error_is_json_with_its_location(tmp_path, cmd):
    bad = tmp_path / "bad.ir"
    bad.write_text(BAD)
    r = run(*commands(bad)[cmd], "--json")
    assert r.exit_code == 1, r.output
    doc = one_json(r.stdout)
    assert doc["status"] == "error" and doc["kind"] == "input" and doc["exit"] == 1
    assert doc["command"] == cmd
    assert (doc["file"], doc["line"], doc["col"]) == (str(bad), 2, 5)
    assert "result type" in doc["message"]
    # the usual text diagnostic, with the line and the caret, on stderr
    assert f"{bad}:2:5: error: {doc['message']}" in r.stderr
    assert '(%0) = "pd_op.data"' in r.stderr and "\n    ^\n" in r.stderr
    assert "Traceback" not in r.output
    # without --json: nothing on stdout, same exit status
    r = run(*commands(bad)[cmd])
    assert r.exit_code == 1 and r.stdout == ""


@pytest.mark.parametrize("cmd", ["shard", "reshard", "opt", "verify", "diff"])
def test_missing_file_is_json(tmp_path, cmd):
    missing = tmp_path / "missing.ir"
    r = run(*commands(missing)[cmd], "--json")
    assert r.exit_code == 1
    doc = one_json(r.stdout)
    assert doc["status"] == "error" and doc["file"] == str(missing) and doc["line"] is None
    assert doc["message"] == "no such file"
    assert f"{missing}: error: no such file" in r.stderr


@pytest.mark.parametrize("cmd", [["shard", SAMPLE, "--rank", "9"], ["reshard", SAMPLE, "--rank", "9"],
                                 ["shard", SAMPLE, "--ranks", "2,9", "-o", "out/m.r{rank}.ir"]])
def test_rank_in_no_mesh_is_json(cmd):
    r = run(*cmd, "--json")
    assert r.exit_code == 1
    doc = one_json(r.stdout)
    assert doc["kind"] == "input" and doc["file"] == str(SAMPLE)
    assert "9 is in none of the program's meshes" in doc["message"]


def test_nothing_to_shard_is_json(tmp_path):
    text = "".join(ln for ln in SAMPLE.read_text().splitlines(keepends=True) if "adamw_" not in ln)
    f = tmp_path / "no_optimizer.ir"
    f.write_text(text)
    r = run("shard", f, "--json")
    assert r.exit_code == 1, r.output
    doc = one_json(r.stdout)
    assert doc["status"] == "error" and doc["file"] == str(f) and "optimizer" in doc["message"]


def test_unwritable_output_is_json(tmp_path):
    r = run("shard", SAMPLE, "-o", tmp_path / "no" / "dir" / "m.ir", "--json")
    assert r.exit_code == 1
    doc = one_json(r.stdout)
    assert doc["file"] == str(tmp_path / "no" / "dir" / "m.ir") and "no directory" in doc["message"]


@pytest.mark.parametrize("cmd", [
    ["shard", SAMPLE, "--annotate-only", "--dense"],
    ["shard", SAMPLE, "--stage", "7"],
    ["shard", SAMPLE, "--ranks", "3-1", "-o", "m.r{rank}.ir"],
    ["shard", SAMPLE, "--all-ranks", "-o", "m.r{rnk}.ir"],
    ["reshard", "--from", "s3", "--to", "r"],
    ["reshard", SAMPLE, "--from", "s0"],
    ["opt", SAMPLE, "-p", "bogus"],
    ["verify", SAMPLE, "--ranks", "no-pattern.ir"],
    ["diff", SAMPLE, SAMPLE, "--no-such-option"],
])
def test_usage_error_is_json_exit_2(cmd):
    r = run(*cmd, "--json")
    assert r.exit_code == 2, r.output
    doc = one_json(r.stdout)
    assert doc["status"] == "error" and doc["kind"] == "usage" and doc["exit"] == 2
    assert doc["command"] == cmd[0] and doc["message"]
    assert "Error: " in r.stderr and doc["message"] in r.stderr
    assert run(*cmd).stdout == ""


def test_json_after_double_dash_is_not_the_option():
    r = run("fmt", "--", "--json")  # a file named --json; fmt has no --json
    assert r.exit_code == 1 and r.stdout == "" and "--json: error: no such file" in r.stderr


def test_worker_failure_carries_its_json():
    def work(r):
        if r == 1:
            raise DiagnosticError("boom", 3, 4, filename="f.ir")
        return r

    with pytest.raises(WorkerFailed) as e:
        fork_each([0, 1, 2], work, 2)
    assert e.value.item == 1 and e.value.code == 1
    assert (e.value.doc["file"], e.value.doc["line"], e.value.doc["col"], e.value.doc["message"]) == ("f.ir", 3, 4, "boom")
