"""Pieces of the reshard lowering: ring ids, partial-status order, SPMD rules, the registry,
2024-style spelling, the cost summary."""

from __future__ import annotations

import pytest

import distc
from distc.analysis.cost import bytes_moved, collectives_in, human_bytes, totals
from distc.passes.reshard import (
    ReshardFunction, RingAllocator, candidates, choose, functions, lower_program, lower_reshard,
    reshard_function, unregister,
)
from distc.dialects import spmd
from distc.passes.reshard.explore import build_program, make_mesh, parse_placements
from distc.passes.reshard.util import hash_map_order, layout_name, split_mesh, sub_mesh_1d, sub_mesh_dim
from distc.syntax.diagnostics import DiagnosticError

M2 = make_mesh([2])
M22 = make_mesh([2, 2])


def lowered(src, dst, rank=0, mesh=M2, to_mesh=None, shape=(4, 8), **kw):
    p = build_program(mesh, src, to_mesh or mesh, dst, shape)
    res = lower_program(p, rank, **kw)
    return p, res


def names(prog):
    return [op.name for op in prog.ops]


# --------------------------------------------------------------------------------------- rings
def test_ring_ids_are_cached_by_rank_list_from_12():
    r = RingAllocator()
    assert r.get([0, 1]) == 12
    assert r.get([0, 2]) == 13
    assert r.get((0, 1)) == 12
    assert r.get([2, 0]) == 14  # the reverse p2p group is another group
    assert r.ranks_of(13) == (0, 2)
    assert r.table() == [(12, (0, 1)), (13, (0, 2)), (14, (2, 0))]


def test_ring_ids_skip_reserved():
    r = RingAllocator(first=5, reserved={5, 6})
    assert r.get([0, 1]) == 7 and r.get([1, 2]) == 8


def test_p2p_and_collective_share_a_group_with_the_same_rank_list():
    # cross-mesh S0 -> S1 from [0,1] to [2,3] on rank 2: recv over [0,2]; all_to_all over [2,3]
    p, res = lowered("s0", "s1", rank=2, to_mesh=make_mesh([2], [2, 3]))
    recv = p.find("pd_op.recv_v2")[0]
    a2a = p.find("pd_op.all_to_all")[0]
    assert res.rings.ranks_of(recv.attr("ring_id").value) == (0, 2)
    assert res.rings.ranks_of(a2a.attr("ring_id").value) == (2, 3)


# -------------------------------------------------------------------------- partial status order
def test_partial_order_is_paddles_hash_map_order():
    assert hash_map_order([0, 1, 2]) == [0, 2, 1]
    assert hash_map_order([2, 1]) == [2, 1]
    assert hash_map_order([0, 1]) == [0, 1]
    assert hash_map_order([1, 0]) == [0, 1]


# ----------------------------------------------------------------------------------------- spmd
def test_reshape_rule():
    assert spmd.reshape((0, -1), [4, 8], [4, 2, 4], (2,)) == ((0, -1), (0, -1, -1))
    assert spmd.reshape((-1, 0, -1), [2, 4, 4], [8, 4], (2,)) == ((-1, -1, -1), (-1, -1))
    assert spmd.reshape((-1, 0), [4, 8], [2, 2, 8], (2,)) == ((-1, 0), (-1, -1, 0))
    assert spmd.reshape((0, -1), [6, 8], [3, 2, 8], (2,)) == ((-1, -1), (-1, -1, -1))  # 3 % 2


def test_mesh_helpers():
    assert sub_mesh_1d(M22, 0, 3).process_ids == (1, 3)
    assert sub_mesh_1d(M22, 1, 3).process_ids == (2, 3)
    assert sub_mesh_1d(M22, 1, 7).process_ids == (0, 1)  # outside: the first process's slice
    assert [m.process_ids for m in split_mesh(M22, 0)] == [(0, 1), (2, 3)]
    assert sub_mesh_dim(M22, make_mesh([2], [2, 3])) == 0
    assert sub_mesh_dim(make_mesh([4]), M2) == -1
    assert layout_name(build_program(M22, "s0,p", M22, "r,r").ops[1].results[0].dist_attr) == "s0,p on [[0,1],[2,3]]"


def test_placement_parsing():
    assert [p.short() for p in parse_placements("s,p:avg", 2)] == ["s0", "p:avg"]
    assert [p.short() for p in parse_placements("S0R", 2)] == ["s0", "r"]
    with pytest.raises(DiagnosticError):
        parse_placements("s0", 2)
    with pytest.raises(DiagnosticError):
        parse_placements("q", 1)


# ------------------------------------------------------------------------------------- lowering
@pytest.mark.parametrize("src,dst,expect", [
    ("p", "r", ["pd_op.all_reduce"]),
    ("s0", "r", ["pd_op.all_gather"]),
    ("s1", "r", ["pd_op.all_gather", "pd_op.full", "pd_op.split_with_num", "pd_op.full", "pd_op.concat"]),
    ("r", "s0", ["pd_op.full_int_array", "pd_op.full_int_array", "pd_op.slice"]),
    ("p", "s0", ["pd_op.reduce_scatter"]),
    ("p", "s1", ["pd_op.transpose", "pd_op.reduce_scatter", "pd_op.transpose"]),
    ("s1", "s0", ["pd_op.share_data_", "pd_op.all_to_all", "pd_op.full_int_array", "pd_op.reshape",
                  "pd_op.transpose", "pd_op.full_int_array", "pd_op.reshape"]),
    ("r", "p", ["pd_op.assign"]),
])
def test_one_d_lowerings(src, dst, expect):
    p, _ = lowered(src, dst, paddle_only=True)
    assert names(p)[2:] == expect


def test_r_to_p_zeros_off_rank_0_and_slices_per_rank():
    p, _ = lowered("r", "p", rank=1, paddle_only=True)
    assert names(p)[2:] == ["pd_op.full"]
    p, _ = lowered("r", "s0", rank=1, shape=(5, 7), mesh=make_mesh([3]))
    starts, ends = (op.attr("value").value for op in p.find("pd_op.full_int_array"))
    assert (starts, ends) == ([2], [4])
    p, _ = lowered("r", "s0", rank=2, shape=(5, 7), mesh=make_mesh([3]))
    assert [op.attr("value").value for op in p.find("pd_op.full_int_array")] == [[4], [5]]


def test_rank_outside_the_mesh_gets_a_placeholder_reshard():
    p, _ = lowered("r", "s0", rank=5)
    assert names(p)[2:] == ["dist_op.reshard"]


def test_cross_mesh_sender_keeps_a_reshard_next_to_send():
    p, _ = lowered("s0", "s0", rank=0, to_mesh=make_mesh([2], [2, 3]))
    assert names(p)[2:] == ["pd_op.send_v2", "dist_op.reshard"]
    p, _ = lowered("s0", "s0", rank=3, to_mesh=make_mesh([2], [2, 3]))
    assert names(p)[2:] == ["pd_op.recv_v2"]
    recv = p.find("pd_op.recv_v2")[0]
    assert recv.attr("peer").value == 0 and recv.attr("out_shape").value == [2, 8]


def test_nd_mesh_ops_carry_the_sub_mesh():
    p, res = lowered("p,p", "r,r", rank=3, mesh=M22, shape=(8, 12))
    ar = p.find("pd_op.all_reduce")
    assert [op.dist_attr.mesh.process_ids for op in ar] == [(1, 3), (2, 3)]
    assert all(op.results[0].type.dist.mesh == M22 for op in ar)


def test_same_layout_is_removed():
    p = build_program(M2, "s0", M2, "s0", (4, 8))
    lower_program(p, 0)
    assert names(p) == ["pd_op.data", "dist_op.shard_tensor"]


def test_lower_reshard_one_op_programmatically():
    p = build_program(M2, "s0", M2, "r", (4, 8))
    op = p.find("dist_op.reshard")[0]
    v = lower_reshard(p, op, 1)
    assert v.owner.name == "pd_op.all_gather" and not p.find("dist_op.reshard")


def test_refusal_is_located_and_names_both_layouts():
    p = build_program(M2, "p:avg", M2, "s0", (4, 8))
    with pytest.raises(DiagnosticError) as ei:
        lower_program(p, 0, paddle_only=True)
    e = ei.value
    assert e.line == 4 and "partial(0,AVG)" in e.message and "Shard(dim=0)" in e.message
    assert any("only support sum" in n for n in e.notes)


# ------------------------------------------------------------------------------------- registry
def test_registry_order_is_paddles():
    order = [f.name for f in functions(paddle_only=True)]
    assert order == ["p_to_r", "p_to_r_cross_mesh", "p_to_s", "r_to_s", "r_to_s_cross_mesh", "r_to_p",
                     "same_status", "s_to_r", "s_to_r_cross_mesh", "nd_mesh", "nd_mesh_cross_mesh",
                     "global_to_sub_mesh", "sub_to_global_mesh", "s_to_s"]
    src = build_program(M2, "p", M2, "r").ops[1].results[0].dist_attr
    dst = build_program(M2, "r", M2, "r").ops[1].results[0].dist_attr
    assert choose(src, dst, (4, 8), paddle_only=True).name == "p_to_r"


def test_extra_function_registration_and_refusal_fallthrough():
    calls = []

    @reshard_function(priority=5, name="test_refuses")
    class Refuses(ReshardFunction):
        def is_suitable(self, src, dst, shape):
            return True

        def refuses(self, src, dst, shape):
            return "not today" if shape == (4, 8) else None

        def reshard(self, ctx, src, dst, value, dst_type):  # never reached for 4x8
            calls.append("refuses")
            out = ctx.api.assign(value)
            ctx.api.retype(out, dst_type)
            return out

    @reshard_function(priority=6, name="test_s_to_p")
    class SToP(ReshardFunction):
        def is_suitable(self, src, dst, shape):
            return bool(src.dims_mapping.count(0)) and bool(dst.partial) and src.mesh.ndim == 1

        def reshard(self, ctx, src, dst, value, dst_type):
            calls.append("s_to_p")
            out = ctx.api.assign(value)
            ctx.api.retype(out, dst_type)
            return out

    try:
        assert [f.name for f in candidates(*_attrs("s0", "p"), (4, 8))][:2] == ["test_refuses", "test_s_to_p"]
        assert choose(*_attrs("s0", "p"), (4, 8)).name == "test_s_to_p"
        assert choose(*_attrs("s0", "p"), (6, 8)).name == "test_refuses"
        p, res = lowered("s0", "p")
        assert calls == ["s_to_p"]  # matching decided: the refusing function inserted nothing
        assert names(p)[2:] == ["pd_op.assign"]
        assert res.steps[0].function == "test_s_to_p" and "not today" in res.steps[0].tried[0]
        with pytest.raises(DiagnosticError):  # Paddle's functions only: still refused
            lowered("s0", "p", paddle_only=True)
    finally:
        unregister("test_refuses")
        unregister("test_s_to_p")


def test_priorities_relative_to_paddles():
    from distc.passes.reshard.registry import after, before, paddle_priority

    assert before("p_to_s", 5) == paddle_priority("p_to_s") - 5 < paddle_priority("p_to_s")
    assert before("p_to_s", 5) > paddle_priority("p_to_r_cross_mesh")
    assert after("s_to_s", 10) > paddle_priority("s_to_s")
    with pytest.raises(ValueError):
        before("nd_mesh", 10)
    order = [f.name for f in functions(enable=("x_coshard",))]
    for x, paddle in (("x_p_to_r", "p_to_r"), ("x_p_to_s", "p_to_s"), ("x_r_to_p", "r_to_p"), ("x_s_to_r", "s_to_r"),
                      ("x_s_to_p", "nd_mesh"), ("x_p_to_p", "nd_mesh"), ("x_s_to_s", "nd_mesh"),
                      ("x_coshard", "nd_mesh")):
        assert order.index(x) + 1 == order.index(paddle) or order[order.index(x) + 1].startswith("x_")
    assert order[-1] == "x_via_replicate"


def test_matching_is_pure_and_decides_on_the_shape():
    """is_suitable/refuses look at layouts and shape only; an uneven S->R goes to x_s_to_r, an even
    one to Paddle's s_to_r, and with Paddle's functions alone the uneven one is refused."""
    src, dst = _attrs("s0", "r")
    assert choose(src, dst, (4, 8)).name == "s_to_r"
    assert choose(src, dst, (5, 8)).name == "x_s_to_r"
    f = choose(src, dst, (5, 8), paddle_only=True)
    assert f is None
    s_to_r = [f for f in candidates(src, dst, (5, 8), paddle_only=True)][0]
    assert "get_defining_op" in s_to_r.refuses(src, dst, (5, 8))


def _attrs(a, b):
    p = build_program(M2, a, M2, b)
    op = p.find("dist_op.reshard")[0]
    return op.operand(0).dist_attr, op.results[0].dist_attr


# ---------------------------------------------------------------------------------- 2024 style
ERA_B = """{
    (%0) = "pd_op.data" () {dtype:(pd_op.DataType)float32,name:"x",place:(pd_op.Place)Place(undefined:0),shape:(pd_op.IntArray)[4,8],stop_gradient:[false]} : () -> builtin.tensor<4x8xf32>
    (%1) = "dist_op.shard_tensor" (%0) {op_dist_attr:{mesh:{shape:[2,2],process_ids:[0,1,2,3]},result(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1], partial(0,SUM)}},op_role:(Int32)2,stop_gradient:[false]} : (builtin.tensor<4x8xf32>) -> pd_dist.tensor<4x8xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1], partial(0,SUM)>
    (%2) = "dist_op.reshard" (%1) {op_dist_attr:{mesh:{shape:[2,2],process_ids:[0,1,2,3]},operand(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1], partial(0,SUM)},result(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[0,1]}},op_role:(Int32)2,stop_gradient:[false]} : (pd_dist.tensor<4x8xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1], partial(0,SUM)>) -> pd_dist.tensor<4x8xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[0,1]>
    (%3) = "dist_op.reshard" (%2) {op_dist_attr:{mesh:{shape:[2,2],process_ids:[0,1,2,3]},operand(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[0,1]},result(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1]}},op_role:(Int32)2,stop_gradient:[false]} : (pd_dist.tensor<4x8xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[0,1]>) -> pd_dist.tensor<4x8xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[-1,1]>
}
"""


def test_2024_style_gets_that_eras_names_and_spelling():
    p = distc.parse(ERA_B)
    lower_program(p, 0)
    out = str(p)
    assert '"pd_op.c_reducescatter" (%1)' in out and '"pd_op.c_allgather"' in out
    rs = p.find("pd_op.c_reducescatter")[0]
    assert rs.dist_attr.mesh.process_ids == (0, 2)
    # nd_mesh first creates the groups split_mesh gives ([0,1]=12, [2,3]=13), then [0,2]
    assert rs.attr("ring_id").value == 14 and str(rs.attr("ring_id")) == "(Int32)14"
    for needle in ("nranks:(Int32)2", "use_calc_stream:true", "op_role:(Int32)2"):
        assert needle in out
    assert "placements" not in out and "chunk_id" not in out and "execution_stream" not in out
    assert "pd_op.all_gather" not in out and "pd_op.reduce_scatter" not in out


# ----------------------------------------------------------------------------------------- cost
def test_bytes_moved():
    assert bytes_moved("all_gather", 64, 2) == 64
    assert bytes_moved("all_reduce", 128, 4) == 192
    assert bytes_moved("reduce_scatter", 128, 2) == 64
    assert bytes_moved("send", 10, 2) == 10 and bytes_moved("recv", 10, 2) == 0
    assert human_bytes(96) == "96 B" and human_bytes(3 << 20) == "3.0 MiB"


def test_cost_from_records_and_from_scan_agree():
    p, res = lowered("s0,s1", "s1,s0", rank=0, mesh=M22, shape=(8, 12))
    recs = res.records
    scan = collectives_in(p, 0, rings={v: k for k, v in res.rings.groups.items()})
    assert [(c.kind, c.ranks, c.moved) for c in recs] == [(c.kind, c.ranks, c.moved) for c in scan]
    assert [c.moved for c in recs] == [4 * 6 * 4, 4 * 12 * 4]
    assert sum(t["bytes_sent"] for t in totals(recs).values()) == 96 + 192
    assert totals(recs) == totals(scan) and totals(recs, by_group=True) == totals(scan, by_group=True)


def test_paddles_failures_decline():
    m4 = make_mesh([4])
    for src, dst, shape in (("s1", "s2", (6, 4, 8)),  # s_to_s: axis 0 of 6 does not split over 4
                            ("s0", "r", (5, 7)),  # uneven s_to_r
                            ("p:max", "s0", (4, 8))):  # p_to_s only sums
        with pytest.raises(DiagnosticError):
            lowered(src, dst, mesh=m4, shape=shape, paddle_only=True)
