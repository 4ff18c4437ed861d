"""``distc.dialects.spmd_compute`` against Paddle 3.3.1's own SPMD rules: 6,000 random layouts
(matmul with transposes and broadcast batch axes, add with broadcast and size-1 axes, relu; meshes
2x2, 2x4, 2x2x2) answered by ``core.get_phi_spmd_rule`` (tests/data/oracle/gen_spmd_rules.py).
Where distc models a case its answer is Paddle's; where Paddle raises distc declines (the op is then
kept as it is); the cases distc declines otherwise are Paddle's co-sharded axes (one tensor axis
split over two mesh dims), which a dims mapping cannot say."""

from __future__ import annotations

import json
import lzma

import pytest

from conftest import DATA
from distc.dialects import spmd_compute as R


@pytest.fixture(scope="module")
def cases():
    with lzma.open(DATA / "oracle/spmd/rules.json.xz", "rt", encoding="utf-8") as f:
        return json.load(f)["cases"]


def _distc(c):
    ms = tuple(c["mesh"])
    if c["rule"] == "matmul":
        (xs, ys), (xd, yd) = c["shapes"], c["dms"]
        return R.matmul(xs, tuple(xd), ys, tuple(yd), *c["trans"], mesh_shape=ms)
    try:
        return R.elementwise(c["shapes"], [tuple(d) for d in c["dms"]], ms)
    except R.Conflict:
        assert "error" in c and "two different mesh dimension" in c["error"], c
        return None


def test_rules_are_paddles(cases):
    modelled = declined_error = declined_coshard = 0
    for c in cases:
        got = _distc(c)
        if got is None:
            if "error" in c:
                declined_error += 1
            else:
                declined_coshard += 1
            continue
        assert "error" not in c, c
        ins, outs, parts = got
        assert [list(x) for x in ins] == c["ins"], c
        assert [list(x) for x in outs] == c["outs"], c
        assert [sorted(p) for p in parts] == c["partial"], c
        modelled += 1
    # every case Paddle answers with one mesh dim per tensor axis is modelled
    assert modelled + declined_error + declined_coshard == len(cases) == 6000
    assert modelled >= 0.85 * len(cases), (modelled, declined_error, declined_coshard)


def test_larger_free_axis_keeps_the_mesh_dim():
    """The stage-3 case: x [Shard(0), Shard(1)] (batch 4 over dp, 32 over mp) times a weight
    [Shard(1), Shard(0)]: both free axes want dp; the weight's 16 columns keep it."""
    (xr, yr), (out,), (part,) = R.matmul([4, 32], (0, 1), [32, 16], (1, 0), mesh_shape=(2, 2))
    assert (xr, yr, out, part) == ((-1, 1), (1, 0), (-1, 0), (1,))
    # a weight over dp on its contracted axis loses it to the batch: the stage-1 layout
    (xr, yr), (out,), (part,) = R.matmul([4, 16], (0, -1), [16, 32], (0, 1), mesh_shape=(2, 2))
    assert (xr, yr, out, part) == ((0, -1), (-1, 1), (0, 1), ())


def test_grad_rules():
    # add_grad: the bias's gradient is partial over the mesh dim of the batch axis it lacks
    ins, outs, parts = R.elementwise_grad([4, 16], [16], [4, 16], (0, -1))
    assert ins == [(0, -1), (-1,), (0, -1)] and outs == [(0, -1), (-1,)] and parts == [(), (0,)]
    # matmul_grad: dx partial over n's mesh dim, dy over m's
    ins, outs, parts = R.matmul_grad([4, 32], (0, 1), [32, 16], (1, 0), mesh_shape=(2, 2))
    assert outs == [(-1, 1), (1, 0)] and parts == [(0,), ()]
    # mean_grad over every axis: the gradient replicated whatever x was
    ins, outs, parts = R.reduction_grad([4, 16], (), [], False)
    assert outs == [(-1, -1)]


def test_embedding_conflict_is_paddles():
    """Where Paddle 3.3.1's embedding rule raises (``Multiple Tensor Axes [a,k] is sharded by same
    mesh dimension [0]``: the vocab-parallel LLaMA and BERT at stage 3), as its dist build runs it:
    the table's row axis replicated (a vocab-parallel table is ``[-1, -1]`` in Paddle's stage-0
    programs, clip/llama_vp_dp2mp2): on every such layout (342 of the 985 of
    spmd/embedding.json.xz, gen_spmd_rules.py --embedding) distc raises where Paddle's rule does,
    with its message, and nowhere else."""
    with lzma.open(DATA / "oracle/spmd/embedding.json.xz", "rt", encoding="utf-8") as f:
        cases = [c for c in json.load(f)["cases"] if c["w"][0] == -1]
    raised = 0
    for c in cases:
        try:
            R.embedding_conflict(tuple(c["x"]), tuple(c["w"]))
            assert "error" not in c, c
        except R.Conflict as e:
            assert "error" in c and str(e) in c["error"], (c, str(e))
            raised += 1
    assert len(cases) == 342 and raised == 140
