"""`distc diff` and distc.testing.assert_matches_golden on Paddle's own dumps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.cli import main

from distc.analysis.diff import diff_programs
from distc.syntax.parser import parse

STAGE1 = Path(__file__).parent / "data/corpus/paddle-3.3.1/stage1"
S1 = STAGE1 / "mlp_dp2mp2_adamw.s1.r0.after_reshard.ir"
S0 = STAGE1 / "mlp_dp2mp2_adamw.s0.r0.after_reshard.ir"


class Run:
    def __init__(self, r) -> None:
        self.returncode, self.stdout, self.stderr = r.exit_code, r.stdout, r.stderr


def distc(*args: str, input: str | None = None) -> Run:
    return Run(CliRunner().invoke(main, [str(a) for a in args], input=input))


def shift_rings(text: str, by: int) -> str:
    return re.sub(r"ring_id:(\d+)", lambda m: f"ring_id:{int(m.group(1)) + by}", text)


def renumber(text: str) -> str:
    return re.sub(r"%(\d+)\b", lambda m: f"%{int(m.group(1)) * 3 + 1000}", text)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, newline="")
    return p


def test_same_up_to_ring_ids_and_value_names(tmp_path):
    text = S1.read_text()
    assert "ring_id:12" in text and "ring_id:14" in text
    for other in (shift_rings(text, 5), renumber(text), renumber(shift_rings(text, 100))):
        b = write(tmp_path, "b.ir", other)
        r = distc("diff", S1, b)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "same program" in r.stdout
    r = distc("diff", S1, write(tmp_path, "c.ir", shift_rings(text, 5)), "--exact-rings")
    assert r.returncode == 1
    assert "ring_id: 12 -> 17" in r.stdout


def test_swapped_ring_ids_are_a_renaming_but_a_broken_mapping_is_not(tmp_path):
    text = S1.read_text()
    swapped = text.replace("ring_id:12", "ring_id:X").replace("ring_id:14", "ring_id:12").replace("ring_id:X", "ring_id:14")
    assert distc("diff", S1, write(tmp_path, "b.ir", swapped)).returncode == 0
    lines = text.splitlines(keepends=True)
    idx = [i for i, ln in enumerate(lines) if "ring_id:12" in ln]
    lines[idx[-1]] = lines[idx[-1]].replace("ring_id:12", "ring_id:14")
    r = distc("diff", S1, write(tmp_path, "c.ir", "".join(lines)))
    assert r.returncode == 1
    assert f"{tmp_path / 'c.ir'}:{idx[-1] + 1}" in r.stdout
    assert "ring_id: 12 -> 14 (ring 12 is ring 12 elsewhere in B)" in r.stdout


def test_one_attribute_changed_names_both_lines(tmp_path):
    lines = S1.read_text().splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if '"pd_op.all_gather"' in ln and "nranks:2" in ln)
    lines[i] = lines[i].replace("nranks:2", "nranks:4")
    lines.insert(1, "// a comment line moves everything in B down by one\n")
    b = write(tmp_path, "b.ir", "".join(lines))
    r = distc("diff", S1, b)
    assert r.returncode == 1, r.stderr
    assert f"changed pd_op.all_gather at {S1}:{i + 1}, {b}:{i + 2}" in r.stdout
    assert "    nranks: 2 -> 4" in r.stdout
    assert "1 differences: 0 added, 0 removed, 1 changed" in r.stdout


def test_an_inserted_collective_is_one_added_op(tmp_path):
    lines = S1.read_text().splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if '"pd_op.all_gather"' in ln)
    m = re.match(r"\s*\((%\d+)\) = \"pd_op.all_gather\" \((%\d+)\)", lines[i])
    new = lines[i].replace(m.group(1), "%9999", 1)
    lines.insert(i, new)  # %9999 = all_gather(same operand), then the original line
    r = distc("diff", S1, write(tmp_path, "b.ir", "".join(lines)), "--json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert rep["counts"] == {"added": 1, "removed": 0, "changed": 0}
    (d,) = rep["differences"]
    assert d["op"] == "pd_op.all_gather" and d["b_line"] in (i + 1, i + 2) and d["a_line"] is None


def test_stage0_vs_stage1_lists_the_added_collectives():
    r = distc("diff", S0, S1)
    assert r.returncode == 1
    added = re.findall(r"^added (pd_op\.\w+) at", r.stdout, re.M)
    assert added.count("pd_op.reduce_scatter") == 4
    assert "pd_op.all_gather" in added
    assert "summary" in r.stdout and "rank 0 (file name)" in r.stdout
    assert re.search(r"reduce_scatter\s+0 \(0 B\)\s+4 \(1\.1 KiB\)", r.stdout)


def test_json_report_parses(tmp_path):
    r = distc("diff", S0, S1, "--json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert rep["equal"] is False and rep["a"] == str(S0)
    assert rep["summary"]["a"]["by_kind"]["all_reduce"]["count"] == 5
    assert rep["summary"]["b"]["by_kind"]["reduce_scatter"]["count"] == 4
    # per-rank memory as distc shard reports it (Paddle's lowered programs: parameters stay whole)
    assert (rep["summary"]["a"]["memory"]["total"], rep["summary"]["b"]["memory"]["total"]) == (8992, 6752)
    assert rep["summary"]["a"]["memory"]["parameters"] == rep["summary"]["b"]["memory"]["parameters"]
    assert {d["kind"] for d in rep["differences"]} == {"added", "removed", "changed"}
    same = json.loads(distc("diff", S1, S1, "--json").stdout)
    assert same["equal"] is True and same["differences"] == []


def test_ignore_attr(tmp_path):
    text = S1.read_text()
    b = write(tmp_path, "b.ir", text.replace("op_role:1", "op_role:2"))
    assert distc("diff", S1, b).returncode == 1
    assert distc("diff", S1, b, "--ignore-attr", "op_role").returncode == 0
    assert distc("diff", S1, b, "-q").stdout == ""


def test_exit_status_bad_input_one_usage_two(tmp_path):
    bad = write(tmp_path, "bad.ir", "{\n    (%0) = \"pd_op.data\" () {name:\"x\"} : () -> \n}\n")
    r = distc("diff", S1, bad)
    assert r.returncode == 1 and r.stdout == ""
    assert f"{bad}:2:" in r.stderr and "error:" in r.stderr and "Traceback" not in r.stderr
    r = distc("diff", S1, bad, "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["status"] == "error"
    r = distc("diff", S1, tmp_path / "missing.ir")
    assert r.returncode == 1 and "missing.ir" in r.stderr
    assert distc("diff", S1).returncode == 2
    assert distc("diff", "-", "-", input="").returncode == 2
    assert "0  the programs are the same" in distc("diff", "--help").stdout


def test_regions_and_block_arguments_pair():
    text = """{
    (%0) = "pd_op.full" () {dtype:bool,place:Place(cpu),shape:[1],value:1} : () -> builtin.tensor<1xb>
    (%1) = "pd_op.if" (%0) {} -> builtin.tensor<1xf32> {
        (%2) = "pd_op.full" () {dtype:float32,place:Place(cpu),shape:[1],value:1} : () -> builtin.tensor<1xf32>
        () = "cf.yield" (%2) {} : (builtin.tensor<1xf32>) -> 
    } else {
        (%3) = "pd_op.full" () {dtype:float32,place:Place(cpu),shape:[1],value:2} : () -> builtin.tensor<1xf32>
        () = "cf.yield" (%3) {} : (builtin.tensor<1xf32>) -> 
    }
}
"""
    a = parse(text, "a")
    assert diff_programs(a, parse(renumber(text), "b")).equal
    res = diff_programs(a, parse(text.replace("value:2", "value:3"), "b"))
    (d,) = res.diffs
    assert d.kind == "changed" and d.a.loc[0] == 7 and str(d.changes[0]) == "value: 2 -> 3"


def test_golden_helper_fails_then_passes_after_update(tmp_path, monkeypatch):
    from distc.testing import assert_matches_golden

    golden = tmp_path / "golden" / "main.r0.ir"
    monkeypatch.delenv("DISTC_UPDATE_GOLDEN", raising=False)
    with pytest.raises(AssertionError, match="no golden file"):
        assert_matches_golden(S1.read_text(), golden)
    monkeypatch.setenv("DISTC_UPDATE_GOLDEN", "1")
    assert_matches_golden(parse(S0.read_text(), "s0"), golden)  # writes it
    monkeypatch.setenv("DISTC_UPDATE_GOLDEN", "0")
    assert_matches_golden(renumber(shift_rings(S0.read_text(), 3)), golden)  # equal up to renaming
    with pytest.raises(AssertionError) as e:
        assert_matches_golden(S1.read_text(), golden)
    assert "added pd_op.reduce_scatter" in str(e.value) and "DISTC_UPDATE_GOLDEN=1" in str(e.value)
    monkeypatch.setenv("DISTC_UPDATE_GOLDEN", "1")
    assert_matches_golden(S1.read_text(), golden)
    monkeypatch.delenv("DISTC_UPDATE_GOLDEN")
    assert_matches_golden(S1.read_text(), golden)
    assert golden.read_text() == S1.read_text()


def test_readme_ci_recipe_runs_as_written(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    m = re.search(r"```sh\n(mkdir -p golden out\n.*?)```", readme, re.S)
    assert m, "README: the CI recipe"
    script = m.group(1)
    shutil.copytree(root / "samples", tmp_path / "samples")
    for src in re.findall(r"tests/data/\S+?\.ir", script.replace("$r", "{r}")):
        for r in range(4):
            p = src.replace("{r}", str(r))
            if (root / p).exists():
                (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(root / p, tmp_path / p)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("same program") == 4
    # a changed program fails the job with exit 1
    (tmp_path / "out/main.r2.ir").write_text(S0.read_text())
    r = subprocess.run(["bash", "-e", "-c", script.split("distc shard")[0] +
                        "distc diff golden/main.r2.ir out/main.r2.ir --no-summary"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 1 and "changed" in r.stdout


def test_paddle_reshard_dumps_equal_distc_output_up_to_ring_ids():
    """Every before/after pair Paddle printed: byte comparison fails on many for ring ids alone,
    distc diff finds distc's --paddle lowering equal to Paddle's on all of them."""
    from test_reshard_parity import CORPUS_PAIRS, ORACLE_PAIRS, _id, lower_file

    pairs = CORPUS_PAIRS + ORACLE_PAIRS
    byte_equal = same = 0
    for before in pairs:
        after = before.with_name(_id(before) + ".after.ir").read_text()
        out, _ = lower_file(before)
        byte_equal += out == after
        same += diff_programs(parse(after, "after"), parse(out, "out")).equal
    assert len(pairs) == 606 and same == 606 and byte_equal < 400


def test_several_programs_per_file_reshard_all_ranks_output_reads_back(tmp_path):
    """reshard --all-ranks to stdout is a form distc reads back: one program per rank, each equal
    to that rank's own output; diff compares such files program by program."""
    from distc.syntax.parser import parse_programs

    args = ["reshard", "--from", "s0,s1", "--to", "r,s0", "--mesh", "2,2", "--shape", "8x12", "-q"]
    every = distc(*args, "--all-ranks").stdout
    progs = parse_programs(every, "all.ir")
    assert len(progs) == 4 and "".join(map(str, progs)) == every
    for r, p in enumerate(progs):
        own = parse(distc(*args, "--rank", r).stdout, f"r{r}.ir")
        assert diff_programs(own, p).equal
    a = write(tmp_path, "a.ir", every)
    assert distc("fmt", a).stdout == every
    r = distc("diff", a, write(tmp_path, "b.ir", every))
    assert r.returncode == 0 and r.stdout.count("same program") == 4
    lines = every.splitlines(keepends=True)
    k = max(i for i, ln in enumerate(lines) if "nranks:2" in ln)  # in the last rank's program
    lines[k] = lines[k].replace("nranks:2", "nranks:4")
    r = distc("diff", a, write(tmp_path, "c.ir", "".join(lines)))
    assert r.returncode == 1 and "program 4 of 4:\nchanged pd_op.all_gather" in r.stdout
    assert "rank 3 (its banner)" in r.stdout
    assert distc("diff", a, tmp_path / "c.ir", "--program", "3").returncode == 0
    assert distc("diff", a, tmp_path / "c.ir", "--program", "4").returncode == 1
    r = distc("diff", a, write(tmp_path, "d.ir", "".join(map(str, progs[:3]))), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["programs"] == {"a": 4, "b": 3} and doc["equal"] is False and len(doc["reports"]) == 3
    r = distc("diff", a, tmp_path / "c.ir", "--program", "5")
    assert r.returncode == 1 and "--program 5: the file holds 4 program(s)" in r.stderr


DUMPS = Path(__file__).parent / "data/oracle/dumps"


@pytest.mark.parametrize("name", ["engine_pipeline.r0.dense.ir", "engine_pipeline.r0.job2.ir"])
def test_a_program_with_kwargs_equals_itself(name):
    """Job and tensor-fusion programs take ``^kw:`` arguments (``%kwarg_*``): a program compared
    with itself is the same (exit 0), and a renamed keyword is a change of the ops that read it."""
    f = DUMPS / name
    r = distc("diff", f, f, "--no-summary")
    assert r.returncode == 0 and "same program" in r.stdout, r.stdout
    text = f.read_text()
    other = text.replace("kwarg_linear_0.w_0.dist@GRAD@MERGE", "kwarg_linear_9.w_0.dist@GRAD@MERGE")
    res = diff_programs(parse(text, "a"), parse(other, "b"))
    assert not res.equal and all(d.kind == "changed" for d in res.diffs)
    assert any("%kwarg_linear_0.w_0.dist@GRAD@MERGE -> %kwarg_linear_9.w_0.dist@GRAD@MERGE" in str(c)
               for d in res.diffs for c in d.changes)


def test_golden_update_rewrites_only_what_differs(tmp_path, monkeypatch):
    """DISTC_UPDATE_GOLDEN=1 leaves a golden file equal up to value names and ring ids byte for
    byte as reviewed (its ring ids and %N stay), and rewrites one that differs."""
    from distc.testing import assert_matches_golden

    golden = tmp_path / "main.r0.ir"
    reviewed = shift_rings(S0.read_text(), 7)
    golden.write_text(reviewed)
    monkeypatch.setenv("DISTC_UPDATE_GOLDEN", "1")
    assert_matches_golden(renumber(S0.read_text()), golden)
    assert golden.read_text() == reviewed
    assert_matches_golden(S1.read_text(), golden)
    assert golden.read_text() == S1.read_text()


def test_golden_failure_shows_the_report_not_the_helper(tmp_path):
    """A pytest failure of assert_matches_golden shows the diff report, not the helper's source
    or the whole program."""
    import subprocess
    import sys

    golden = tmp_path / "g.ir"
    golden.write_text(S0.read_text())
    test = tmp_path / "test_g.py"
    test.write_text("from distc.testing import assert_matches_golden\n\n"
                    "def test_it():\n"
                    f"    assert_matches_golden(open({str(S1)!r}).read(), {str(golden)!r})\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                       capture_output=True, text=True, cwd=tmp_path, env={**__import__("os").environ,
                                                                           "DISTC_UPDATE_GOLDEN": "0"})
    out = p.stdout
    assert p.returncode == 1
    assert "added pd_op.reduce_scatter" in out and "program differs from golden file" in out
    assert "def assert_matches_golden" not in out and "__tracebackhide__" not in out
    assert out.count('"pd_op.') < 20  # the report's lines, not the program's
