"""Unit tests of the IR: meshes, dist attrs, types, use-def chains, printing of new ops."""

import pytest

import distc
from distc.ir import (
    DistTensorType, OperationDistAttr, Partial, ProcessMesh, REPLICATE, Shard, TensorDistAttr, split_bounds,
)
from distc.ir.attrs import FloatAttr, IntAttr, format_float
from distc.ir.builder import InsertPoint, Maker, become
from distc.ir.core import Operation

from conftest import DATA

M22 = ProcessMesh((2, 2), (0, 1, 2, 3))


# ---------------------------------------------------------------------------------- meshes
def test_mesh_coords_and_sub_meshes():
    assert M22.coord(0) == (0, 0) and M22.coord(2) == (1, 0) and M22.coord(3) == (1, 1)
    assert M22.sub_mesh(0, 0).process_ids == (0, 2)
    assert M22.sub_mesh(1, 0).process_ids == (0, 1)
    assert M22.sub_mesh(0, 3).process_ids == (1, 3)
    assert [m.process_ids for m in M22.sub_meshes(0)] == [(0, 2), (1, 3)]
    m = ProcessMesh((2, 2), (4, 5, 6, 7))
    assert m.coord(6) == (1, 0) and m.rank_at((1, 1)) == 7


def test_mesh_validates_ids():
    with pytest.raises(ValueError):
        ProcessMesh((2, 2), (0, 1, 2))


# ---------------------------------------------------------------------------------- dist attrs
def test_placements_derived_from_dims_mapping_and_partial():
    d = TensorDistAttr(M22, (-1, 0), ((1, "SUM"),))
    assert d.placements == (Shard(1), Partial("SUM"))
    assert str(d.placements[0]) == "Shard(dim=1)" and str(d.placements[1]) == "Partial(reduce_type=SUM)"
    assert TensorDistAttr(M22, (-1, -1)).placements == (REPLICATE, REPLICATE)


def test_from_placements_roundtrip_and_co_shard():
    d = TensorDistAttr.from_placements(M22, [Shard(0), Shard(1)], 2)
    assert d.dims_mapping == (0, 1) and d.given is None
    co = TensorDistAttr.from_placements(M22, [Shard(0), Shard(0)], 2)
    assert co.dims_mapping == (1, -1) and co.placements == (Shard(0), Shard(0))


@pytest.mark.parametrize("n,p,expect", [(8, 2, [(0, 4), (4, 8)]), (5, 3, [(0, 2), (2, 4), (4, 5)]),
                                        (7, 2, [(0, 4), (4, 7)]), (2, 4, [(0, 1), (1, 2), (2, 2), (2, 2)])])
def test_split_bounds_paddle_rule(n, p, expect):
    assert [split_bounds(n, p, i) for i in range(p)] == expect


def test_local_shape_per_rank():
    d = TensorDistAttr(M22, (0, 1))
    assert d.local_shape((8, 12), 0) == (4, 6)
    u = TensorDistAttr(ProcessMesh((3,), (0, 1, 2)), (0, -1))
    assert [u.local_shape((5, 7), r) for r in range(3)] == [(2, 7), (2, 7), (1, 7)]
    t = DistTensorType((8, 12), "f32", d)
    assert t.local_shape(3) == (4, 6) and t.local_nbytes(0) == 4 * 6 * 4 and t.nbytes() == 8 * 12 * 4


def test_dist_attr_text_forms():
    d = TensorDistAttr(M22, (-1, -1), ((0, "SUM"),), placements_shown=True)
    assert d.format() == ("mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,-1], partial(0,SUM), "
                          "placements:[Partial(reduce_type=SUM), Replicate()]")
    assert TensorDistAttr(ProcessMesh((2,), (0, 1)), (0, -1), form="nopids").format() == "mesh_shape:[2],dims_mappings:[0,-1]"
    od = OperationDistAttr(M22, (), (TensorDistAttr(M22, (-1,)),), -1)
    assert str(od) == ("{mesh:{shape:[2,2],process_ids:[0,1,2,3]},result(0):{mesh_shape:[2,2],"
                       "process_ids:[0,1,2,3],dims_mappings:[-1]},chunk_id:-1}")


def test_float_formatting_like_cpp():
    assert [format_float(x) for x in (1e-08, 0.999, 0.9, 1.0, 3e10, 1099511627776.0)] == \
        ["1e-08", "0.999", "0.9", "1", "3e+10", "1.09951e+12"]
    assert str(FloatAttr.of(0.01, "Float")) == "(Float)0.01" and str(IntAttr(36, "Int32")) == "(Int32)36"


# ---------------------------------------------------------------------------------- use-def
def _prog():
    return distc.parse((DATA / "corpus/legacy/ospp_visualdl_pir_ifop.ir").read_text())


def test_use_def_chains():
    p = _prog()
    data = p.ops[0]
    users = data.result.users
    assert [u.name for u in users] == ["pd_op.scale", "pd_op.less_than"]
    scale = users[0]
    assert scale.operand(0) is data.result and (scale, 0) in data.result.uses


def test_replace_all_uses_with_and_erase():
    p = _prog()
    data, full = p.ops[0], p.ops[1]
    data.result.replace_all_uses_with(full.result)
    assert not data.result.uses
    data.erase()
    assert p.ops[0] is full
    from distc.analysis.verify import verify

    verify(p)
    assert p.ops[1].operand(0) is full.result  # scale now reads the full


def test_erase_with_uses_refuses():
    p = _prog()
    with pytest.raises(ValueError):
        p.ops[0].erase()


def test_verify_catches_use_before_def():
    p = _prog()
    a, b = p.ops[0], p.ops[2]
    p.block.remove(a)
    p.block.insert(3, a)  # data now after its user scale
    from distc.analysis.verify import verify

    with pytest.raises(distc.DiagnosticError, match="used before it is defined"):
        verify(p)


def _relu_of_reshard(p):
    """The reshard of m2_R_to_S0 (op 2, given two users at the end) and the attributes of a
    pd_op.relu of its input with the reshard's type."""
    op = p.ops[2]
    assert op.name == "dist_op.reshard"
    x, t = op.operand(0), op.result.type
    mk = Maker(p.style)
    attrs = {"op_dist_attr": mk.op_dist(x.dist_attr.mesh, [t.dist], [t.dist]), "stop_gradient": mk.bools([True])}
    for _ in range(2):
        InsertPoint.at_end(p.block).insert(Operation("pd_op.relu", [op.result], [t], attrs))
    attrs = {"op_dist_attr": mk.op_dist(x.dist_attr.mesh, [x.dist_attr], [t.dist]), "stop_gradient": mk.bools([True])}
    return op, x, t, attrs


def test_become_is_a_new_op_in_the_old_ones_place():
    """become(op, ...) gives the program that building the op, moving op's uses to it and erasing
    op gives (printed the same, verify passes); the op object and its result object stay, with
    the result's uses, and they are the new op's now."""
    text = (DATA / "corpus/paddle-3.3.1/reshard/m2_R_to_S0.r0.before.ir").read_text()
    p = distc.parse(text)
    op, x, t, attrs = _relu_of_reshard(p)
    new = Operation("pd_op.relu", [x], [t], attrs)
    InsertPoint.before(op).insert(new)
    op.result.replace_all_uses_with(new.result)
    op.erase()
    want = str(p)

    p = distc.parse(text)
    op, x, t, attrs = _relu_of_reshard(p)
    r, uses = op.result, list(op.result.uses)
    assert become(op, "pd_op.relu", t, attrs, [x]) is r
    assert op.name == "pd_op.relu" and op.parent is p.block and op.loc is None and op.src is None
    assert op.dirty and all(u.dirty for u, _ in uses) and r.uses == uses and r.name is None
    assert op.operand(0) is x and (op, 0) in x.uses and op.attrs == attrs
    assert str(p) == want
    from distc.analysis.verify import verify

    verify(p)


# ---------------------------------------------------------------------------------- printing new ops
def test_new_op_prints_in_current_style_and_renumbers():
    text = (DATA / "corpus/paddle-3.3.1/reshard/m2_R_to_S0.r0.before.ir").read_text()
    p = distc.parse(text)
    mk = Maker(p.style)
    x = p.ops[1].result
    mesh = x.dist_attr.mesh
    t = mk.dist_type((4, 8), "f32", mk.tensor_dist(mesh, (-1, -1)))
    op = Operation("pd_op.relu", [x], [t], {"op_dist_attr": mk.op_dist(mesh, [x.dist_attr], [t.dist]),
                                             "ring_id": mk.i32(12), "stop_gradient": mk.bools([True])})
    InsertPoint.before(p.ops[2]).insert(op)
    out = str(p).splitlines()
    assert out[3] == (
        '    (%2) = "pd_op.relu" (%1) {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},operand(0):{mesh_shape:[2],'
        'process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},result(0):{mesh_shape:[2],process_ids:[0,1],'
        'dims_mappings:[-1,-1], placements:[Replicate()]},chunk_id:-1},ring_id:12,stop_gradient:[true]} : '
        '(pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>) -> '
        'pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>')
    assert out[4].startswith('    (%3) = "dist_op.reshard" (%1)')  # renumbered after the insertion


def test_new_op_prints_in_2024_style():
    p = distc.parse((DATA / "corpus/seed/seed_stage1_eraB.ir").read_text())
    assert p.style.typed_attrs and not p.style.placements and not p.style.chunk_id
    mk = Maker(p.style)
    param = p.ops[5].result
    op = Operation("pd_op.c_allgather", [param], [param.type],
                   {"nranks": mk.i32(2), "ring_id": mk.i32(0), "op_dist_attr": mk.op_dist(param.dist_attr.mesh, [param.dist_attr], [param.dist_attr])})
    InsertPoint.at_end(p.block).insert(op)
    last = str(p).splitlines()[-2]
    assert "nranks:(Int32)2" in last and "ring_id:(Int32)0" in last
    assert "placements" not in last and "chunk_id" not in last
    assert last.startswith('    (%16) = "pd_op.c_allgather" (%5) {nranks:(Int32)2,op_dist_attr:{mesh:{shape:[2,2],process_ids:[0,1,2,3]},operand(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1]}')


def test_non_contiguous_names_are_kept_and_new_values_get_fresh_numbers():
    text = (DATA / "corpus/legacy/paddle_test_fuse_allreduce_split_to_reducescatter__c_allreduce.ir").read_text()
    p = distc.parse(text)
    assert not p.style.renumber
    assert str(p) == text
    v = p.ops[-1].result
    InsertPoint.at_end(p.block).insert(Operation("pd_op.relu", [v], [v.type], {"stop_gradient": Maker(p.style).bools([False])}))
    assert '(%68) = "pd_op.relu" (%67)' in str(p)


def test_value_lookup_and_dist_attr_access():
    p = distc.parse((DATA / "corpus/paddle-3.3.1/reshard/m22_PR_to_S0S1.r0.before.ir").read_text())
    v = p.value("%1")
    assert v.dist_attr.partial == ((0, "SUM"),)
    assert v.type.local_shape(0) == (8, 12)
    assert p.ops[2].dist_attr.results[0].dims_mapping == (0, 1)


def test_an_op_built_from_result_types_given_as_an_iterator_has_them_all():
    # (a863719 read the types twice: a generator's second pass was empty, the results had no type)
    from distc.ir.core import Operation
    from distc.ir.types import DenseTensorType
    t = DenseTensorType((2,), "f32")
    for types in ((x for x in [t, t]), iter([t, t]), [t, t], (t, t)):
        op = Operation("pd_op.relu", [], types, {})
        assert [(r.type, r.uses, r.name, r.op) for r in op.results] == [(t, (), None, op)] * 2
