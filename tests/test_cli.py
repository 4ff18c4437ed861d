"""The distc command line: fmt, opt, passes, --version."""

import subprocess
import sys

from click.testing import CliRunner

from distc.cli import main

from conftest import DATA

SAMPLE = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.before_partition.ir"
LEGACY = DATA / "corpus/legacy/ospp_visualdl_pir_ifop.ir"


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and "distc, version" in r.output


def test_fmt_stdout_is_byte_exact():
    r = run("fmt", str(SAMPLE))
    assert r.exit_code == 0
    assert r.output == SAMPLE.read_text()


def test_fmt_stdin_to_stdout():
    r = run("fmt", "-", input=LEGACY.read_text())
    assert r.exit_code == 0 and r.output == LEGACY.read_text()


def test_fmt_output_file(tmp_path):
    out = tmp_path / "o.ir"
    r = run("fmt", str(LEGACY), "-o", str(out))
    assert r.exit_code == 0 and out.read_text() == LEGACY.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["o.ir"]  # no temporary left behind


def test_fmt_check_clean_and_dirty(tmp_path):
    assert run("fmt", "--check", str(SAMPLE), str(LEGACY)).exit_code == 0
    # an unsorted attribute dict in an otherwise sorted program would be printed sorted
    # only if the op is rewritten; fmt keeps it, so make a file whose text is not canonical:
    bad = tmp_path / "spaces.ir"
    bad.write_text(LEGACY.read_text().replace("} : (", "}  : (", 1))
    r = run("fmt", "--check", str(bad))
    assert r.exit_code == 1
    assert "---" in r.output and "+++" in r.output and "-    (%0)" in r.output and "+    (%0)" in r.output


def test_fmt_canonical_reprints_every_op():
    r = run("fmt", "--canonical", str(SAMPLE))
    assert r.exit_code == 0 and r.output == SAMPLE.read_text()


def test_fmt_one_output_for_many_inputs_is_a_usage_error(tmp_path):
    r = run("fmt", str(SAMPLE), str(LEGACY), "-o", str(tmp_path / "x"))
    assert r.exit_code == 2


def test_opt_verify_pipeline_and_time_passes():
    r = CliRunner(mix_stderr=False).invoke(main, ["opt", str(SAMPLE), "-p", "verify", "--time-passes"]) \
        if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else run("opt", str(SAMPLE), "-p", "verify", "--time-passes")
    assert r.exit_code == 0
    assert SAMPLE.read_text() in r.output
    assert "pass timings" in (r.output + getattr(r, "stderr", ""))


def test_opt_unknown_pass_is_a_usage_error():
    # -p is an option, not an input file: usage error (exit 2) naming -p, no '<input>:' location
    r = run("opt", str(SAMPLE), "-p", "no-such-pass")
    assert r.exit_code == 2
    assert "unknown pass 'no-such-pass'" in r.output and "--pass-pipeline" in r.output
    assert "<input>" not in r.output


def test_opt_bad_option_is_a_usage_error():
    for p in ("verify{frobnicate=1}", "reshard{rank=x}"):
        r = run("opt", str(SAMPLE), "-p", p)
        assert r.exit_code == 2, p
        assert "<input>" not in r.output and "Traceback" not in r.output
    assert "has no option 'frobnicate'" in run("opt", str(SAMPLE), "-p", "verify{frobnicate=1}").output


def test_passes_lists_verify():
    r = run("passes")
    assert r.exit_code == 0 and "verify" in r.output


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "distc", "fmt", str(LEGACY)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == LEGACY.read_text()


def test_no_color_when_not_a_tty(tmp_path):
    f = tmp_path / "bad.ir"
    f.write_text("{\n    (%1) = \"pd_op.relu\" (%0) {} : (tensor<4xf32>) -> tensor<4xf32>\n}\n")
    r = subprocess.run([sys.executable, "-m", "distc", "fmt", str(f)], capture_output=True, text=True)
    assert r.returncode == 1 and "\x1b[" not in r.stderr


def test_progress_callback_on_big_inputs():
    import distc

    line = '    (%{i}) = "pd_op.full" () {{dtype:float32,shape:[1],value:{i}}} : () -> tensor<1xf32>'
    text = "{\n" + "\n".join(line.format(i=i) for i in range(21000)) + "\n}\n"
    seen = []
    prog = distc.parse(text, progress=seen.append)
    assert len(prog.ops) == 21000 and str(prog) == text
    assert seen and 0 < seen[0] < len(text)


# ------------------------------------------------------------------------------- outputs
def test_output_through_a_symlink_keeps_the_link_and_normal_mode(tmp_path):
    import os

    target = tmp_path / "target.ir"
    target.write_text("old\n")
    link = tmp_path / "link.ir"
    link.symlink_to(target)
    assert run("fmt", str(LEGACY), "-o", str(link)).exit_code == 0
    assert link.is_symlink() and target.read_text() == LEGACY.read_text()
    fresh = tmp_path / "fresh.ir"
    old = os.umask(0o022)
    try:
        assert run("fmt", str(LEGACY), "-o", str(fresh)).exit_code == 0
    finally:
        os.umask(old)
    assert fresh.stat().st_mode & 0o777 == 0o644


def test_output_into_a_missing_directory_is_an_error_before_any_work(tmp_path):
    r = run("fmt", str(LEGACY), "-o", str(tmp_path / "nodir" / "a.ir"))
    assert r.exit_code == 1 and "cannot write: no directory" in r.output
    r = run("fmt", str(LEGACY), "-o", str(tmp_path))
    assert r.exit_code == 1 and "is a directory" in r.output


def test_shard_writes_nothing_if_one_of_its_outputs_cannot_be_written(tmp_path):
    startup = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.startup_after_remove.ir"
    main_out = tmp_path / "main.ir"
    r = run("shard", str(SAMPLE), "-q", "-o", str(main_out), "--startup", str(startup),
            "--startup-out", str(tmp_path / "nodir" / "s.ir"))
    assert r.exit_code == 1 and not main_out.exists()


def test_fmt_check_with_output_is_a_usage_error(tmp_path):
    assert run("fmt", "--check", str(LEGACY), "-o", str(tmp_path / "x.ir")).exit_code == 2


def test_shard_rank_outside_every_mesh_is_an_error():
    r = run("shard", str(SAMPLE), "-q", "--rank", "7", "--dense")
    assert r.exit_code == 1 and "rank 7 is in none of the program's meshes" in r.output


def test_shard_stage0_with_axis_is_a_usage_error():
    assert run("shard", str(SAMPLE), "--stage", "0", "--axis", "1").exit_code == 2


def test_reshard_all_ranks_dash_output_goes_to_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("reshard", "--from", "s0", "--to", "r", "--all-ranks", "-q", "-o", "-")
    assert r.exit_code == 0 and "// ----- rank 1 -----" in r.output
    assert list(tmp_path.iterdir()) == []


def test_reshard_verify_on_a_whole_program_proves_every_rank():
    # before partition there are no dist_op.reshard to lower: the per-rank programs are not
    # consistent (a sharded matmul result added to a whole bias), and verify says where
    r = run("reshard", str(SAMPLE), "--verify", "-q", "-o", "/dev/null")
    assert r.exit_code == 1 and "DIVERGED on rank 0 at 'pd_op.add'" in r.output


def test_pipeline_option_given_twice_is_a_usage_error():
    r = run("opt", str(SAMPLE), "-p", "reshard{rank=0,rank=1}")
    assert r.exit_code == 2 and "given twice" in r.output
