"""Every kernel of the training programs against numpy (forward) or central finite differences of
its forward kernel (backward), in float64.  Kernels run as the simulator runs them: one op of a
tiny program, through :func:`distc.analysis.simulate.simulate_serial`."""

from __future__ import annotations

import gzip
import pathlib

import numpy as np
import pytest

from distc import parse
from distc.analysis.simulate import KERNELS, NoKernel, lookup, simulate_serial

from kernel_util import RNG, close, numgrad, run_op  # noqa: E402


def test_kernel_table_has_the_training_ops():
    need = """embedding embedding_grad matmul matmul_grad mean mean_grad rsqrt rsqrt_grad sqrt multiply
    multiply_grad add add_grad subtract subtract_grad divide maximum softmax softmax_grad silu silu_grad
    triu cross_entropy_with_softmax cross_entropy_with_softmax_grad unsqueeze stack sum add_n
    squared_l2_norm transpose transpose_grad reshape reshape_grad relu relu_grad square square_grad
    scale full full_like full_int_array slice concat split split_with_num cast assign assign_out_ adamw_
    adam_ sgd_ momentum_ all_reduce all_gather reduce_scatter all_to_all broadcast c_allreduce_sum
    c_allgather c_reducescatter send_v2 recv_v2""".split()
    missing = [n for n in need if lookup("pd_op." + n) is None]
    assert not missing
    assert lookup("pd_op.add_") is KERNELS["pd_op.add"]  # in-place variants


def test_unknown_op_is_no_kernel():
    with pytest.raises(NoKernel, match="does not know this op"):
        run_op("pd_op.fancy_op", [np.ones(2)])


@pytest.mark.parametrize("name,ref", [
    ("rsqrt", lambda x: 1 / np.sqrt(x)), ("sqrt", np.sqrt), ("square", np.square), ("exp", np.exp),
    ("relu", lambda x: np.maximum(x, 0)), ("silu", lambda x: x / (1 + np.exp(-x))), ("tanh", np.tanh),
])
def test_unary_forward(name, ref):
    x = RNG.uniform(0.2, 2.0, (3, 4)) * (1 if name in ("rsqrt", "sqrt") else RNG.choice([-1, 1], (3, 4)))
    close(run_op(f"pd_op.{name}", [x])[0], ref(x), 1e-12)


@pytest.mark.parametrize("name,fwd,operands", [
    ("rsqrt", "rsqrt", "out"), ("sqrt", "sqrt", "out"), ("relu", "relu", "out"), ("square", "square", "x"),
    ("exp", "exp", "out"), ("tanh", "tanh", "out"), ("silu", "silu", "x,out"),
])
def test_unary_grad_finite_differences(name, fwd, operands):
    x = RNG.uniform(0.3, 2.0, (2, 3)) * (1 if name in ("rsqrt", "sqrt") else RNG.choice([-1, 1], (2, 3)))
    g = RNG.standard_normal((2, 3))
    out = run_op(f"pd_op.{fwd}", [x])[0]
    ins = {"out": [out, g], "x": [x, g], "x,out": [x, out, g]}[operands]
    got = run_op(f"pd_op.{name}_grad", ins)[0]
    close(got, numgrad(lambda v: run_op(f"pd_op.{fwd}", [v])[0], x, g), 1e-5)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1))])
def test_binary_grad_finite_differences(name, shapes):
    x, y = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    out = run_op(f"pd_op.{name}", [x, y])[0]
    close(out, {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}[name](x, y), 1e-12)
    g = RNG.standard_normal(out.shape)
    dx, dy = run_op(f"pd_op.{name}_grad", [x, y, g], "axis:-1", results=2)
    close(dx, numgrad(lambda v: run_op(f"pd_op.{name}", [v, y])[0], x, g), 1e-5)
    close(dy, numgrad(lambda v: run_op(f"pd_op.{name}", [x, v])[0], y, g), 1e-5)


def test_divide_and_its_grad():
    x, y = RNG.standard_normal((3, 4)), RNG.uniform(0.5, 2, (4,))
    out = run_op("pd_op.divide", [x, y])[0]
    close(out, x / y, 1e-12)
    g = RNG.standard_normal(out.shape)
    dx, dy = run_op("pd_op.divide_grad", [x, y, out, g], results=2)
    close(dx, numgrad(lambda v: run_op("pd_op.divide", [v, y])[0], x, g), 1e-5)
    close(dy, numgrad(lambda v: run_op("pd_op.divide", [x, v])[0], y, g), 1e-5)


@pytest.mark.parametrize("tx,ty,xs,ys", [
    (False, False, (2, 3, 4), (4, 5)), (True, False, (2, 4, 3), (4, 5)), (False, True, (3, 4), (5, 4)),
    (True, True, (2, 4, 3), (2, 5, 4)), (False, False, (4,), (4, 5)), (False, False, (3, 4), (4,)),
])
def test_matmul_and_grad(tx, ty, xs, ys):
    x, y = RNG.standard_normal(xs), RNG.standard_normal(ys)
    a = f"transpose_x:{str(tx).lower()},transpose_y:{str(ty).lower()}"
    out = run_op("pd_op.matmul", [x, y], a)[0]
    xe = np.swapaxes(x, -1, -2) if tx else x
    ye = np.swapaxes(y, -1, -2) if ty else y
    close(out, np.matmul(xe, ye), 1e-12)
    g = RNG.standard_normal(out.shape)
    dx, dy = run_op("pd_op.matmul_grad", [x, y, g], a, results=2)
    close(dx, numgrad(lambda v: run_op("pd_op.matmul", [v, y], a)[0], x, g), 1e-5)
    close(dy, numgrad(lambda v: run_op("pd_op.matmul", [x, v], a)[0], y, g), 1e-5)


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("axis", [[-1], [0, 2], []])
@pytest.mark.parametrize("op", ["mean", "sum"])
def test_reductions_and_grads(op, axis, keep):
    x = RNG.standard_normal((2, 3, 4))
    a = f"keepdim:{str(keep).lower()}"
    ax = np.array(axis, dtype=np.int64)
    out = run_op(f"pd_op.{op}", [x, ax], a)[0]
    ref = getattr(np, op)(x, axis=tuple(axis) if axis else None, keepdims=keep)
    close(out, ref, 1e-12)
    g = RNG.standard_normal(np.shape(out))
    got = run_op(f"pd_op.{op}_grad", [x, g, ax], a)[0]
    close(got, numgrad(lambda v: run_op(f"pd_op.{op}", [v, ax], a)[0], x, g), 1e-5)


def test_rmsnorm_as_mean_rsqrt_end_to_end():
    """RMSNorm the way the LLaMA programs write it: x * rsqrt(mean(x*x, -1, keepdim) + eps) * w."""
    x, w = RNG.standard_normal((2, 3, 8)), RNG.standard_normal(8)

    def fwd(x):
        sq = run_op("pd_op.multiply", [x, x])[0]
        m = run_op("pd_op.mean", [sq, np.array([-1])], "keepdim:true")[0]
        s = run_op("pd_op.scale", [m, np.array([1.0])], "bias:1e-06,bias_after_scale:true")[0]
        r = run_op("pd_op.rsqrt", [s])[0]
        return run_op("pd_op.multiply", [run_op("pd_op.multiply", [x, r])[0], w])[0]

    ref = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * w
    close(fwd(x), ref, 1e-12)


def test_softmax_and_grad():
    x = RNG.standard_normal((2, 3, 5))
    out = run_op("pd_op.softmax", [x], "axis:-1")[0]
    e = np.exp(x - x.max(-1, keepdims=True))
    close(out, e / e.sum(-1, keepdims=True), 1e-12)
    g = RNG.standard_normal(out.shape)
    got = run_op("pd_op.softmax_grad", [out, g], "axis:-1")[0]
    close(got, numgrad(lambda v: run_op("pd_op.softmax", [v], "axis:-1")[0], x, g), 1e-5)


def test_causal_mask_triu():
    x = np.ones((4, 4))
    close(run_op("pd_op.triu", [x], "diagonal:1")[0], np.triu(x, 1))
    close(run_op("pd_op.tril", [x], "diagonal:0")[0], np.tril(x))


def test_embedding_and_grad():
    w = RNG.standard_normal((10, 4))
    ids = RNG.integers(0, 10, (2, 3))
    close(run_op("pd_op.embedding", [ids, w], "padding_idx:-1")[0], w[ids], 0)
    g = RNG.standard_normal((2, 3, 4))
    dw = run_op("pd_op.embedding_grad", [ids, w, g], "padding_idx:-1")[0]
    close(dw, numgrad(lambda v: run_op("pd_op.embedding", [ids, v], "padding_idx:-1")[0], w, g), 1e-5)
    with pytest.raises(Exception, match="ids outside"):
        run_op("pd_op.embedding", [np.array([[10]]), w], "padding_idx:-1")


def test_cross_entropy_with_softmax_and_grad():
    x = RNG.standard_normal((2, 3, 6))
    lab = RNG.integers(0, 6, (2, 3, 1))
    a = "axis:-1,ignore_index:-100,numeric_stable_mode:true,soft_label:false,use_softmax:true"
    sm, loss = run_op("pd_op.cross_entropy_with_softmax", [x, lab], a, results=2)
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    close(sm, p, 1e-12)
    close(loss, -np.log(np.take_along_axis(p, lab, -1)), 1e-12)
    g = RNG.standard_normal(loss.shape)
    got = run_op("pd_op.cross_entropy_with_softmax_grad", [lab, sm, g], a)[0]
    close(got, numgrad(lambda v: run_op("pd_op.cross_entropy_with_softmax", [v, lab], a, results=2)[1], x, g), 1e-5)
    lab2 = lab.copy()
    lab2[0, 0, 0] = -100  # ignored: no loss, no gradient
    _, loss2 = run_op("pd_op.cross_entropy_with_softmax", [x, lab2], a, results=2)
    assert loss2[0, 0, 0] == 0


def test_shape_grads():
    x = RNG.standard_normal((2, 3, 4))
    t = run_op("pd_op.transpose", [x], "perm:[1,2,0]")[0]
    close(run_op("pd_op.transpose_grad", [t], "perm:[1,2,0]")[0], x, 0)
    g = RNG.standard_normal((6, 4))
    close(run_op("pd_op.reshape_grad", [x, g])[0], g.reshape(2, 3, 4), 0)


def test_vector_ops_and_norms():
    a, b = RNG.standard_normal((3,)), RNG.standard_normal((3,))
    close(run_op("pd_op.add_n", [[a, b]])[0], a + b, 1e-12)
    close(run_op("pd_op.stack", [[a, b]], "axis:0")[0], np.stack([a, b]), 0)
    close(run_op("pd_op.squared_l2_norm", [a])[0], [np.sum(a * a)], 1e-12)
    close(run_op("pd_op.unsqueeze", [a, np.array([0, -1])])[0].shape, (1, 3, 1), 0)


def test_clip_by_norm():
    """ClipGradByNorm(max_norm): scaled to the max norm when over it, unchanged under it."""
    g = RNG.standard_normal((3, 4)) * 3
    n = np.sqrt(np.sum(g * g))
    close(run_op("pd_op.clip_by_norm", [g], "max_norm:1")[0], g / n, 1e-12)
    close(run_op("pd_op.clip_by_norm", [g], f"max_norm:{n * 2}")[0], g, 0)


def test_global_norm_clip_chain():
    """ClipGradByGlobalNorm(1.0) as the programs write it: g * 1 / max(sqrt(sum ||g_i||^2), 1)."""
    gs = [RNG.standard_normal((3, 2)) * 2, RNG.standard_normal(4)]
    sq = [run_op("pd_op.squared_l2_norm", [g])[0] for g in gs]
    total = run_op("pd_op.sum", [run_op("pd_op.stack", [sq], "axis:0")[0], np.array([], dtype=np.int64)],
                   "keepdim:false")[0]
    norm = run_op("pd_op.sqrt", [total])[0]
    one = np.array([1.0])
    factor = run_op("pd_op.divide", [one, run_op("pd_op.maximum", [norm, one])[0]])[0]
    ref = 1 / max(np.sqrt(sum(np.sum(g * g) for g in gs)), 1.0)
    close(factor, [ref], 1e-12)


# ------------------------------------------------------------------------------ random initializers
INIT = pathlib.Path(__file__).parent / "data" / "verify" / "init_startup.ir.gz"  # printed by Paddle 3.3.1


def _init_programs(std_rank1: str | None = None):
    from distc.ir.dist import ProcessMesh, TensorDistAttr

    text = gzip.decompress(INIT.read_bytes()).decode()
    mesh = ProcessMesh((2,), (0, 1))
    layouts = {"linear_0.w_0": TensorDistAttr(mesh, (-1, 0), ()), "linear_1.w_0": TensorDistAttr(mesh, (0, -1), ())}
    local = text.replace("tensor<8x6xf32>", "tensor<8x3xf32>").replace("tensor<6x3xf32>", "tensor<3x3xf32>")
    ranks = {r: parse(local if std_rank1 is None or r == 0 else local.replace("std:0.02", std_rank1), f"r{r}.ir")
             for r in (0, 1)}
    return parse(text, "serial.ir"), ranks, layouts


def test_random_initializers_are_seeded_alike_and_cut_by_layout():
    from distc.analysis.simulate.proof import verify_startup

    serial, ranks, layouts = _init_programs()
    rep = verify_startup(serial, ranks, layouts, seed=4)
    assert rep.status == 0, rep.summary()
    assert rep.tensors == 12 and rep.max_abs == 0  # 6 parameters on 2 ranks, bit-equal pieces
    vals = simulate_serial(serial, {}, seed=4)
    first = {op.name: op for op in reversed(serial.ops)}
    w0, w1, w2 = (vals.get_value(first[n].results[0])
                  for n in ("pd_op.uniform", "pd_op.gaussian", "pd_op.truncated_gaussian_random"))
    assert w0.shape == (8, 6) and np.abs(w0).max() <= 0.654654 and np.std(w0) > 0.2   # uniform(-a, a)
    assert w1.shape == (6, 3) and 0.005 < np.std(w1) < 0.05                            # normal(0, 0.02)
    assert w2.shape == (3, 2) and np.abs(w2).max() <= 2.0                              # truncated
    other = simulate_serial(serial, {}, seed=5)
    assert not np.array_equal(other.get_value(first["pd_op.uniform"].results[0]), w0)


def test_random_initializer_mutation_is_caught():
    from distc.analysis.simulate.proof import verify_startup

    serial, ranks, layouts = _init_programs(std_rank1="std:0.03")
    rep = verify_startup(serial, ranks, layouts)
    assert rep.status == 1 and rep.divergence.rank == 1 and rep.divergence.value == "linear_1.w_0"


def test_comparisons_where_and_constants():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4,))
    for name, ref in (("less_than", np.less), ("greater_equal", np.greater_equal), ("equal", np.equal)):
        np.testing.assert_array_equal(run_op(f"pd_op.{name}", [a, b])[0], ref(a, b))
    np.testing.assert_array_equal(run_op("pd_op.where", [a > 0, a, np.zeros(4)])[0], np.where(a > 0, a, 0))
    out = run_op("pd_op.assign_value_", [np.zeros((2, 2))],
                 "dtype:(pd_op.DataType)int64,shape:[(Int32)2,(Int32)2],values:[(Double)3,(Double)1,(Double)4,(Double)1]")[0]
    np.testing.assert_array_equal(out, [[3, 1], [4, 1]])
    assert out.dtype == np.int64
