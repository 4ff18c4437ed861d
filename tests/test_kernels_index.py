"""Kernels of issue 17 beyond nn math: shape and index ops (forward against numpy, backward
against finite differences), comparable randomness (a sharded dropout draws the serial mask),
the MoE sub-mesh ops and the fused ops Paddle's passes emit."""

from __future__ import annotations

import numpy as np
import pytest

from distc import parse
from distc.analysis.simulate import simulate_ranks, simulate_serial
from distc.analysis.simulate.kernels.randomness import global_index, normal, uniform01
from distc.analysis.simulate.proof import verify_step

from kernel_util import RNG, close, numgrad, run_op


def fd(name, inputs, attrs, grad_name, grad_inputs, k=0, wrt=0, results=1, grad_results=1, tol=1e-5):
    ys = run_op(name, inputs, attrs, results=results)
    g = RNG.standard_normal(np.shape(ys[0]))
    got = run_op(grad_name, grad_inputs(ys, g), attrs, results=grad_results)[k]

    def f(v):
        ins = list(inputs)
        ins[wrt] = v
        return run_op(name, ins, attrs, results=results)[0]
    close(got, numgrad(f, inputs[wrt], g), tol)


# ------------------------------------------------------------------------------------ shape ops
def test_arange_expand_flatten_tile():
    close(run_op("pd_op.arange", [np.array([1.0]), np.array([7.0]), np.array([2.0])], "dtype:int64")[0], [1, 3, 5])
    x = RNG.standard_normal((1, 3))
    close(run_op("pd_op.expand", [x, np.array([4, -1])])[0], np.broadcast_to(x, (4, 3)))
    close(run_op("pd_op.expand", [x, np.array([2, 4, 3])])[0], np.broadcast_to(x, (2, 4, 3)))
    fd("pd_op.expand", [x, np.array([2, 4, 3])], "", "pd_op.expand_grad", lambda ys, g: [x, g, np.array([2, 4, 3])])
    y = RNG.standard_normal((2, 3, 4, 5))
    assert run_op("pd_op.flatten", [y], "start_axis:1,stop_axis:2")[0].shape == (2, 12, 5)
    fd("pd_op.flatten", [y], "start_axis:1,stop_axis:2", "pd_op.flatten_grad", lambda ys, g: [y, g])
    z = RNG.standard_normal((2, 3))
    close(run_op("pd_op.tile", [z, np.array([2, 1, 2])])[0], np.tile(z, (2, 1, 2)))
    fd("pd_op.tile", [z, np.array([2, 1, 2])], "", "pd_op.tile_grad", lambda ys, g: [z, g, np.array([2, 1, 2])])


@pytest.mark.parametrize("attrs,starts,ends", [
    ("axes:[1],decrease_axis:[],infer_flags:[1]", [1], [3]),
    ("axes:[1],decrease_axis:[1],infer_flags:[1]", [0], [1]),
    ("axes:[0,2],decrease_axis:[],infer_flags:[1,1]", [1, -2], [10, 4]),
])
def test_slice_grad_is_the_slice_transposed(attrs, starts, ends):
    x = RNG.standard_normal((3, 4, 5))
    s, e = np.array(starts), np.array(ends)
    fd("pd_op.slice", [x, s, e], attrs, "pd_op.slice_grad", lambda ys, g: [x, g, s, e])


def test_where_stack_unbind_roll_cumsum():
    c, x, y = RNG.standard_normal((3, 4)) > 0, RNG.standard_normal((3, 4)), RNG.standard_normal((4,))
    g = RNG.standard_normal((3, 4))
    dx, dy = run_op("pd_op.where_grad", [c, x, y, g], results=2)
    close(dx, np.where(c, g, 0))
    close(dy, np.where(c, 0, g).sum(0))
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    gs = RNG.standard_normal((2, 2, 3))
    parts = run_op("pd_op.stack_grad", [[a, b], gs], "axis:1")[0]
    close(parts[0], gs[:, 0]) and close(parts[1], gs[:, 1])
    close(run_op("pd_op.unbind", [gs], "axis:0")[0][1], gs[1])
    r = run_op("pd_op.roll", [x, np.array([1])], "axis:[1]")[0]
    close(r, np.roll(x, 1, axis=1))
    close(run_op("pd_op.roll_grad", [x, r, np.array([1])], "axis:[1]")[0], x)
    for attrs in ("exclusive:false,flatten:false,reverse:false", "exclusive:true,flatten:false,reverse:true"):
        fd("pd_op.cumsum", [x, np.array(1)], attrs, "pd_op.cumsum_grad", lambda ys, g: [x, g, np.array(1)])
    close(run_op("pd_op.cumsum", [x, np.array(1)], "exclusive:false,flatten:false,reverse:false")[0], np.cumsum(x, 1))


def test_topk_one_hot_argmax():
    x = RNG.standard_normal((3, 5))
    v, i = run_op("pd_op.topk", [x, np.array([2])], "axis:-1,largest:true,sorted:true", results=2)
    close(v, -np.sort(-x, axis=1)[:, :2])
    np.testing.assert_array_equal(i, np.argsort(-x, axis=1)[:, :2])
    fd("pd_op.topk", [x, np.array([2])], "axis:-1,largest:true,sorted:true", "pd_op.topk_grad",
       lambda ys, g: [x, ys[1], g], results=2)
    vs, _ = run_op("pd_op.topk", [x, np.array([1])], "axis:0,largest:false,sorted:true", results=2)
    close(vs, x.min(0, keepdims=True))
    oh = run_op("pd_op.one_hot", [np.array([[0, 2], [1, 1]]), np.array([3])])[0]
    close(oh, np.eye(3)[[[0, 2], [1, 1]]])
    np.testing.assert_array_equal(run_op("pd_op.argmax", [x, np.array(1)], "keepdims:false,flatten:false,dtype:int64")[0],
                                  x.argmax(1))


def test_gather_family_and_grads():
    x = RNG.standard_normal((5, 3))
    idx = np.array([4, 0, 4])
    close(run_op("pd_op.gather", [x, idx, np.array(0)])[0], x[idx])
    fd("pd_op.gather", [x, idx, np.array(0)], "", "pd_op.gather_grad", lambda ys, g: [x, idx, g, np.array(0)])
    close(run_op("pd_op.index_select", [x, np.array([2, 1])], "axis:1")[0], x[:, [2, 1]])
    fd("pd_op.index_select", [x, np.array([2, 2])], "axis:1", "pd_op.index_select_grad",
       lambda ys, g: [x, np.array([2, 2]), g])
    nd = np.array([[0, 1], [4, 2], [0, 1]])
    close(run_op("pd_op.gather_nd", [x, nd])[0], x[nd[:, 0], nd[:, 1]])
    fd("pd_op.gather_nd", [x, nd], "", "pd_op.gather_nd_grad", lambda ys, g: [x, nd, g])
    ta = np.array([[0, 2], [1, 1], [2, 0], [0, 0], [1, 2]])
    close(run_op("pd_op.take_along_axis", [x, ta], "axis:1")[0], np.take_along_axis(x, ta, 1))
    fd("pd_op.take_along_axis", [x, ta], "axis:1", "pd_op.take_along_axis_grad", lambda ys, g: [x, ta, g])
    pv = RNG.standard_normal(ta.shape)
    out = run_op("pd_op.put_along_axis", [x, ta[:, :1], pv[:, :1]], 'axis:1,reduce:"assign",include_self:true')[0]
    ref = x.copy()
    np.put_along_axis(ref, ta[:, :1], pv[:, :1], 1)
    close(out, ref)
    m = RNG.standard_normal((5, 3)) > 0
    close(run_op("pd_op.masked_fill", [x, m, np.array(2.5)])[0], np.where(m, 2.5, x))
    g = RNG.standard_normal(x.shape)
    dx, dv = run_op("pd_op.masked_fill_grad", [x, m, np.array(2.5), g], results=2)
    close(dx, np.where(m, 0, g)) and close(dv, np.where(m, g, 0).sum())



# index_add and nonzero (a Mixtral-style MoE: tokens routed to an expert found with nonzero, its
# output added back with index_add), Paddle 3.3.1's own results in dygraph (float64):
#   x = arange(15).reshape(5, 3) * 0.5; paddle.index_add(x, [4, 0, 4], 0, arange(9).reshape(3, 3) + 100);
#   paddle.index_add(x, [2, 2], 1, arange(10).reshape(5, 2) - 3); paddle.nonzero([[0, 1, 0], [2, 0, 3]]);
#   the gradients of sum(index_add(x, [4, 0, 4], 0, v) * arange(15).reshape(5, 3)).
PADDLE_INDEX_ADD = [[103.0, 104.5, 106.0], [1.5, 2.0, 2.5], [3.0, 3.5, 4.0], [4.5, 5.0, 5.5], [212.0, 214.5, 217.0]]
PADDLE_INDEX_ADD_AXIS1 = [[0.0, 0.5, -4.0], [1.5, 2.0, 1.5], [3.0, 3.5, 7.0], [4.5, 5.0, 12.5], [6.0, 6.5, 18.0]]
PADDLE_INDEX_ADD_GRAD_V = [[12.0, 13.0, 14.0], [0.0, 1.0, 2.0], [12.0, 13.0, 14.0]]


def test_index_add_and_nonzero_as_paddle():
    x = np.arange(15, dtype=np.float64).reshape(5, 3) * 0.5
    idx, v = np.array([4, 0, 4]), np.arange(9, dtype=np.float64).reshape(3, 3) + 100
    close(run_op("pd_op.index_add", [x, idx, v], "axis:0")[0], PADDLE_INDEX_ADD)  # a repeated index adds twice
    v1 = np.arange(10, dtype=np.float64).reshape(5, 2) - 3
    close(run_op("pd_op.index_add", [x, np.array([2, 2]), v1], "axis:1")[0], PADDLE_INDEX_ADD_AXIS1)
    g = np.arange(15, dtype=np.float64).reshape(5, 3)
    dx, dv = run_op("pd_op.index_add_grad", [idx, v, g], "axis:0", results=2)
    close(dx, g) and close(dv, PADDLE_INDEX_ADD_GRAD_V)
    xr, vr = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 3))
    for wrt, k in ((0, 0), (2, 1)):  # both gradients against finite differences
        fd("pd_op.index_add", [xr, idx, vr], "axis:0", "pd_op.index_add_grad", lambda ys, g: [idx, vr, g],
           k=k, wrt=wrt, grad_results=2)
    np.testing.assert_array_equal(run_op("pd_op.nonzero", [np.array([[0, 1, 0], [2, 0, 3]])])[0],
                                  [[0, 1], [1, 0], [1, 2]])
    assert run_op("pd_op.nonzero", [np.zeros(4)])[0].shape == (0, 1)
    with pytest.raises(Exception, match="does not fit 3 indices"):
        run_op("pd_op.index_add", [x, idx, v[:2]], "axis:0")

# ------------------------------------------------------------------------------------ randomness
def test_counter_draws_are_uniform_normal_and_per_element():
    idx = np.arange(200000, dtype=np.uint64)
    u = uniform01(123, idx)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    n = normal(123, idx)
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    np.testing.assert_array_equal(uniform01(123, idx[5:9]), u[5:9])  # a piece draws the same numbers
    assert not np.array_equal(uniform01(124, idx[:50]), u[:50])
    gi = global_index((4, 6), (slice(2, 4), slice(1, 3)))
    np.testing.assert_array_equal(gi, np.arange(24).reshape(4, 6)[2:4, 1:3])


def _dist(shape, dm, dt="f32"):
    return (f"pd_dist.tensor<{'x'.join(map(str, shape))}x{dt}, mesh_shape:[2],process_ids:[0,1],"
            f"dims_mappings:[{','.join(map(str, dm))}]>")


def dropout_program(dm, p=0.3, ops=2) -> str:
    t, tm = _dist((4, 6), dm), _dist((4, 6), dm, "u8")
    lines = ["{", f'    (%0) = "pd_op.data" () {{dtype:float32,name:"x",place:Place(undefined:0),shape:[4,6],'
                  f'stop_gradient:[true]}} : () -> {t}',
             f'    (%1) = "pd_op.full" () {{dtype:float32,place:Place(cpu),shape:[1],stop_gradient:[true],'
             f'value:{p}}} : () -> {_dist((1,), [-1])}']
    v = "%0"
    for k in range(ops):
        lines.append(f'    (%d{k}, %m{k}) = "pd_op.dropout" ({v}, <<NULL VALUE>>, %1) {{fix_seed:false,is_test:false,'
                     f'mode:"upscale_in_train",seed:0}} : ({t}, <<NULL TYPE>>, {_dist((1,), [-1])}) -> {t}, {tm}')
        lines.append(f'    () = "builtin.shadow_output" (%m{k}) {{output_name:"mask{k}"}} : ({tm}) -> ')
        v = f"%d{k}"
    lines.append(f'    () = "builtin.shadow_output" ({v}) {{output_name:"y"}} : ({t}) -> ')
    return "\n".join(lines + ["}"]) + "\n"


@pytest.mark.parametrize("dm", [[0, -1], [-1, 0], [-1, -1]])
def test_sharded_dropout_draws_the_serial_mask(dm):
    text = dropout_program(dm)
    serial = parse(dropout_program([-1, -1]), "serial.ir")
    ranks = {r: parse(text, f"r{r}.ir") for r in (0, 1)}
    rep = verify_step(serial, ranks, seed=3)
    assert rep.status == 0 and rep.max_abs == 0, rep.summary()
    sv = simulate_serial(serial, {"x": np.ones((4, 6))}, seed=3)
    m0, m1, y = (sv["%" + n] for n in ("m0", "m1", "d1"))
    assert 0.4 < m0.mean() < 0.95 and not np.array_equal(m0, m1)  # two dropouts, two streams
    close(y, m0 * m1 / 0.7 ** 2)
    other = simulate_serial(serial, {"x": np.ones((4, 6))}, seed=4)
    assert not np.array_equal(other["%m0"], m0)


def test_dropout_mutation_is_caught_on_its_rank():
    serial = parse(dropout_program([-1, -1]), "serial.ir")
    wrong = dropout_program([0, -1]).replace('"upscale_in_train"', '"downgrade_in_infer"', 1)
    ranks = {0: parse(dropout_program([0, -1]), "r0.ir"), 1: parse(wrong, "r1.ir")}
    rep = verify_step(serial, ranks, seed=3)
    d = rep.divergence
    assert rep.status == 1 and d.rank == 1 and d.op.name == "pd_op.dropout" and d.op.loc[0] == 4, rep.summary()
    ranks[1] = parse(dropout_program([0, -1], p=0.5), "r1.ir")  # the rate: located at its constant
    d = verify_step(serial, ranks, seed=3).divergence
    assert d.rank == 1 and d.op.name == "pd_op.full"


def test_dropout_grad_and_inference():
    x = RNG.standard_normal((3, 4))
    out, mask = run_op("pd_op.dropout", [x, None, np.array([0.25])], 'is_test:false,mode:"upscale_in_train",seed:0',
                       results=2)
    close(out, x * mask / 0.75)
    g = RNG.standard_normal(x.shape)
    close(run_op("pd_op.dropout_grad", [mask, g, np.array([0.25])], 'is_test:false,mode:"upscale_in_train"')[0],
          g * mask / 0.75)
    close(run_op("pd_op.dropout", [x, None, np.array([0.25])], 'is_test:true,mode:"downgrade_in_infer",seed:0',
                 results=2)[0], x * 0.75)


# ------------------------------------------------------------------------------------ MoE, fused
MOE = """{
    (%0) = "pd_op.data" () {dtype:float32,name:"x",place:Place(undefined:0),shape:[2,3],stop_gradient:[true]} : () -> G
    (%1, %2) = "dist_op.moe_sub_mesh_tensors" (%0) {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},chunk_id:-1}} : (G) -> L0, L1
    (%3) = "pd_op.scale" (%1) {bias:0,bias_after_scale:true,op_dist_attr:{mesh:{shape:[1],process_ids:[0]},chunk_id:-1},scale:2} : (L0) -> L0
    (%4) = "pd_op.scale" (%2) {bias:0,bias_after_scale:true,op_dist_attr:{mesh:{shape:[1],process_ids:[1]},chunk_id:-1},scale:3} : (L1) -> L1
    (%5) = "dist_op.moe_global_mesh_tensor" (%3, %4) {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},chunk_id:-1}} : (L0, L1) -> G
    () = "builtin.shadow_output" (%5) {output_name:"y"} : (G) -> 
}
""".replace("G", "pd_dist.tensor<2x3xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1]>").replace(
    "L0", "pd_dist.tensor<1x3xf32, mesh_shape:[1],process_ids:[0],dims_mappings:[-1,-1]>").replace(
    "L1", "pd_dist.tensor<1x3xf32, mesh_shape:[1],process_ids:[1],dims_mappings:[-1,-1]>")


def test_moe_sub_and_global_mesh_tensors():
    prog = parse(MOE, "moe.ir")
    x = RNG.standard_normal((2, 3))
    sv = simulate_serial(prog, {"x": x})
    close(sv["%1"], x[:1]) and close(sv["%2"], x[1:])
    close(sv["%5"], np.concatenate([2 * x[:1], 3 * x[1:]]))
    rv = simulate_ranks({0: prog, 1: prog}, {"x": x})
    close(rv[0]["%5"], 2 * x[:1]) and close(rv[1]["%5"], 3 * x[1:])
    assert "%2" not in rv[0] and "%1" not in rv[1]  # each sub-mesh's value exists on its ranks only
    assert verify_step(prog, {0: prog, 1: prog}).status == 0
    wrong = parse(MOE.replace("scale:3", "scale:4"), "moe.r1.ir")
    rep = verify_step(prog, {0: prog, 1: wrong})
    assert rep.status == 1 and rep.divergence.rank == 1, rep.summary()


def test_fused_linear_param_grad_add():
    x, d = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 5))
    w, b = RNG.standard_normal((4, 5)), RNG.standard_normal(5)
    dw, db = run_op("pd_op.fused_linear_param_grad_add", [x, d, w, b], "multi_precision:false,has_bias:true", results=2)
    close(dw, w + np.einsum("abk,abn->kn", x, d))
    close(db, b + d.sum((0, 1)))
    dw0, db0 = run_op("pd_op.fused_linear_param_grad_add", [x, d, None, None], "multi_precision:false,has_bias:false",
                      results=2)
    close(dw0, np.einsum("abk,abn->kn", x, d)) and db0 is None


def test_coalesce_tensor_aligns_to_the_fused_length():
    a, b = RNG.standard_normal((3, 2)), RNG.standard_normal(5)
    attrs = "dtype:float32,copy_data:true,set_constant:false,persist_output:false,constant:0,use_align:true,align_size:-1,size_of_dtype:4"
    outs, fused = run_op("pd_op.coalesce_tensor_", [[a, b]], attrs, results=2,
                         out_types=["vec[tensor<3x2xf32>,tensor<5xf32>]", "tensor<2048xf32>"])
    close(outs[0], a) and close(outs[1], b)
    assert fused.shape == (2048,)   # two 1024-element CPU chunks (4096 bytes)
    close(fused[:6], a.reshape(-1)) and close(fused[1024:1029], b)
    _, f64 = run_op("pd_op.coalesce_tensor_", [[a, b]], attrs, results=2,
                    out_types=["vec[tensor<3x2xf32>,tensor<5xf32>]", "tensor<128xf32>"])
    close(f64[64:69], b)             # 256-byte (GPU) chunks
    with pytest.raises(Exception, match="do not fill the fused output"):
        run_op("pd_op.coalesce_tensor_", [[a, b]], attrs, results=2,
               out_types=["vec[tensor<3x2xf32>,tensor<5xf32>]", "tensor<7xf32>"])


def test_fused_dropout_add_grad_uses_the_forward_mask():
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    out, so = run_op("pd_op.fused_dropout_add", [x, y, None, np.array([0.4])],
                     'is_test:false,mode:"upscale_in_train",seed:0,fix_seed:false', results=2)
    keep = (out - y) != 0
    close(out, np.where(keep, x / 0.6, 0) + y)
    g = RNG.standard_normal(x.shape)
    dx, dy = run_op("pd_op.fused_dropout_add_grad", [so, g, np.array([0.4])], 'is_test:false,mode:"upscale_in_train"',
                    results=2)
    close(dx, np.where(keep, g / 0.6, 0)) and close(dy, g)


FUSED = """{
    (%0) = "pd_op.data" () {dtype:float32,name:"x",place:Place(undefined:0),shape:[4,3],stop_gradient:[true]} : () -> @X@
    (%1) = "pd_op.data" () {dtype:float32,name:"dout",place:Place(undefined:0),shape:[4,2],stop_gradient:[true]} : () -> @D@
    (%2) = "pd_op.data" () {dtype:float32,name:"acc",place:Place(undefined:0),shape:[3,2],stop_gradient:[true]} : () -> @W@
    (%3, %4) = "pd_op.fused_linear_param_grad_add" (%0, %1, @ACC@, <<NULL VALUE>>) {has_bias:false,multi_precision:false,stop_gradient:[true,true]} : (@X@, @D@, @ACCT@, <<NULL TYPE>>) -> @P@, <<NULL TYPE>>
    (%5) = "pd_op.all_reduce" (%3) {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},chunk_id:-1},reduce_type:0,ring_id:12,stop_gradient:[true]} : (@P@) -> @W@
    (%6) = "pd_op.add" (%5, %2) {stop_gradient:[true]} : (@W@, @W@) -> @W@
    () = "builtin.shadow_output" (%6) {output_name:"dw"} : (@W@) -> 
}
"""
SERIAL_FUSED = """{
    (%0) = "pd_op.data" () {dtype:float32,name:"x",place:Place(undefined:0),shape:[4,3],stop_gradient:[true]} : () -> @X@
    (%1) = "pd_op.data" () {dtype:float32,name:"dout",place:Place(undefined:0),shape:[4,2],stop_gradient:[true]} : () -> @D@
    (%2) = "pd_op.data" () {dtype:float32,name:"acc",place:Place(undefined:0),shape:[3,2],stop_gradient:[true]} : () -> @W@
    (%3, %4) = "pd_op.fused_linear_param_grad_add" (%0, %1, %2, <<NULL VALUE>>) {has_bias:false,multi_precision:false,stop_gradient:[true,true]} : (@X@, @D@, @W@, <<NULL TYPE>>) -> @W@, <<NULL TYPE>>
    () = "builtin.shadow_output" (%3) {output_name:"dw"} : (@W@) -> 
}
"""
_TYPES = {"@X@": "pd_dist.tensor<4x3xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1]>",
          "@D@": "pd_dist.tensor<4x2xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1]>",
          "@W@": "pd_dist.tensor<3x2xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1]>",
          "@P@": "pd_dist.tensor<3x2xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], partial(0,SUM)>"}


def _fused(text: str, acc: bool = False) -> str:
    text = text.replace("@ACC@", "%2" if acc else "<<NULL VALUE>>").replace("@ACCT@", "@W@" if acc else "<<NULL TYPE>>")
    for k, v in _TYPES.items():
        text = text.replace(k, v)
    return text


def test_fused_family_mutation_is_caught_and_located():
    """Each rank's x^T dout (its rows) summed, the accumulator added once: the serial fused op's
    value.  Accumulating inside the fused op on rank 1 too (before the sum: counted twice) is
    caught and located on rank 1's program."""
    serial = parse(_fused(SERIAL_FUSED), "serial.ir")
    ranks = {r: parse(_fused(FUSED), f"r{r}.ir") for r in (0, 1)}
    assert verify_step(serial, ranks).status == 0, verify_step(serial, ranks).summary()
    ranks[1] = parse(_fused(FUSED, acc=True), "r1.ir")
    rep = verify_step(serial, ranks)
    assert rep.status == 1 and rep.divergence.filename in ("r0.ir", "r1.ir") and rep.divergence.op.loc, rep.summary()
