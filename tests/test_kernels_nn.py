"""Kernels of GPT-2, ViT, LLaMA and ResNet blocks (issue 17) against numpy (forward) and central
finite differences of their forward kernels (backward): layer_norm, batch_norm, rms_norm, gelu,
swiglu, pow and the activation table, conv2d, pool2d, log_softmax, logsumexp, clip."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernel_util import RNG, close, numgrad, run_op


def _fd_check(name, fwd_inputs, attrs, grad_name, grad_inputs_fn, wrt, results=1, grad_results=1, out=0, tol=1e-5):
    """The gradient op's result ``wrt`` equals the finite difference of forward result ``out``."""
    ys = run_op(name, fwd_inputs, attrs, results=results)
    g = RNG.standard_normal(np.shape(ys[out]))
    analytic = run_op(grad_name, grad_inputs_fn(ys, g), attrs, results=grad_results)
    for k, i in wrt:
        def f(v, i=i):
            ins = list(fwd_inputs)
            ins[i] = v
            return run_op(name, ins, attrs, results=results)[out]
        close(analytic[k], numgrad(f, fwd_inputs[i], g), tol)


# ------------------------------------------------------------------------------------ norms
def test_layer_norm_forward_and_grad():
    x, s, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal(4), RNG.standard_normal(4)
    y, mean, var = run_op("pd_op.layer_norm", [x, s, b], "begin_norm_axis:2,epsilon:1e-05", results=3)
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * s + b
    close(y, ref)
    close(mean, x.mean(-1))
    close(var, x.var(-1))
    assert mean.shape == (2, 3)
    _fd_check("pd_op.layer_norm", [x, s, b], "begin_norm_axis:2,epsilon:1e-05", "pd_op.layer_norm_grad",
              lambda ys, g: [x, s, b, ys[1], ys[2], g], [(0, 0), (1, 1), (2, 2)], results=3, grad_results=3)


def test_layer_norm_over_two_axes_without_scale():
    x = RNG.standard_normal((3, 2, 5))
    y, _, _ = run_op("pd_op.layer_norm", [x, None, None], "begin_norm_axis:1,epsilon:1e-05", results=3)
    flat = x.reshape(3, -1)
    close(y, ((flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)).reshape(x.shape))
    ys = run_op("pd_op.layer_norm", [x, None, None], "begin_norm_axis:1,epsilon:1e-05", results=3)
    g = RNG.standard_normal(x.shape)
    dx, ds, db = run_op("pd_op.layer_norm_grad", [x, None, None, ys[1], ys[2], g], "begin_norm_axis:1,epsilon:1e-05",
                        results=3)
    assert ds is None and db is None
    close(dx, numgrad(lambda v: run_op("pd_op.layer_norm", [v, None, None], "begin_norm_axis:1,epsilon:1e-05",
                                       results=3)[0], x, g), 1e-5)


BN = "data_format:\"NCHW\",epsilon:1e-05,is_test:false,momentum:0.9,use_global_stats:false,trainable_statistics:false"


def test_batch_norm_training_statistics_and_grad():
    x = RNG.standard_normal((4, 3, 2, 2))
    rm, rv, s, b = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3), RNG.standard_normal(3), RNG.standard_normal(3)
    out, mo, vo, sm, sv, _ = run_op("pd_op.batch_norm_", [x, rm, rv, s, b], BN, results=6)
    mu, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    close(out, (x - mu[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * s[:, None, None] + b[:, None, None])
    close(mo, 0.9 * rm + 0.1 * mu)          # Paddle 3.3.1 CPU: biased variance in the running average
    close(vo, 0.9 * rv + 0.1 * var)
    close(sm, mu)
    close(sv, 1 / np.sqrt(var + 1e-5))      # saved_variance is the inverse standard deviation
    _fd_check("pd_op.batch_norm", [x, rm, rv, s, b], BN, "pd_op.batch_norm_grad",
              lambda ys, g: [x, s, b, ys[1], ys[2], ys[3], ys[4], ys[5], g], [(0, 0), (1, 3), (2, 4)],
              results=6, grad_results=3)


def test_batch_norm_inference_and_nhwc():
    x = RNG.standard_normal((2, 2, 2, 3))
    rm, rv, s, b = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3), RNG.standard_normal(3), RNG.standard_normal(3)
    attrs = BN.replace('"NCHW"', '"NHWC"').replace("is_test:false", "is_test:true")
    out = run_op("pd_op.batch_norm", [x, rm, rv, s, b], attrs, results=6)[0]
    close(out, (x - rm) / np.sqrt(rv + 1e-5) * s + b)
    _fd_check("pd_op.batch_norm", [x, rm, rv, s, b], attrs, "pd_op.batch_norm_grad",
              lambda ys, g: [x, s, b, rm, rv, ys[3], ys[4], ys[5], g], [(0, 0), (1, 3), (2, 4)],
              results=6, grad_results=3)


def test_rms_norm_forward_and_grad():
    x, s = RNG.standard_normal((3, 5)), RNG.standard_normal(5)
    y, inv = run_op("pd_op.rms_norm", [x, s], "begin_norm_axis:1,epsilon:1e-06", results=2)
    close(y, x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * s)
    _fd_check("pd_op.rms_norm", [x, s], "begin_norm_axis:1,epsilon:1e-06", "pd_op.rms_norm_grad",
              lambda ys, g: [x, s, ys[1], g], [(0, 0), (1, 1)], results=2, grad_results=2)


# ------------------------------------------------------------------------------------ activations
def test_gelu_exact_and_tanh_forms_and_grads():
    x = RNG.standard_normal((3, 4)) * 2
    exact = run_op("pd_op.gelu", [x], "approximate:false")[0]
    close(exact, 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))
    tanh = run_op("pd_op.gelu", [x], "approximate:true")[0]
    close(tanh, 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))
    assert np.abs(exact - tanh).max() > 1e-5  # the two forms differ: the attribute matters
    for a in ("approximate:false", "approximate:true"):
        _fd_check("pd_op.gelu", [x], a, "pd_op.gelu_grad", lambda ys, g: [x, g], [(0, 0)])


def test_swiglu_two_operands_and_halves():
    x, y = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    silu = x / (1 + np.exp(-x))
    close(run_op("pd_op.swiglu", [x, y])[0], silu * y)
    _fd_check("pd_op.swiglu", [x, y], "", "pd_op.swiglu_grad", lambda ys, g: [x, y, g], [(0, 0), (1, 1)],
              grad_results=2)
    xy = np.concatenate([x, y], -1)
    close(run_op("pd_op.swiglu", [xy, None])[0], silu * y)
    _fd_check("pd_op.swiglu", [xy, None], "", "pd_op.swiglu_grad", lambda ys, g: [xy, None, g], [(0, 0)],
              grad_results=2)


@pytest.mark.parametrize("name,attrs,lo,hi", [
    ("leaky_relu", "negative_slope:0.1", -2, 2), ("elu", "alpha:0.7", -2, 2), ("hardswish", "", -5, 5),
    ("hardsigmoid", "slope:0.2,offset:0.5", -4, 4), ("softplus", "beta:1.5,threshold:20.0", -3, 3),
    ("mish", "", -3, 3), ("erf", "", -2, 2), ("log1p", "", 0.1, 2), ("logsigmoid", "", -3, 3),
    ("softsign", "", -3, 3), ("relu6", "", -2, 8), ("atan", "", -3, 3),
])
def test_activation_table_grads(name, attrs, lo, hi):
    x = RNG.uniform(lo, hi, (3, 4))
    x = np.where(np.abs(x) < 0.05, 0.3, x)  # away from kinks
    for k in (-3, 3, 0, 6):
        x = np.where(np.abs(x - k) < 0.05, k + 0.3, x)
    _fd_check(f"pd_op.{name}", [x], attrs, f"pd_op.{name}_grad", lambda ys, g: [x, g], [(0, 0)])


def test_activation_forward_values():
    x = np.array([-2.0, -0.5, 0.5, 4.0])
    close(run_op("pd_op.leaky_relu", [x], "negative_slope:0.1")[0], np.where(x > 0, x, 0.1 * x))
    close(run_op("pd_op.hardswish", [x])[0], x * np.clip(x + 3, 0, 6) / 6)
    close(run_op("pd_op.relu6", [x])[0], np.clip(x, 0, 6))
    close(run_op("pd_op.softplus", [x], "beta:1.0,threshold:20.0")[0], np.log1p(np.exp(x)))


def test_pow_and_elementwise_pow_grads():
    x = RNG.uniform(0.5, 2, (2, 3))
    close(run_op("pd_op.pow", [x], "y:3.0")[0], x ** 3)
    _fd_check("pd_op.pow", [x], "y:2.5", "pd_op.pow_grad", lambda ys, g: [x, g], [(0, 0)])
    y = RNG.uniform(0.5, 2, (3,))
    _fd_check("pd_op.elementwise_pow", [x, y], "", "pd_op.elementwise_pow_grad", lambda ys, g: [x, y, g],
              [(0, 0), (1, 1)], grad_results=2)


def test_log_softmax_logsumexp_clip():
    x = RNG.standard_normal((3, 5))
    ls = run_op("pd_op.log_softmax", [x], "axis:-1")[0]
    close(ls, x - np.log(np.exp(x).sum(-1, keepdims=True)))
    _fd_check("pd_op.log_softmax", [x], "axis:-1", "pd_op.log_softmax_grad", lambda ys, g: [ys[0], g], [(0, 0)])
    lse = run_op("pd_op.logsumexp", [x], "axis:[1],keepdim:false,reduce_all:false")[0]
    close(lse, np.log(np.exp(x).sum(1)))
    _fd_check("pd_op.logsumexp", [x], "axis:[1],keepdim:false,reduce_all:false", "pd_op.logsumexp_grad",
              lambda ys, g: [x, ys[0], g], [(0, 0)])
    c = run_op("pd_op.clip", [x, np.array([-0.5]), np.array([0.5])])[0]
    close(c, np.clip(x, -0.5, 0.5))
    g = RNG.standard_normal(x.shape)
    close(run_op("pd_op.clip_grad", [x, g, np.array([-0.5]), np.array([0.5])])[0],
          np.where(np.abs(x) <= 0.5, g, 0))


# ------------------------------------------------------------------------------------ conv, pool
def naive_conv(x, w, stride, pad, dil, groups):
    """NCHW, pad = ((t, b), (l, r)): a loop over every output element."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), pad[0], pad[1]])
    oh = (h + sum(pad[0]) - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + sum(pad[1]) - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for b in range(n):
        for oc in range(o):
            gi = oc // og
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for ci in range(cg):
                        for u in range(kh):
                            for v in range(kw):
                                acc += xp[b, gi * cg + ci, i * stride[0] + u * dil[0], j * stride[1] + v * dil[1]] * \
                                    w[oc, ci, u, v]
                    y[b, oc, i, j] = acc
    return y


CONV_CASES = [
    # x shape, w shape, attrs, (stride, pad, dil, groups)
    ((2, 3, 5, 5), (4, 3, 3, 3), 'strides:[1,1],paddings:[1,1],dilations:[1,1],groups:1,padding_algorithm:"EXPLICIT",data_format:"NCHW"',
     ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)),
    ((1, 4, 6, 5), (4, 2, 2, 3), 'strides:[2,1],paddings:[0,1,1,0],dilations:[1,2],groups:2,padding_algorithm:"EXPLICIT",data_format:"NCHW"',
     ((2, 1), ((0, 1), (1, 0)), (1, 2), 2)),
    ((2, 3, 8, 8), (5, 3, 4, 4), 'strides:[4,4],paddings:[0,0],dilations:[1,1],groups:1,padding_algorithm:"EXPLICIT",data_format:"NCHW"',
     ((4, 4), ((0, 0), (0, 0)), (1, 1), 1)),
]


@pytest.mark.parametrize("xs,ws,attrs,geo", CONV_CASES)
def test_conv2d_against_loops_and_grads(xs, ws, attrs, geo):
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    y = run_op("pd_op.conv2d", [x, w], attrs)[0]
    close(y, naive_conv(x, w, *geo))
    _fd_check("pd_op.conv2d", [x, w], attrs, "pd_op.conv2d_grad", lambda ys, g: [x, w, g], [(0, 0), (1, 1)],
              grad_results=2)


def test_depthwise_conv2d_same_padding_and_nhwc():
    x, w = RNG.standard_normal((1, 3, 5, 5)), RNG.standard_normal((3, 1, 3, 3))
    attrs = 'strides:[1,1],paddings:[0,0],dilations:[1,1],groups:3,padding_algorithm:"SAME",data_format:"NCHW"'
    y = run_op("pd_op.depthwise_conv2d", [x, w], attrs)[0]
    close(y, naive_conv(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 3))
    _fd_check("pd_op.depthwise_conv2d", [x, w], attrs, "pd_op.depthwise_conv2d_grad", lambda ys, g: [x, w, g],
              [(0, 0), (1, 1)], grad_results=2)
    xh = np.moveaxis(x, 1, -1)
    yh = run_op("pd_op.depthwise_conv2d", [xh, w], attrs.replace('"NCHW"', '"NHWC"'))[0]
    close(yh, np.moveaxis(y, 1, -1))


def naive_pool(x, k, s, pad, kind, exclusive):
    n, c, h, w = x.shape
    oh, ow = (h + sum(pad[0]) - k[0]) // s[0] + 1, (w + sum(pad[1]) - k[1]) // s[1] + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - pad[0][0], j * s[1] - pad[1][0]
            hs, ws = slice(max(h0, 0), min(h0 + k[0], h)), slice(max(w0, 0), min(w0 + k[1], w))
            win = x[:, :, hs, ws]
            if kind == "max":
                y[:, :, i, j] = win.max((2, 3))
            else:
                y[:, :, i, j] = win.sum((2, 3)) / (win.shape[2] * win.shape[3] if exclusive else k[0] * k[1])
    return y


POOL = 'ceil_mode:false,data_format:"NCHW",exclusive:{ex},global_pooling:false,adaptive:{ad},padding_algorithm:"EXPLICIT",paddings:{p},pooling_type:"{kind}",strides:{s}'


@pytest.mark.parametrize("kind,ex,p,s,pads", [
    ("max", "true", "[0,0]", "[2,2]", ((0, 0), (0, 0))), ("avg", "true", "[1,1]", "[2,2]", ((1, 1), (1, 1))),
    ("avg", "false", "[1,1]", "[1,1]", ((1, 1), (1, 1))), ("max", "true", "[1,1]", "[1,2]", ((1, 1), (1, 1))),
])
def test_pool2d_against_loops_and_grads(kind, ex, p, s, pads):
    x = RNG.standard_normal((2, 3, 6, 5))
    attrs = POOL.format(ex=ex, ad="false", p=p, kind=kind, s=s)
    ks = np.array([3, 2])
    y = run_op("pd_op.pool2d", [x, ks], attrs)[0]
    close(y, naive_pool(x, (3, 2), [int(v) for v in s.strip("[]").split(",")], pads, kind, ex == "true"))
    _fd_check("pd_op.pool2d", [x, ks], attrs, "pd_op.pool2d_grad", lambda ys, g: [x, ys[0], g, ks], [(0, 0)])


def test_adaptive_and_global_pool():
    x = RNG.standard_normal((2, 3, 5, 4))
    attrs = POOL.format(ex="true", ad="true", p="[0,0]", kind="avg", s="[1,1]")
    y = run_op("pd_op.pool2d", [x, np.array([2, 3])], attrs)[0]
    assert y.shape == (2, 3, 2, 3)
    close(y[:, :, 0, 0], x[:, :, 0:3, 0:2].mean((2, 3)))   # rows [0, ceil(5/2)), cols [0, ceil(4/3))
    close(y[:, :, 1, 2], x[:, :, 2:5, 2:4].mean((2, 3)))
    _fd_check("pd_op.pool2d", [x, np.array([2, 3])], attrs, "pd_op.pool2d_grad",
              lambda ys, g: [x, ys[0], g, np.array([2, 3])], [(0, 0)])
    glob = POOL.format(ex="true", ad="false", p="[0,0]", kind="max", s="[1,1]").replace(
        "global_pooling:false", "global_pooling:true")
    close(run_op("pd_op.pool2d", [x, np.array([1, 1])], glob)[0], x.max((2, 3), keepdims=True))
