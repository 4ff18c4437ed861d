"""`distc verify`: Paddle 3.3.1's own per-rank programs prove equal to their serial program; wrong
programs (Paddle's R->P lowering, single mutations of a correct set) are caught and located.

Data: tests/data/verify/{clip,amp}/llama_{dp4,dp2mp2}.s1.* (ZeRO-1 of the corpus LLaMA-style model,
every rank, made with tests/data/oracle/gen_llm.py and real Paddle; gzipped), clip/llama_dp4.s3.*
(ZeRO-3) and the stage-1 MLP
and reshard oracle files already in tests/data."""

from __future__ import annotations

import gzip
import json
import pathlib
import re

import pytest
from click.testing import CliRunner

from conftest import DATA
from distc import parse
from distc.analysis.simulate.proof import verify_step
from distc.analysis.simulate.step import make_inputs, step_state
from distc.cli import main

VDIR = DATA / "verify"
LLAMA = [(c, m) for c in ("clip", "amp") for m in ("dp4", "dp2mp2")]
RESHARD = [DATA / "corpus" / "paddle-3.3.1" / "reshard", DATA / "oracle" / "reshard"]
STAGE1 = [DATA / "corpus" / "paddle-3.3.1" / "stage1", DATA / "oracle" / "stage1"]


def llama_texts(config: str, mesh: str, stage: str = "s1") -> tuple[str, dict[int, str]]:
    d = VDIR / config
    serial = gzip.decompress((d / f"llama_{mesh}.{stage}.serial.ir.gz").read_bytes()).decode()
    ranks = {r: gzip.decompress((d / f"llama_{mesh}.{stage}.r{r}.ir.gz").read_bytes()).decode() for r in range(4)}
    return serial, ranks


def write_set(tmp: pathlib.Path, serial: str, ranks: dict[int, str]) -> tuple[str, str]:
    (tmp / "serial.ir").write_text(serial)
    for r, t in ranks.items():
        (tmp / f"main.r{r}.ir").write_text(t)
    return str(tmp / "serial.ir"), str(tmp / "main.r{rank}.ir")


def cli(*args: str):
    return CliRunner().invoke(main, ["verify", *args])


@pytest.mark.parametrize("config,mesh,stage", [(c, m, "s1") for c, m in LLAMA] + [("clip", "dp4", "s3")])
def test_paddle_llama_zero_verifies_equal(tmp_path, config, mesh, stage):
    serial, pattern = write_set(tmp_path, *llama_texts(config, mesh, stage))
    r = cli(serial, "--ranks", pattern)
    assert r.exit_code == 0, r.output
    assert "EQUAL" in r.output and "compared on ranks [0, 1, 2, 3]" in r.output
    n = int(re.search(r"EQUAL: (\d+) values", r.output).group(1))
    assert n >= 400  # every parameter and optimizer state on every rank holding it, and the loss


@pytest.mark.parametrize("config,mesh", LLAMA[:2])
def test_json_report(tmp_path, config, mesh):
    serial, pattern = write_set(tmp_path, *llama_texts(config, mesh))
    r = cli(serial, "--ranks", pattern, "--json", "--seed", "3")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["exit"] == 0 and doc["main"]["status"] == "equal"
    assert doc["main"]["max_abs_error"] < 1e-12 and doc["main"]["elements_compared"] > 50000


def _mutate(text: str, pattern: str, old: str, new: str) -> tuple[str, int]:
    """Replace ``old`` by ``new`` in the first line matching ``pattern``; returns (text, line)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if re.search(pattern, line) and old in line:
            lines[i] = line.replace(old, new, 1)
            return "\n".join(lines), i + 1
    raise AssertionError(f"no line matches {pattern!r} with {old!r}")


MUTATIONS = {
    # one all_reduce's reduce type on rank 1 (AVG -> SUM)
    "reduce_type": (1, r'"pd_op\.all_reduce"', "reduce_type:4", "reduce_type:0", "different reduce types"),
    # the RMSNorm epsilon (scale bias) of one op on rank 1
    "epsilon": (1, r'"pd_op\.scale".*bias:1e-06', "bias:1e-06", "bias:1e-05", "not its piece"),
    # a slice bound (the first full_int_array [16] feeding a slice) on rank 3
    "slice_bound": (3, r'"pd_op\.full_int_array".*value:\[16\]', "value:[16]", "value:[15]", ""),
    # AdamW's weight decay on rank 2
    "weight_decay": (2, r'"pd_op\.adamw_"', "coeff:0.01", "coeff:0.02", "not its piece"),
}


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_single_mutation_is_caught_and_located(tmp_path, kind):
    rank, pat, old, new, why = MUTATIONS[kind]
    serial, ranks = llama_texts("clip", "dp2mp2")
    ranks[rank], line = _mutate(ranks[rank], pat, old, new)
    s, pattern = write_set(tmp_path, serial, ranks)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 1, r.output
    assert "DIVERGED" in r.output and why in r.output
    m = re.search(r"main\.r(\d+)\.ir:(\d+):(\d+): DIVERGED on rank (\d+)", r.output)
    assert m, r.output
    assert int(m.group(1)) == int(m.group(4))
    if kind in ("reduce_type", "epsilon"):  # located at the mutated op itself
        assert (int(m.group(1)), int(m.group(2))) == (rank, line), r.output


def test_serial_op_without_kernel_names_no_rank(tmp_path):
    serial, ranks = llama_texts("clip", "dp4")
    serial, line = _mutate(serial, r'"pd_op\.silu"', '"pd_op.silu"', '"pd_op.swish_like"')
    s, pattern = write_set(tmp_path, serial, ranks)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 3, r.output
    assert "no kernel for 1 op name (nothing simulated" in r.output, r.output
    assert f"pd_op.swish_like: 1 op; first at {s}:{line}:5\n" in r.output and "rank None" not in r.output


def test_mutation_without_kernel_is_exit_3(tmp_path):
    serial, ranks = llama_texts("clip", "dp4")
    ranks[2], line = _mutate(ranks[2], r'"pd_op\.silu"', '"pd_op.silu"', '"pd_op.swish_like"')
    s, pattern = write_set(tmp_path, serial, ranks)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 3, r.output
    assert f"pd_op.swish_like: 1 op; first at {pattern.replace('{rank}', '2')}:{line}:5 (rank 2)\n" in r.output


def test_input_errors_are_located(tmp_path):
    serial, ranks = llama_texts("clip", "dp4")
    s, pattern = write_set(tmp_path, serial, ranks)
    r = cli(str(tmp_path / "main.r0.ir"), "--ranks", pattern)  # a lowered program as SERIAL
    assert r.exit_code == 1 and "SERIAL is already lowered" in r.output
    assert re.search(r"main\.r0\.ir:\d+:\d+: error:", r.output)
    dense = re.sub(r"pd_dist\.tensor<([0-9x]*[a-z0-9]+),[^>]*>", r"tensor<\1>", ranks[1])
    (tmp_path / "main.r1.ir").write_text(dense)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 1 and "rank 1 is dense" in r.output
    assert cli(s, "--ranks", str(tmp_path / "main.ir")).exit_code == 2  # no {rank}
    assert cli(s, "--ranks", str(tmp_path / "nope.r{rank}.ir")).exit_code == 1


def _reshard_set(tmp_path: pathlib.Path, name: str) -> tuple[str, str]:
    for d in RESHARD:
        for f in d.glob(f"{name}.r*.ir"):
            (tmp_path / f.name).write_text(f.read_text())
    return str(tmp_path / f"{name}.r0.before.ir"), str(tmp_path / f"{name}.r{{rank}}.after.ir")


@pytest.mark.parametrize("name", ["m22_RR_to_PR", "m22_S0R_to_RP", "cross_m2_R_to_P"])
def test_paddle_wrong_r_to_p_is_exit_1(tmp_path, name):
    s, pattern = _reshard_set(tmp_path, name)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 1, r.output
    assert "reduce to a wrong value" in r.output


@pytest.mark.parametrize("name", ["m22_S0R_to_RS1", "m22_PR_to_RR", "m22_RR_to_S0R"])
def test_paddle_right_reshard_is_exit_0(tmp_path, name):
    s, pattern = _reshard_set(tmp_path, name)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("case", ["mlp_dp2_sgd.s0", "mlp_dp2_sgd.s1", "mlp_dp2mp2_adamw.s0", "mlp_dp2mp2_adamw.s1",
                                  "mlp_dp4_adamw.s0", "mlp_dp4_adamw.s1", "mlp_mp2dp2_adamw.s1"])
def test_paddle_mlp_stage1_verifies_equal(case):
    files = {f.name: f for d in STAGE1 for f in d.glob(f"{case}.r*.ir")}
    serial = parse(files[f"{case}.r0.before_partition.ir"].read_text(), "serial.ir")
    progs = {}
    for name, f in files.items():
        m = re.match(rf"{re.escape(case)}\.r(\d+)\.after_reshard\.ir$", name)
        if m:
            progs[int(m.group(1))] = parse(f.read_text(), name)
    rep = verify_step(serial, progs)
    assert rep.status == 0, rep.summary()
    assert rep.tensors >= 14


def test_integer_inputs_stay_in_range_and_states_are_tracked():
    serial = parse(llama_texts("clip", "dp4")[0], "serial.ir")
    inputs = make_inputs(serial, seed=5)
    ints = {k: v for k, v in inputs.items() if v.dtype.kind == "i"}
    assert ints and all(v.min() >= 0 and v.max() < 64 for v in ints.values())  # vocabulary / classes: 64
    state = step_state(serial)
    assert any(v.owner.name == "pd_op.adamw_" for v in state.values() if v.owner is not None)
    assert "loss_0" in state


def _startup_set(tmp_path: pathlib.Path) -> list[str]:
    serial, ranks = llama_texts("clip", "dp2mp2")
    s, pattern = write_set(tmp_path, serial, ranks)
    d = VDIR / "clip"
    (tmp_path / "startup.ir").write_bytes(gzip.decompress((d / "llama_dp2mp2.s1.startup_serial.ir.gz").read_bytes()))
    for r in range(4):
        (tmp_path / f"startup.r{r}.ir").write_bytes(
            gzip.decompress((d / f"llama_dp2mp2.s1.startup.r{r}.ir.gz").read_bytes()))
    return [s, "--ranks", pattern, "--startup", str(tmp_path / "startup.ir"),
            "--startup-ranks", str(tmp_path / "startup.r{rank}.ir")]


def test_paddle_startup_programs_verify_equal(tmp_path):
    r = cli(*_startup_set(tmp_path))
    assert r.exit_code == 0, r.output
    assert re.search(r"startup: EQUAL: \d{3} values", r.output), r.output


def test_startup_mutation_is_caught(tmp_path):
    args = _startup_set(tmp_path)
    f = tmp_path / "startup.r1.ir"
    text, line = _mutate(f.read_text(), r'"pd_op\.full".*value:0\.9[,}]', "value:0.9", "value:0.8")
    f.write_text(text)
    r = cli(*args)
    assert r.exit_code == 1, r.output
    assert f"startup.r1.ir:{line}:" in r.output and "DIVERGED on rank 1" in r.output


def test_distc_shard_output_verifies_with_startup(tmp_path):
    """distc's own ZeRO-1 of the shipped sample, every rank, main and startup programs."""
    sample = pathlib.Path(__file__).parent.parent / "samples"
    for r in range(4):
        res = CliRunner().invoke(main, ["shard", str(sample / "mlp_dp2mp2_adamw.ir"), "--rank", str(r), "-q",
                                        "-o", str(tmp_path / f"main.r{r}.ir"),
                                        "--startup", str(sample / "mlp_dp2mp2_adamw.startup.ir"),
                                        "--startup-out", str(tmp_path / f"startup.r{r}.ir")])
        assert res.exit_code == 0, res.output
    r = cli(str(sample / "mlp_dp2mp2_adamw.ir"), "--ranks", str(tmp_path / "main.r{rank}.ir"),
            "--startup", str(sample / "mlp_dp2mp2_adamw.startup.ir"),
            "--startup-ranks", str(tmp_path / "startup.r{rank}.ir"))
    assert r.exit_code == 0, r.output
    assert "main: EQUAL" in r.output and "startup: EQUAL" in r.output


@pytest.mark.parametrize("config,mesh,stage", [("clip", "dp2mp2", "1"), ("amp", "dp4", "1"), ("clip", "dp4", "0")])
def test_shard_verify_llama(tmp_path, config, mesh, stage):
    """distc shard --verify: every rank's program built by distc proven against MAIN."""
    (tmp_path / "main.ir").write_text(llama_texts(config, mesh)[0])
    out = tmp_path / "r0.ir"
    r = CliRunner().invoke(main, ["shard", str(tmp_path / "main.ir"), "--stage", stage, "--verify", "-q",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "verify: EQUAL" in r.output and "ranks [0, 1, 2, 3]" in r.output
    assert out.exists()


def test_shard_verify_sample_with_startup(tmp_path):
    sample = pathlib.Path(__file__).parent.parent / "samples"
    r = CliRunner().invoke(main, ["shard", str(sample / "mlp_dp2mp2_adamw.ir"), "--verify", "-q",
                                  "--all-ranks", "-o", str(tmp_path / "m.r{rank}.ir"),
                                  "--startup", str(sample / "mlp_dp2mp2_adamw.startup.ir"),
                                  "--startup-out", str(tmp_path / "s.r{rank}.ir")])
    assert r.exit_code == 0, r.output
    assert "verify: EQUAL" in r.output and "verify startup: EQUAL" in r.output
    assert (tmp_path / "m.r3.ir").exists() and (tmp_path / "s.r3.ir").exists()


def test_reshard_verify_whole_program(tmp_path):
    """distc reshard FILE --verify on a whole partitioned program (every rank lowered and proven)."""
    sample = pathlib.Path(__file__).parent.parent / "samples" / "mlp_dp2mp2_adamw.ir"
    part = tmp_path / "part.ir"
    r = CliRunner().invoke(main, ["opt", str(sample), "-p", "shard-optimizer,partition", "-o", str(part)])
    assert r.exit_code == 0, r.output
    assert "dist_op.reshard" in part.read_text()
    r = CliRunner().invoke(main, ["reshard", str(part), "--verify", "-q", "--all-ranks", "-o", str(tmp_path / "r{rank}.ir")])
    assert r.exit_code == 0, r.output
    assert "verify: EQUAL" in r.output and (tmp_path / "r3.ir").exists()
    # a wrong reduce type in a whole program is caught: the serial program itself is mutated
    text, _ = _mutate(part.read_text(), r'"pd_op\.adamw_"', "coeff:0.01", "coeff:0.5")
    (tmp_path / "rank_view.ir").write_text(text)
    r = cli(str(part), "--ranks", str(tmp_path / "r{rank}.ir"))
    assert r.exit_code == 0, r.output
    r = cli(str(tmp_path / "rank_view.ir"), "--ranks", str(tmp_path / "r{rank}.ir"))
    assert r.exit_code == 1 and "DIVERGED" in r.output


def test_progress_callback_counts_every_op():
    serial, ranks = llama_texts("clip", "dp4")
    sp = parse(serial, "serial.ir")
    progs = {r: parse(t, f"r{r}.ir") for r, t in ranks.items()}
    seen = []
    rep = verify_step(sp, progs, progress=seen.append)
    assert rep.status == 0
    assert sum(seen) == len(sp.ops) + sum(len(p.ops) for p in progs.values())


STAGE1_MAINS = sorted({f.name: f for d in STAGE1 for f in d.glob("*.s0.r0.before_partition.ir")}.values())


@pytest.mark.parametrize("path", STAGE1_MAINS, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("stage", ["0", "1"])
def test_shard_verify_stage1_mlp_cases(path, stage):
    r = CliRunner().invoke(main, ["shard", str(path), "--stage", stage, "--verify", "-q", "-o", "/dev/null"])
    assert r.exit_code == 0, r.output
    assert "verify: EQUAL" in r.output


def test_json_no_kernel_and_divergence(tmp_path):
    serial, ranks = llama_texts("clip", "dp4")
    ranks[3], line = _mutate(ranks[3], r'"pd_op\.softmax"', '"pd_op.softmax"', '"pd_op.softmax_v9"')
    s, pattern = write_set(tmp_path, serial, ranks)
    r = cli(s, "--ranks", pattern, "--json")
    assert r.exit_code == 3
    doc = json.loads(r.output)
    [nk] = doc["main"]["no_kernel"]
    assert doc["exit"] == 3 and doc["main"]["status"] == "no-kernel"
    [first] = nk["first"]
    assert (nk["op"], nk["count"], first["rank"], first["line"]) == ("pd_op.softmax_v9", 1, 3, line)
    assert first["file"].endswith("main.r3.ir")


def test_every_missing_kernel_is_listed_before_simulating(tmp_path):
    """All op names without a kernel, their counts and the first op in each program, at once (exit 3)."""
    serial, ranks = llama_texts("clip", "dp4")
    serial = serial.replace('"pd_op.silu"', '"pd_op.swish_like"')
    ranks = {r: t.replace('"pd_op.silu"', '"pd_op.swish_like"') for r, t in ranks.items()}
    ranks[1], line = _mutate(ranks[1], r'"pd_op\.softmax"', '"pd_op.softmax"', '"pd_op.softmax_v9"')
    s, pattern = write_set(tmp_path, serial, ranks)
    r = cli(s, "--ranks", pattern)
    assert r.exit_code == 3, r.output
    n_silu = serial.count('"pd_op.swish_like"')
    assert "no kernel for 2 op names (nothing simulated" in r.output
    head = next(ln for ln in r.output.splitlines() if "pd_op.swish_like:" in ln)
    assert f"pd_op.swish_like: {5 * n_silu} ops; first at {s}:" in head
    assert all(f"main.r{k}.ir:" in head and f"(rank {k})" in head for k in range(4))
    assert f"pd_op.softmax_v9: 1 op; first at {pattern.replace('{rank}', '1')}:{line}:5 (rank 1)" in r.output
    assert "EQUAL" not in r.output and "DIVERGED" not in r.output
