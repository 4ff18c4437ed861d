"""Reductions, batched products, einsum, small math and two losses (issue 17): forward against
numpy, backward against central finite differences of the forward kernel."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_util import RNG, close, numgrad, run_op


def fd(name, inputs, attrs, grad_name, grad_inputs, k=0, wrt=0, tol=1e-5, grad_results=1):
    y = run_op(name, inputs, attrs)[0]
    g = RNG.standard_normal(np.shape(y))
    got = run_op(grad_name, grad_inputs(y, g), attrs, results=grad_results)[k]

    def f(v):
        ins = list(inputs)
        ins[wrt] = v
        return run_op(name, ins, attrs)[0]
    close(got, numgrad(f, inputs[wrt], g), tol)


@pytest.mark.parametrize("name,ref", [("max", np.max), ("min", np.min), ("amax", np.max), ("amin", np.min),
                                      ("prod", np.prod)])
@pytest.mark.parametrize("axis,keep", [([1], False), ([0, 2], True), ([], False)])
def test_reductions_and_grads(name, ref, axis, keep):
    x = RNG.uniform(0.5, 1.5, (2, 3, 4)) * RNG.choice([-1, 1], (2, 3, 4))
    ax = np.array(axis, dtype=np.int64)
    attrs = f"keepdim:{str(keep).lower()},reduce_all:false"
    close(run_op(f"pd_op.{name}", [x, ax], attrs)[0], ref(x, axis=tuple(axis) or None, keepdims=keep))
    fd(f"pd_op.{name}", [x, ax], attrs, f"pd_op.{name}_grad", lambda y, g: [x, y, g, ax])


def test_all_any_mean_all_bmm():
    b = RNG.standard_normal((3, 4)) > 0
    np.testing.assert_array_equal(run_op("pd_op.all", [b, np.array([1])], "keepdim:false")[0], b.all(1))
    np.testing.assert_array_equal(run_op("pd_op.any", [b, np.array([0])], "keepdim:true")[0], b.any(0, keepdims=True))
    x = RNG.standard_normal((3, 4))
    close(run_op("pd_op.mean_all", [x])[0], x.mean())
    fd("pd_op.mean_all", [x], "", "pd_op.mean_all_grad", lambda y, g: [x, g])
    p, q = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    close(run_op("pd_op.bmm", [p, q])[0], p @ q)
    fd("pd_op.bmm", [p, q], "", "pd_op.bmm_grad", lambda y, g: [p, q, g], grad_results=2)
    fd("pd_op.bmm", [p, q], "", "pd_op.bmm_grad", lambda y, g: [p, q, g], k=1, wrt=1, grad_results=2)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
                                       ("i,j->ij", [(3,), (4,)]), ("ij->j", [(3, 4)]), ("ij,ij->i", [(2, 3), (2, 3)])])
def test_einsum_and_grad(eq, shapes):
    xs = [RNG.standard_normal(s) for s in shapes]
    attrs = f'equation:"{eq}"'
    out = run_op("pd_op.einsum", [xs], attrs, results=3)[0]
    close(out, np.einsum(eq, *xs))
    g = RNG.standard_normal(out.shape)
    grads = run_op("pd_op.einsum_grad", [xs, xs, g], attrs)[0]
    for i in range(len(xs)):
        def f(v, i=i):
            ys = list(xs)
            ys[i] = v
            return run_op("pd_op.einsum", [ys], attrs, results=3)[0]
        close(grads[i], numgrad(f, xs[i], g), 1e-5)


def test_small_math_and_shape_helpers():
    x = RNG.standard_normal((3, 4)) * 3
    for name, ref in (("floor", np.floor), ("ceil", np.ceil), ("sign", np.sign), ("expm1", np.expm1)):
        close(run_op(f"pd_op.{name}", [x])[0], ref(x))
    fd("pd_op.expm1", [x], "", "pd_op.expm1_grad", lambda y, g: [y, g])
    a, b = np.array([7, -7, 9]), np.array([2, 2, 4])
    np.testing.assert_array_equal(run_op("pd_op.floor_divide", [a, b])[0], a // b)
    np.testing.assert_array_equal(run_op("pd_op.remainder", [a, b])[0], a % b)
    np.testing.assert_array_equal(run_op("pd_op.bitwise_and", [a, b])[0], a & b)
    z = np.array([1.0, np.inf, np.nan])
    np.testing.assert_array_equal(run_op("pd_op.isfinite", [z])[0], np.isfinite(z))
    assert run_op("pd_op.numel", [x])[0] == 12
    close(run_op("pd_op.increment", [np.array([3.0])], "value:2.0")[0], [5.0])
    close(run_op("pd_op.full_with_tensor", [np.array(1.5), np.array([2, 2])], "dtype:float32")[0], np.full((2, 2), 1.5))
    close(run_op("pd_op.flip", [x], "axis:[1]")[0], x[:, ::-1])
    parts = run_op("pd_op.unstack", [x], "axis:1")[0]
    close(run_op("pd_op.unstack_grad", [parts], "axis:1")[0], x)
    close(run_op("pd_op.split_grad", [[x[:, :1], x[:, 1:]], np.array(1)])[0], x)


def test_sigmoid_cross_entropy_and_bce():
    x, y = RNG.standard_normal((3, 4)), (RNG.standard_normal((3, 4)) > 0).astype(float)
    loss = run_op("pd_op.sigmoid_cross_entropy_with_logits", [x, y, None], "ignore_index:-100,normalize:false")[0]
    close(loss, -(y * np.log(1 / (1 + np.exp(-x))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-x)))))
    fd("pd_op.sigmoid_cross_entropy_with_logits", [x, y, None], "ignore_index:-100,normalize:false",
       "pd_op.sigmoid_cross_entropy_with_logits_grad", lambda o, g: [x, y, None, g])
    pw = RNG.uniform(0.5, 2, (4,))
    fd("pd_op.sigmoid_cross_entropy_with_logits", [x, y, pw], "ignore_index:-100,normalize:false",
       "pd_op.sigmoid_cross_entropy_with_logits_grad", lambda o, g: [x, y, pw, g])
    p = RNG.uniform(0.1, 0.9, (3, 4))
    close(run_op("pd_op.bce_loss", [p, y])[0], -(y * np.log(p) + (1 - y) * np.log(1 - p)))
    fd("pd_op.bce_loss", [p, y], "", "pd_op.bce_loss_grad", lambda o, g: [p, y, g])
