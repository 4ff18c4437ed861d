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


def test_opt_unknown_pass_is_a_diagnostic():
    r = run("opt", str(SAMPLE), "-p", "no-such-pass")
    assert r.exit_code == 1
    assert "unknown pass 'no-such-pass'" in r.output


def test_opt_bad_option_is_a_diagnostic():
    r = run("opt", str(SAMPLE), "-p", "verify{frobnicate=1}")
    assert r.exit_code == 1
    assert "has no option 'frobnicate'" in r.output


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
