"""Op names Paddle 3.3.1 does not have get a located warning before a pass rewrites the program
(distc.dialects.known_ops, data made from the real Paddle by tests/data/oracle/paddle_op_names.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.cli import main
from distc.dialects.known_ops import is_known, known_names, suggestion, unknown_message

from conftest import DATA

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples/mlp_dp2mp2_adamw.ir"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_the_list_is_paddle_331s():
    with open(ROOT / "distc/dialects/paddle_ops.txt", encoding="utf-8") as f:
        head = f.readline()
        names = f.read().split()
    assert head.startswith("# Paddle 3.3.1 (commit ") and len(names) > 1900 and names == sorted(names)
    for n in ("pd_op.matmul", "pd_op.matmul_grad", "pd_op.adamw_", "pd_op.all_gather", "pd_op.reduce_scatter",
              "pd_op.c_allreduce_sum_", "pd_op.send_v2", "dist_op.reshard", "dist_op.shard_tensor",
              "builtin.parameter", "builtin.split", "cf.yield", "pd_op.if", "pd_op.while", "pd_op.pylayer"):
        assert n in names, n
    assert "pd_op.matmull" not in names and not any(n.endswith(".cc") for n in names)


@pytest.mark.parametrize("name", ["pd_op.c_allgather", "pd_op.c_reducescatter", "pd_op.c_allreduce_max_",
                                  "pd_op.alltoall", "pd_op.c_broadcast", "add(phi_kernel)", "custom_op.my_op",
                                  "pd.matmul", "onednn_op.whatever"])
def test_earlier_eras_kernel_and_custom_ops_are_not_warned(name):
    assert is_known(name)


@pytest.mark.parametrize("name, hint", [("pd_op.matmull", "pd_op.matmul"), ("pd_op.adamw", "pd_op.adamw_"),
                                        ("dist_op.reshards", "dist_op.reshard"), ("pd_opp.matmul", "pd_op.matmul"),
                                        ("builtin.paramter", "builtin.parameter")])
def test_unknown_names_and_their_suggestion(name, hint):
    assert not is_known(name) and name not in known_names()
    assert suggestion(name) == hint
    assert f"(did you mean '{hint}'?)" in unknown_message(name)


def test_no_dialect_is_unknown():
    assert not is_known("matmul")


def typo(tmp_path, old='"pd_op.matmul"', new='"pd_op.matmull"') -> Path:
    f = tmp_path / "typo.ir"
    f.write_text(SAMPLE.read_text().replace(old, new))
    return f


WARNING = ("{f}:25:14: warning: 'pd_op.matmull' is not an op of Paddle 3.3.1 (did you mean 'pd_op.matmul'?)\n"
           '    (%23) = "pd_op.matmull" (%21, %20) {{op_dist_attr:')
CARET = "\n             ^\nnote: also used at line 28\n"


@pytest.mark.parametrize("cmd", [["shard", "-q"], ["reshard", "-q"], ["opt", "-p", "partition"],
                                 ["shard", "--annotate-only", "-q", "--json"]])
def test_a_pass_warns_once_a_name_with_line_and_caret(tmp_path, cmd):
    f = typo(tmp_path)
    r = run(cmd[0], f, *cmd[1:])
    assert r.exit_code == 0, r.output  # the exit status is unchanged
    assert WARNING.format(f=f) in r.stderr and CARET in r.stderr
    assert sum(ln.startswith(f"{f}:25:14: warning:") for ln in r.stderr.splitlines()) == 1
    assert "pd_op.matmull" in r.stdout  # passed through


def test_same_output_as_without_the_typo(tmp_path):
    f = typo(tmp_path)
    assert run("shard", f, "-q").stdout == run("shard", SAMPLE, "-q").stdout.replace('"pd_op.matmul"', '"pd_op.matmull"')


@pytest.mark.parametrize("cmd", [["fmt"], ["opt", "-p", "verify"], ["diff", SAMPLE]])
def test_no_warning_without_a_rewrite(tmp_path, cmd):
    r = run(cmd[0], typo(tmp_path), *cmd[1:])
    assert "warning" not in r.stderr


def test_shipped_samples_warn_nothing():
    r = run("shard", SAMPLE, "-q", "--startup", ROOT / "samples/mlp_dp2mp2_adamw.startup.ir", "--startup-out", "-",
            "-o", "/dev/null")
    assert r.exit_code == 0 and "warning" not in r.stderr


def test_misspelt_dialect_and_startup_program(tmp_path):
    f = typo(tmp_path, '"pd_op.matmul"', '"pd_opp.matmul"')
    s = tmp_path / "startup.ir"
    s.write_text((ROOT / "samples/mlp_dp2mp2_adamw.startup.ir").read_text().replace('"pd_op.full"', '"pd_op.fulll"', 1))
    r = run("shard", f, "-q", "--startup", s, "--startup-out", tmp_path / "s.out.ir")
    assert r.exit_code == 0, r.output
    assert "warning: 'pd_opp.matmul': Paddle 3.3.1 has no dialect 'pd_opp' (did you mean 'pd_op.matmul'?)" in r.stderr
    assert f"{s}:" in r.stderr and "warning: 'pd_op.fulll' is not an op of Paddle 3.3.1 (did you mean 'pd_op.full'?)" in r.stderr


def test_verify_warns_about_serial(tmp_path):
    f = typo(tmp_path)
    r = run("verify", f, "--ranks", tmp_path / "missing.r{rank}.ir")
    assert r.exit_code == 1 and "warning: 'pd_op.matmull'" in r.stderr and "passes it through" not in r.stderr


def test_the_generator_reads_name_literals_only():
    spec = importlib.util.spec_from_file_location("paddle_op_names", ROOT / "tests/data/oracle/paddle_op_names.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # no paddle import at module level
    blob = (b"\x00pd_op.matmul\x00Handle for builtin.split\x00paddle/fluid/pir/dist_op.cc\x00\x91\x05pd_op.add_n_\x00"
            b"xpd_op.nope\x00pd_op.no_nul")
    assert mod.names_in(blob) == ["builtin.split", "pd_op.add_n_", "pd_op.matmul"]


def test_json_summaries_and_errors_carry_the_warnings(tmp_path):
    import json

    f = typo(tmp_path)
    msg = f"{f}:25:14: warning: 'pd_op.matmull' is not an op of Paddle 3.3.1 (did you mean 'pd_op.matmul'?)"
    for cmd in (["shard", f, "-o", tmp_path / "o.ir"], ["opt", f, "-p", "partition", "-o", tmp_path / "o.ir"]):
        r = run(*cmd, "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stderr.strip().splitlines()[-1])["warnings"] == [msg]
    r = run("reshard", f, "--json", "-o", tmp_path / "o.ir")
    assert json.loads(r.stderr.strip().splitlines()[-1])["warnings"][0] == msg
    r = run("shard", f, "--json", "--rank", "7")
    assert r.exit_code == 1 and json.loads(r.stdout)["warnings"] == [msg]
    r = run("shard", SAMPLE, "--json", "-o", tmp_path / "o.ir")  # one command's warnings only
    assert json.loads(r.stderr.strip().splitlines()[-1])["warnings"] == []


@pytest.mark.parametrize("name", ["pd_op.c_wait_comm", "pd_op.c_wait_compute", "pd_op.c_gen_nccl_id",
                                  "pd_op.c_comm_init_all", "pd_op.c_sync_comm_stream_"])
def test_2024_communicator_ops_are_known(name):
    assert is_known(name)


def test_many_unknown_names_are_summarised(tmp_path):
    import re

    text = SAMPLE.read_text()
    names = sorted(set(re.findall(r'"(pd_op\.[a-z_0-9]+)"', text)))
    assert len(names) > 12
    for n in names:
        text = text.replace(f'"{n}"', f'"{n}zz"')
    f = tmp_path / "many.ir"
    f.write_text(text)
    r = run("opt", f, "-p", "partition")
    warnings = [ln for ln in r.stderr.splitlines() if ": warning: " in ln]
    assert len(warnings) == 11
    assert warnings[-1].startswith(f"{f}: warning: {len(names) - 10} more op names Paddle 3.3.1 does not have: ")


def test_is_known_is_membership_in_known_names():
    """is_known searches the op list's text (a whole line) where known_names is its set: the same
    answer for every listed name, near misses of them, and names no line can hold."""
    from distc.dialects import known_ops

    names = sorted(known_names())
    listed = [n for n in known_ops._listed().split("\n") if n]
    tries = names + [n + suffix for n in listed for suffix in ("", " ", "_", "x")] + [n[:-1] for n in listed]
    tries += [f"{a}\n{b}" for a, b in zip(names, names[1:])][:50] + ["pd_op.", "pd_op.\n", "\npd_op.add", "builtin."]
    for name in tries:
        assert is_known(name) == ("(" in name or (("." in name) and (
            name.partition(".")[0] in known_ops.UNCHECKED_DIALECTS or name in known_names()))), repr(name)
