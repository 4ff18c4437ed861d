"""Convolution and pooling (forward and backward), Paddle's conventions: ``conv2d`` /
``depthwise_conv2d`` (input, filter [O, C/groups, KH, KW]) with ``strides``, ``paddings`` (2 or 4
numbers, or ``padding_algorithm`` SAME/VALID), ``dilations``, ``groups``, ``data_format``
NCHW/NHWC; ``pool2d`` (x, kernel_size) max or avg, ``exclusive`` averages over the unpadded
elements, ``ceil_mode``, ``global_pooling``, ``adaptive`` (window i covers
[floor(i*H/OH), ceil((i+1)*H/OH))).  A max pool's gradient goes to the first maximum of each
window (phi's MaxPool2dGradFunctor)."""

from __future__ import annotations

import math

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, operand_or_attr


def _nchw(op, x):
    return np.moveaxis(x, -1, 1) if str(attr(op, "data_format", "NCHW")) == "NHWC" else x


def _back(op, y):
    return np.moveaxis(y, 1, -1) if str(attr(op, "data_format", "NCHW")) == "NHWC" else y


def _pads(op, hw, k, s, d) -> list[tuple[int, int]]:
    """(before, after) padding of H and W."""
    algo = str(attr(op, "padding_algorithm", "EXPLICIT"))
    if algo == "VALID":
        return [(0, 0), (0, 0)]
    if algo == "SAME":
        out = []
        for n, kk, ss, dd in zip(hw, k, s, d):
            o = -(-n // ss)
            total = max((o - 1) * ss + (kk - 1) * dd + 1 - n, 0)
            out.append((total // 2, total - total // 2))
        return out
    p = int_list(attr(op, "paddings", [0, 0]) or [0, 0])
    if len(p) == 2:
        return [(p[0], p[0]), (p[1], p[1])]
    if len(p) == 4:
        return [(p[0], p[1]), (p[2], p[3])]
    raise ValueError(f"paddings {p}")


def _geometry(op, x, w):
    s = int_list(attr(op, "strides", [1, 1]))
    d = int_list(attr(op, "dilations", [1, 1]) or [1, 1])
    k = list(w.shape[2:])
    pads = _pads(op, x.shape[2:], k, s, d)
    out = [(x.shape[2 + i] + pads[i][0] + pads[i][1] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(2)]
    return s, d, k, pads, out


def _windows(xp, k, s, d, out):
    """[N, C, KH, KW, OH, OW] views of the padded input."""
    n, c = xp.shape[:2]
    res = np.empty((n, c, k[0], k[1], out[0], out[1]), dtype=np.float64)
    for i in range(k[0]):
        for j in range(k[1]):
            res[:, :, i, j] = xp[:, :, i * d[0]: i * d[0] + s[0] * (out[0] - 1) + 1: s[0],
                                 j * d[1]: j * d[1] + s[1] * (out[1] - 1) + 1: s[1]]
    return res


def _groups(op, x, w):
    g = int(attr(op, "groups", 1) or 1)
    if op.name.split(".")[-1].startswith("depthwise"):
        g = x.shape[1]
    return g


@kernel("pd_op.conv2d", "pd_op.depthwise_conv2d")
def conv2d(rt, op, vals):
    x, w = _nchw(op, np.asarray(vals[0], dtype=np.float64)), np.asarray(vals[1], dtype=np.float64)
    g = _groups(op, x, w)
    if x.shape[1] != w.shape[1] * g:
        raise rt.err(op, f"input channels {x.shape[1]} do not match the filter {list(w.shape)} with {g} groups")
    s, d, k, pads, out = _geometry(op, x, w)
    xp = np.pad(x, [(0, 0), (0, 0), pads[0], pads[1]])
    cols = _windows(xp, k, s, d, out)  # N, C, KH, KW, OH, OW
    n, cg, o = x.shape[0], w.shape[1], w.shape[0]
    cols = cols.reshape(n, g, cg, k[0], k[1], out[0], out[1])
    wg = w.reshape(g, o // g, cg, k[0], k[1])
    y = np.einsum("ngckluv,gockl->ngouv", cols, wg).reshape(n, o, out[0], out[1])
    return [_back(op, y)]


@kernel("pd_op.conv2d_grad", "pd_op.depthwise_conv2d_grad")
def conv2d_grad(rt, op, vals):  # (input, filter, out_grad) -> (input_grad, filter_grad)
    x, w = _nchw(op, np.asarray(vals[0], dtype=np.float64)), np.asarray(vals[1], dtype=np.float64)
    gy = _nchw(op, np.asarray(vals[2], dtype=np.float64))
    g = _groups(op, x, w)
    s, d, k, pads, out = _geometry(op, x, w)
    xp = np.pad(x, [(0, 0), (0, 0), pads[0], pads[1]])
    n, cg, o = x.shape[0], w.shape[1], w.shape[0]
    cols = _windows(xp, k, s, d, out).reshape(n, g, cg, k[0], k[1], out[0], out[1])
    gyg = gy.reshape(n, g, o // g, out[0], out[1])
    dw = np.einsum("ngckluv,ngouv->gockl", cols, gyg).reshape(w.shape)
    dcols = np.einsum("gockl,ngouv->ngckluv", w.reshape(g, o // g, cg, k[0], k[1]), gyg)
    dcols = dcols.reshape(n, g * cg, k[0], k[1], out[0], out[1])
    dxp = np.zeros_like(xp)
    for i in range(k[0]):
        for j in range(k[1]):
            dxp[:, :, i * d[0]: i * d[0] + s[0] * (out[0] - 1) + 1: s[0],
                j * d[1]: j * d[1] + s[1] * (out[1] - 1) + 1: s[1]] += dcols[:, :, i, j]
    h, wd = x.shape[2], x.shape[3]
    dx = dxp[:, :, pads[0][0]: pads[0][0] + h, pads[1][0]: pads[1][0] + wd]
    return [_back(op, dx), dw]


# ------------------------------------------------------------------------------------ pooling
def _pool_windows(op, vals, x):
    """For each output position: (oh, ow, (h0, h1), (w0, w1), count for an exclusive average)."""
    h, w = x.shape[2], x.shape[3]
    ks = operand_or_attr(vals, 1, op, "kernel_size", [1, 1], conv=int_list)
    if len(ks) == 1:
        ks = ks * 2
    if bool(attr(op, "global_pooling", False)):
        ks = [h, w]
    if bool(attr(op, "adaptive", False)):
        oh, ow = ks
        for i in range(oh):
            for j in range(ow):
                hs = (i * h // oh, -(-(i + 1) * h // oh))
                ws = (j * w // ow, -(-(j + 1) * w // ow))
                yield i, j, hs, ws, (hs[1] - hs[0]) * (ws[1] - ws[0]), (hs[1] - hs[0]) * (ws[1] - ws[0])
        return
    s = int_list(attr(op, "strides", [1, 1]))
    pads = [(0, 0), (0, 0)] if bool(attr(op, "global_pooling", False)) else _pads(op, (h, w), ks, s, [1, 1])
    ceil = bool(attr(op, "ceil_mode", False))
    outs = []
    for n, k, st, (pb, pa) in zip((h, w), ks, s, pads):
        num = n + pb + pa - k
        outs.append((-(-num // st) if ceil else num // st) + 1)
    for i in range(outs[0]):
        for j in range(outs[1]):
            h0, w0 = i * s[0] - pads[0][0], j * s[1] - pads[1][0]
            h1, w1 = min(h0 + ks[0], h + pads[0][1]), min(w0 + ks[1], w + pads[1][1])
            full = (h1 - h0) * (w1 - w0)
            hs, ws = (max(h0, 0), min(h1, h)), (max(w0, 0), min(w1, w))
            yield i, j, hs, ws, (hs[1] - hs[0]) * (ws[1] - ws[0]), full


def _out_shape(op, vals, x):
    last = None
    for last in _pool_windows(op, vals, x):
        pass
    return (last[0] + 1, last[1] + 1) if last else (0, 0)


@kernel("pd_op.pool2d")
def pool2d(rt, op, vals):
    x = _nchw(op, np.asarray(vals[0], dtype=np.float64))
    oh, ow = _out_shape(op, vals, x)
    y = np.zeros(x.shape[:2] + (oh, ow))
    is_max = str(attr(op, "pooling_type", "max")) == "max"
    excl = bool(attr(op, "exclusive", True))
    for i, j, hs, ws, cnt, full in _pool_windows(op, vals, x):
        win = x[:, :, hs[0]:hs[1], ws[0]:ws[1]]
        if is_max:
            y[:, :, i, j] = win.max(axis=(2, 3)) if win.size else -math.inf
        else:
            y[:, :, i, j] = win.sum(axis=(2, 3)) / max(cnt if excl else full, 1)
    return [_back(op, y)]


@kernel("pd_op.pool2d_grad")
def pool2d_grad(rt, op, vals):  # (x, out, out_grad, kernel_size)
    x = _nchw(op, np.asarray(vals[0], dtype=np.float64))
    gy = _nchw(op, np.asarray(vals[2], dtype=np.float64))
    kvals = [vals[0], vals[3] if len(vals) > 3 else None]
    dx = np.zeros_like(x)
    is_max = str(attr(op, "pooling_type", "max")) == "max"
    excl = bool(attr(op, "exclusive", True))
    n, c = x.shape[:2]
    for i, j, hs, ws, cnt, full in _pool_windows(op, kvals, x):
        if hs[1] <= hs[0] or ws[1] <= ws[0]:
            continue
        if is_max:
            win = x[:, :, hs[0]:hs[1], ws[0]:ws[1]].reshape(n, c, -1)
            first = win.argmax(axis=2)
            ww = ws[1] - ws[0]
            a, b = np.indices((n, c))
            np.add.at(dx, (a, b, hs[0] + first // ww, ws[0] + first % ww), gy[:, :, i, j])
        else:
            dx[:, :, hs[0]:hs[1], ws[0]:ws[1]] += (gy[:, :, i, j] / max(cnt if excl else full, 1))[:, :, None, None]
    return [_back(op, dx)]
