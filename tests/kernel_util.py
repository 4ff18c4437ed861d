"""Helpers of the kernel tests: run one op of a tiny program through the serial simulator, central
finite differences, closeness."""

from __future__ import annotations

import numpy as np

from distc import parse
from distc.analysis.simulate import simulate_serial

RNG = np.random.default_rng(7)


def _ty(shape, dt="f32"):
    return "tensor<" + "x".join(map(str, shape)) + ("x" if shape else "") + dt + ">"


def run_op(name: str, inputs: list, attrs: str = "", results: int = 1, vec: bool = False, out_types=None):
    """Run one op on ``inputs`` (arrays; a list = a vector operand) and return its results
    (``out_types``: the result types, default 0-d f32 tensors)."""
    lines, operands, types, feed = ["{"], [], [], {}
    k = 0
    for i, x in enumerate(inputs):
        if x is None:
            operands.append("<<NULL VALUE>>")
            types.append("<<NULL TYPE>>")
            continue
        group = x if isinstance(x, list) else [x]
        names = []
        for a in group:
            a = np.asarray(a)
            dt = "i64" if a.dtype.kind in "iu" else "f32"
            lines.append(f'    (%{k}) = "pd_op.data" () {{name:"in{k}",shape:[],dtype:float32}} : () -> {_ty(a.shape, dt)}')
            feed[f"in{k}"] = a
            names.append(f"%{k}")
            k += 1
        if isinstance(x, list):
            tys = ",".join(_ty(np.shape(a), "f32") for a in group)
            lines.append(f'    (%{k}) = "builtin.combine" ({", ".join(names)}) {{}} : ({", ".join(_ty(np.shape(a)) for a in group)}) -> vec[{tys}]')
            names = [f"%{k}"]
            k += 1
            types.append(f"vec[{tys}]")
        else:
            a = np.asarray(x)
            types.append(_ty(a.shape, "i64" if a.dtype.kind in "iu" else "f32"))
        operands.append(names[0])
    outs = ", ".join(f"%r{i}" for i in range(results))
    lines.append(f'    ({outs}) = "{name}" ({", ".join(operands)}) {{{attrs}}} : ({", ".join(types)}) -> ' + ", ".join(out_types or ["tensor<f32>"] * results))
    lines.append("}")
    prog = parse("\n".join(lines) + "\n", "k.ir")
    vals = simulate_serial(prog, feed, check_types=False)
    return [vals.get_value(r) for r in prog.ops[-1].results]


def numgrad(f, x, g, eps=1e-6):
    """d <f(x), g> / dx by central differences."""
    x = np.array(x, dtype=np.float64)
    out = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        out[i] = (np.sum(f(xp) * g) - np.sum(f(xm) * g)) / (2 * eps)
    return out


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=tol, atol=tol)
