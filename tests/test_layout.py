"""One notion of layout: ``==`` on TensorDistAttr, Placement predicates, one short-name formatter,
one reshard-mesh rule (Paddle's MergeMeshes)."""

from __future__ import annotations

from pathlib import Path

import distc
from distc.dialects import ops
from distc.ir.dist import (
    Partial, ProcessMesh, REPLICATE, Shard, TensorDistAttr, layout_name, merge_meshes,
)

ORACLE = Path(__file__).parent / "data" / "oracle" / "reshard"
M22 = ProcessMesh((2, 2), (0, 1, 2, 3))
M222 = ProcessMesh((2, 2, 2), tuple(range(8)))


def test_partial_dims_are_canonical_and_print_in_the_order_given():
    a = TensorDistAttr(M222, (-1, -1), ((0, "SUM"), (2, "SUM"), (1, "SUM")))  # Paddle's print order
    b = TensorDistAttr(M222, (-1, -1), ((0, "SUM"), (1, "SUM"), (2, "SUM")))
    assert a == b and hash(a) == hash(b)
    assert a.partial == b.partial == ((0, "SUM"), (1, "SUM"), (2, "SUM"))
    assert "partial(0,SUM),partial(2,SUM),partial(1,SUM)" in a.format()
    assert "partial(0,SUM),partial(1,SUM),partial(2,SUM)" in b.format()
    assert a.printed_partial == ((0, "SUM"), (2, "SUM"), (1, "SUM"))
    assert a.with_(form="nopids").printed_partial == a.printed_partial  # copies keep the print order


def test_paddles_print_order_round_trips():
    f = ORACLE / "m222_PPP_to_RRR.r0.before.ir"
    text = f.read_text()
    assert "partial(0,SUM),partial(2,SUM),partial(1,SUM)" in text
    prog = distc.parse(text, str(f))
    assert str(prog) == text
    d = next(op for op in prog.walk() if op.name == ops.RESHARD).operand(0).dist_attr
    assert d.partial == ((0, "SUM"), (1, "SUM"), (2, "SUM"))


def test_co_sharding_is_a_layout_paddle_equality_ignores():
    rs = TensorDistAttr.from_placements(M22, (REPLICATE, Shard(0)), 2)
    ss = TensorDistAttr.from_placements(M22, (Shard(0), Shard(0)), 2)
    assert rs.dims_mapping == ss.dims_mapping
    assert rs != ss and rs.paddle_equal(ss)


def test_placement_predicates():
    assert Shard(1).is_shard() and Shard(1).is_shard(1) and not Shard(1).is_shard(0)
    assert Partial("AVG").is_partial() and not Partial().is_shard() and REPLICATE.is_replicate()
    assert [p.short() for p in (Shard(1), REPLICATE, Partial(), Partial("AVG"))] == ["s1", "r", "p", "p:avg"]


def test_one_short_name_formatter():
    d = TensorDistAttr.from_placements(M22, (Shard(0), Partial()), 2)
    assert layout_name(d) == d.short_name() == "s0,p on [[0,1],[2,3]]"


def test_reshard_mesh_is_paddles_merge_meshes():
    """From a 2x2 mesh to its first row: Paddle's op mesh is the 1-D union [0,1,2,3] (the rule
    distc's ZeRO passes used before, "the larger mesh when one holds the other", gave the 2x2 mesh)."""
    f = ORACLE / "g22_to_m2_PR_to_R.r0.before.ir"
    prog = distc.parse(f.read_text(), str(f))
    op = next(op for op in prog.walk() if op.name == ops.RESHARD)
    src, dst = op.operand(0).dist_attr.mesh, op.results[0].dist_attr.mesh
    assert (src, dst) == (M22, ProcessMesh((2,), (0, 1)))
    assert op.dist_attr.mesh == ProcessMesh((4,), (0, 1, 2, 3)) == merge_meshes(src, dst)
    assert merge_meshes(src, dst) != src  # where the old rule and Paddle disagree
    assert merge_meshes(M22, M22) is M22
    assert merge_meshes(ProcessMesh((2,), (2, 3)), ProcessMesh((2,), (1, 0))) == ProcessMesh((4,), (0, 1, 2, 3))
