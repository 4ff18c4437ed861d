"""`distc shard --verify`'s three outcomes (issue 17): EQUAL writes the outputs (exit 0), DIVERGED
writes nothing (exit 1), not provable (ops without a kernel, all listed before anything is
simulated) writes the outputs unproven and says so (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.analysis.simulate import registry
from distc.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples/mlp_dp2mp2_adamw.ir"


def shard(*args):
    return CliRunner().invoke(main, ["shard", *map(str, args)])


def outputs(tmp_path):
    return sorted(p.name for p in tmp_path.glob("o.r*.ir"))


def test_equal_writes_the_outputs(tmp_path):
    r = shard(SAMPLE, "--all-ranks", "--verify", "-q", "-o", tmp_path / "o.r{rank}.ir")
    assert r.exit_code == 0, r.output
    assert "verify: EQUAL" in r.output and outputs(tmp_path) == [f"o.r{k}.ir" for k in range(4)]


def test_not_provable_writes_the_outputs_and_says_so(tmp_path):
    main_ir = tmp_path / "main.ir"
    main_ir.write_text(SAMPLE.read_text().replace('"pd_op.relu"', '"pd_op.relu_like"'))
    r = shard(main_ir, "--all-ranks", "--verify", "-q", "-o", tmp_path / "o.r{rank}.ir")
    assert r.exit_code == 3, r.output
    assert "no kernel for 1 op name (nothing simulated" in r.output
    assert f"pd_op.relu_like: 5 ops; first at {main_ir}:27:5, {tmp_path}/o.r0.ir:" in r.output
    assert "outputs written unproven: " in r.output and outputs(tmp_path) == [f"o.r{k}.ir" for k in range(4)]
    one = shard(main_ir, "--rank", "1", "--verify", "-q")
    assert one.exit_code == 3 and "outputs written unproven: stdout" in one.output
    assert '"pd_op.relu_like"' in one.output  # the program itself was printed


def test_diverged_writes_nothing(tmp_path, monkeypatch):
    """A collective that doubles its result on rank 2: the proof diverges, no file is written."""
    real = registry.KERNELS["pd_op.all_reduce"]

    def doubled(rt, op, vals):
        out = yield from real.fn(rt, op, vals)
        return [out[0] * (2.0 if rt.rank == 2 else 1.0)] + list(out[1:])

    monkeypatch.setitem(registry.KERNELS, "pd_op.all_reduce", registry.Kernel("pd_op.all_reduce", doubled, True))
    r = shard(SAMPLE, "--all-ranks", "--verify", "-q", "-o", tmp_path / "o.r{rank}.ir")
    assert r.exit_code == 1, r.output
    assert "DIVERGED on rank 2" in r.output and "verify: DIVERGED: nothing written" in r.output
    assert outputs(tmp_path) == [] and list(tmp_path.iterdir()) == []  # no temporary file left either


def test_all_ranks_proof_reads_the_workers_programs(tmp_path, monkeypatch):
    """--all-ranks --verify lowers each rank once, in its worker: the proof reads the programs the
    workers built (before the outputs are committed), the parent builds none again."""
    from distc.pipeline import ShardPipeline

    calls = []
    real = ShardPipeline.lower

    def counted(self, rank, *a, **k):
        calls.append(rank)  # the parent's list: a forked worker's calls stay in the worker
        return real(self, rank, *a, **k)

    monkeypatch.setattr(ShardPipeline, "lower", counted)
    r = shard(SAMPLE, "--all-ranks", "--verify", "-q", "-o", tmp_path / "o.r{rank}.ir")
    assert r.exit_code == 0 and "verify: EQUAL" in r.output, r.output
    assert calls == [] and outputs(tmp_path) == [f"o.r{k}.ir" for k in range(4)]
    sub = shard(SAMPLE, "--ranks", "0,1", "--verify", "-q", "-o", tmp_path / "p.r{rank}.ir")
    assert sub.exit_code == 0 and "verify: EQUAL" in sub.output, sub.output
    assert sorted(calls) == [2, 3]  # ranks not asked for are built for the proof only


@pytest.mark.parametrize("word", ["EQUAL writes", "DIVERGED writes nothing", "not provable"])
def test_help_says_what_happens_in_each_case(word):
    r = CliRunner().invoke(main, ["shard", "--help"])
    assert word in " ".join(r.output.split())
