"""ZeRO-1 with tensor fusion (issue 19, point 1): ``distc shard --tensor-fusion [--overlap]
[--comm-buffer-size MB] [--release-gradients]`` from the plain stage-0 program gives Paddle
3.3.1's fused program (``strategy.sharding.enable_tensor_fusion`` with ``ShardingStage1``),
before partition, after reshard, dense and startup.  Here: each variant on one rank of the
hardest case (LLaMA with global-norm clip on dp2 x mp2) and the MLP on its mesh corners; every
rank of every case is ``make test-oracle`` (tests/oracle/test_fusion_matrix.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import fusiondata as F
from distc.cli import main
from distc.passes.fusion_layout import group_by_size

ALL_SAME = {"before": None, "main": None, "startup": None, "dense": None}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("variant", list(F.VARIANTS))
def test_llama_dp2mp2_every_variant(variant):
    """A rank that updates pieces of mp-sharded and of replicated parameters, with the clip's
    all-reduces over the sharding and the mp group."""
    assert F.check("llama_dp2mp2", variant, 3) == ALL_SAME


@pytest.mark.parametrize("case,variant,rank", [("mlp_dp2", "fuse", 1), ("mlp_dp4", "buf0", 2),
                                               ("mlp_dp2mp2", "release", 1), ("llama_dp2", "overlap", 0),
                                               ("llama_dp4", "fuse", 3)])
def test_more_cases(case, variant, rank):
    assert F.check(case, variant, rank) == ALL_SAME


def test_cli_every_rank_and_summary(tmp_path):
    """The command for every rank (main and startup written), the summary: buffers, who updates
    what, bytes sent against unfused ZeRO-1; --json has the same."""
    main_in = tmp_path / "main.ir"
    main_in.write_text(F.text("mlp_dp2", "s0", 0, "before_partition"))
    start = tmp_path / "startup.r{rank}.ir"
    for r in (0, 1):
        (tmp_path / f"startup.r{r}.ir").write_text(F.text("mlp_dp2", "s0", r, "startup_after_remove"))
    r = run("shard", main_in, "--tensor-fusion", "--all-ranks", "-o", tmp_path / "m.r{rank}.ir",
            "--startup", start, "--startup-out", tmp_path / "s.r{rank}.ir")
    assert r.exit_code == 0, r.output
    for k in (0, 1):
        assert F.first_difference(F.text("mlp_dp2", "fuse", k, "after_reshard"),
                                  (tmp_path / f"m.r{k}.ir").read_text()) is None
        assert F.first_difference(F.text("mlp_dp2", "fuse", k, "startup_final"),
                                  (tmp_path / f"s.r{k}.ir").read_text()) is None
    out = r.stderr
    assert "fused buffers (1, sharding group [0,1])" in out
    assert "linear_1.b_0-" not in out and "linear_1.b_0" in out  # parameters listed by name
    assert "bytes sent per rank: tensor fusion vs unfused ZeRO-1" in out
    j = run("shard", main_in, "--tensor-fusion", "--rank", 1, "--json", "-o", tmp_path / "j.ir")
    doc = json.loads(j.stderr.strip().splitlines()[-1])
    fu = doc["tensor_fusion"]["1"]
    assert fu["group"] == [0, 1] and len(fu["buffers"]) == 1
    b = fu["buffers"][0]
    assert b["elements"] == 1088 and b["bytes"] == 4352 and b["shard_bytes"] == 2176
    assert b["owners"] == {"linear_1.b_0": [[0, 32]], "linear_1.w_0.dist": [[0, 512]],
                           "linear_0.b_0": [[1, 32]], "linear_0.w_0.dist": [[1, 512]]}
    assert b["mine"] == [["linear_0.b_0", 32], ["linear_0.w_0.dist", 512]]
    # one reduce-scatter and one all-gather of the 1088-element buffer: 2176 bytes each
    fused = [c for c in doc["ranks"]["1"]["by_group"] if c["kind"] in ("reduce_scatter", "all_gather")]
    assert {(c["kind"], c["count"]) for c in fused} >= {("reduce_scatter", 1)}
    assert fu["unfused_zero1"]["collectives"] > 0


def test_annotate_only_is_paddles_program_before_partition():
    from distc.pipeline import ShardOptions, ShardPipeline
    from distc.syntax.parser import parse_program

    res = ShardPipeline(parse_program(F.text("mlp_dp4", "s0", 3, "before_partition")),
                        ShardOptions(tensor_fusion=True, annotate_only=True)).lower(3, copy=False)
    assert F.first_difference(F.text("mlp_dp4", "fuse", 3, "before_partition"), res.text) is None
    assert res.collectives is None or all(c.function == "tensor-fusion" for c in res.collectives)


def test_buffers_and_owners():
    """Paddle's grouping (a buffer closes once its bytes reach the limit) and padding (256 bytes x
    the sharding degree), and which rank updates which piece."""
    from distc.pipeline import ShardOptions, ShardPipeline
    from distc.syntax.parser import parse_program

    prog = parse_program(F.text("llama_dp2", "s0", 0, "before_partition"))
    pipe = ShardPipeline(prog, ShardOptions(tensor_fusion=True, comm_buffer_mb=0.02, annotate_only=True))
    res = pipe.lower(0, copy=False)
    bufs = res.fusion["buffers"]
    assert [len(b["parameters"]) for b in bufs] == [4, 5, 5, 7]
    assert all(b["align_bytes"] == 128 for b in bufs)
    # a parameter cut between the two ranks
    assert bufs[0]["owners"]["linear_13.w_0.dist"] == [(0, 1008), (1, 1040)]

    class U:  # group_by_size reads dtype and shape only
        def __init__(self, n, dt="f32"):
            self.param = type("P", (), {"type": type("T", (), {"dtype": dt, "shape": (n,)})()})()

    assert group_by_size([U(10), U(10), U(10)], 0) == [[0], [1], [2]]
    assert group_by_size([U(10), U(10), U(10)], 80) == [[0, 1], [2]]
    assert group_by_size([U(10), U(10, "bf16"), U(10)], 80) == [[0, 2], [1]]


@pytest.mark.parametrize("args,msg", [
    (["--overlap"], "--overlap, --comm-buffer-size and --release-gradients go with --tensor-fusion"),
    (["--tensor-fusion", "--stage", "0"], "--tensor-fusion shards: ZeRO-1"),
])
def test_usage_errors(tmp_path, args, msg):
    f = tmp_path / "main.ir"
    f.write_text(F.text("mlp_dp2", "s0", 0, "before_partition"))
    r = run("shard", f, *args)
    assert r.exit_code == 2 and msg in r.output


def test_fused_input_is_refused(tmp_path):
    """Paddle's fused program, or its unfused ZeRO-1 one, given to --tensor-fusion: an error
    naming what it carries (no double sharding)."""
    for variant, what in (("fuse", "fused ZeRO-1 (tensor fusion)"), ("s1", "ZeRO-1/2")):
        f = tmp_path / f"{variant}.ir"
        f.write_text(F.text("mlp_dp2", variant, 0, "before_partition"))
        r = run("shard", f, "--tensor-fusion", "-q")
        assert r.exit_code == 1, r.output
        assert f"MAIN already carries {what}" in r.stderr and "--tensor-fusion would shard it a second time" in r.stderr
