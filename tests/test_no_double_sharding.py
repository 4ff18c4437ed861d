"""A program that already carries ZeRO (Paddle's stage-1/2/3 or fused program, or a lowered one)
given to ``distc shard --stage N`` is an error naming what was found (a warning at ``--stage 0``,
which lowers it as it is) — never a second, silent sharding (issue 19, point 2)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import llmdata
from distc.analysis.zero_found import FUSED, LOWERED, STAGE1, STAGE3, zero_found
from distc.cli import main
from distc.passes.shard_optimizer import sharding_axis
from distc.syntax.parser import parse_program

from conftest import DATA


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _file(tmp_path, name: str):
    p = tmp_path / name.replace("/", ".")
    p.write_text(llmdata.text(name))
    return p


@pytest.mark.parametrize("name,kind,where,stages", [
    ("clip/llama_dp4.s1.r0.before_partition.ir", STAGE1, ":382:5: error: MAIN already carries ZeRO-1/2: "
     "optimizer state 'linear_14.w_0.dist_moment1_0' is Shard(dim=0) on mesh dim 0 where its parameter "
     "'linear_14.w_0.dist' is Replicate()", ["3"]),
    ("clip/llama_dp4.s3.r0.before_partition.ir", STAGE3, ":86:5: error: MAIN already carries ZeRO-3: parameter "
     "'linear_14.w_0.dist' is Shard(dim=0) on mesh dim 0 and 'pd_op.matmul' (line 212) gathers it before use",
     ["1", "2", "3"]),
    ("clip/llama_dp2mp2.s1.r1.before_partition.ir", STAGE1, "error: MAIN already carries ZeRO-1/2", ["3"]),
    ("clip/llama_dp4.s1.r0.after_reshard.ir", LOWERED, "error: MAIN was already partitioned and lowered",
     ["1", "2", "3"]),
    # nothing gathered (Paddle's rules re-lay every matmul on the mp-first mesh): the parameters
    ("mlp/mlpb_mp2dp2_adamw.s3.r0.before_partition.ir", STAGE3, ":19:5: error: MAIN already carries ZeRO-3: all 3 "
     "parameters that can be are Shard on mesh dim 1, the mesh dim ZeRO shards over: parameter 'linear_1.b_0' is "
     "Shard(dim=0) there", ["1", "2", "3"]),
])
def test_sharded_main_is_an_error(tmp_path, name, kind, where, stages):
    f = _file(tmp_path, name)
    prog = parse_program(llmdata.text(name))
    assert zero_found(prog, sharding_axis(prog, None)).kind == kind
    for stage in stages:
        r = run("shard", f, "--stage", stage, "-q")
        assert r.exit_code == 1 and r.stdout == ""
        assert f"{f}{where}" in r.stderr if where.startswith(":") else where in r.stderr
        assert f"--stage {stage} would shard it a second time" in r.stderr
        assert "\n    ^" in r.stderr and "Traceback" not in r.output  # the line and a caret


@pytest.mark.parametrize("case,rank", [("llama_dp4", 1), ("llama_dp2mp2", 1)])
@pytest.mark.parametrize("stage", ["1", "2"])
def test_stage1_again_keeps_it_with_a_warning(tmp_path, case, rank, stage):
    """--stage 1/2 on Paddle's own stage-1 program: the states are already sharded; distc says so
    and keeps them (nothing sharded twice): Paddle's program after reshard."""
    f = _file(tmp_path, f"clip/{case}.s1.r{rank}.before_partition.ir")
    out = tmp_path / "out.ir"
    r = run("shard", f, "--stage", stage, "--rank", rank, "-q", "-o", out)
    assert r.exit_code == 0, r.output
    assert f"warning: MAIN already carries ZeRO-1/2" in r.stderr and f"--stage {stage} keeps that sharding" in r.stderr
    golden = _file(tmp_path, f"clip/{case}.s1.r{rank}.after_reshard.ir")
    assert run("diff", golden, out, "--no-summary").exit_code == 0


@pytest.mark.parametrize("case,stage", [("clip/llama_dp4", "s1"), ("clip/llama_dp4", "s3"), ("clip/llama_dp2mp2", "s1"),
                                        ("mlp/mlpb_mp2dp2_adamw", "s3")])
def test_stage0_lowers_it_as_it_is_with_a_warning(tmp_path, case, stage):
    """--stage 0 on Paddle's own ZeRO program before partition gives Paddle's program after
    reshard (no second sharding), and says what it found."""
    f = _file(tmp_path, f"{case}.{stage}.r1.before_partition.ir")
    out = tmp_path / "out.ir"
    r = run("shard", f, "--stage", "0", "--rank", "1", "-q", "-o", out)
    assert r.exit_code == 0, r.output
    assert "warning: MAIN already carries ZeRO-" in r.stderr and "--stage 0 lowers it as it is" in r.stderr
    golden = _file(tmp_path, f"{case}.{stage}.r1.after_reshard.ir")
    d = run("diff", golden, out, "--no-summary")
    assert d.exit_code == 0, d.output


def test_warning_in_json(tmp_path):
    f = _file(tmp_path, "clip/llama_dp4.s1.r0.before_partition.ir")
    r = run("shard", f, "--stage", "0", "--json", "-o", tmp_path / "o.ir")
    assert r.exit_code == 0
    doc = json.loads(r.stderr.strip().splitlines()[-1])
    assert any("MAIN already carries ZeRO-1/2" in w for w in doc["warnings"])


def test_json_error_names_it(tmp_path):
    f = _file(tmp_path, "clip/llama_dp4.s3.r0.before_partition.ir")
    r = run("shard", f, "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["status"] == "error" and doc["line"] == 86 and "MAIN already carries ZeRO-3" in doc["message"]


@pytest.mark.parametrize("path", sorted((DATA / "corpus/paddle-3.3.1/stage1").glob("*.s0.r0.before_partition.ir")))
def test_stage0_programs_carry_nothing(path):
    prog = parse_program(path.read_text())
    assert zero_found(prog) is None
    ndim = max(v.type.dist.mesh.ndim for op in prog.walk() for v in op.results if getattr(v.type, "dist", None))
    assert all(zero_found(prog, axis) is None for axis in range(ndim))  # whatever mesh dim ZeRO is asked for


def test_every_llm_program_is_found_as_what_it_is():
    """Every LLaMA / MLP program Paddle printed before partition (each distinct file once): stage 0
    carries nothing; every stage-1/2 (plain SGD: its stage 1 is its stage 0 in Paddle, nothing to find) and
    stage-3 program is found as what it is."""
    seen, done, relaid = {}, set(), set()
    for root in (llmdata.LLM, llmdata.PP):
        for name, (h, _) in llmdata.manifest(root).items():
            if not name.endswith(".before_partition.ir") or h in done:
                continue
            done.add(h)
            stage = name.split(".")[1]
            f = zero_found(parse_program(llmdata.text(name, root)))
            want = {"s0": None, "s1": STAGE1, "s2": STAGE1, "s3": STAGE3}[stage]
            if name.split("/")[0] == "sgd" or name.startswith("mlp/mlp_dp2_sgd"):
                want = STAGE3 if stage == "s3" else None
            if f is None:  # the sign left where nothing is gathered: the parameters themselves
                prog = parse_program(llmdata.text(name, root))
                dims = llmdata.MESH_DIMS.get(name.split("/")[1].split(".")[0], ())
                f = zero_found(prog, sharding_axis(prog, "dp" if "dp" in dims else None, dims))
                relaid.update({name} if f else set())
            seen[name] = (f.kind if f else None, want)
    wrong = {n: v for n, v in seen.items() if v[0] != v[1]}
    assert not wrong and len(seen) > 80, (len(seen), list(wrong.items())[:5])
    # ZeRO-3 on the mp-first mesh: Paddle's matmul rule re-lays both matmuls, every op reads its
    # parameter as sharded (nothing gathered) and no gradient is partial over dp
    assert relaid == {"mlp/mlpb_mp2dp2_adamw.s3.r0.before_partition.ir"}, relaid


def test_fused_kind_name():
    assert FUSED.startswith("fused ZeRO-1")


def test_diff_maps_kwargs_by_name():
    """``distc diff`` pairs ``%kwarg_NAME`` block arguments by name (fused ZeRO programs use them):
    a program equals itself, and a kwarg operand swapped for another is a change."""
    from distc.analysis.diff.compare import diff_programs

    fused = ("{\n    ^kw:\n        %kwarg_a {persistable:true}\n        %kwarg_b {persistable:true}\n"
             '    (%0) = "pd_op.relu" (%kwarg_a) {} : (tensor<4xf32>) -> tensor<4xf32>\n'
             '    (%1) = "pd_op.relu" (%kwarg_b) {} : (tensor<4xf32>) -> tensor<4xf32>\n}\n')
    a, b = parse_program(fused), parse_program(fused)
    assert not diff_programs(a, b).diffs
    c = parse_program(fused.replace('(%kwarg_a) {}', '(%kwarg_b) {}', 1))
    assert len(diff_programs(a, c).diffs) == 1
