#!/usr/bin/env python3
"""One update step of every optimizer op of distc's table, computed by real PaddlePaddle 3.3.1 (CPU).

For each case: the op's inputs (random float64 tensors, seeded), its attributes, and what Paddle's
CPU kernel returns (``paddle._C_ops.<op>_`` in dygraph mode, the call Paddle's optimizers make).
tests/test_sim_optimizers.py runs distc's simulator kernel of the same op on the same inputs and
attributes and compares.  Output: opt_steps.json.gz (a list of cases; arrays as nested lists).

Usage: /tmp/paddle/bin/python gen_opt_steps.py [OUT]      (default ./opt_steps.json.gz)
"""
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(out):
    import numpy as np
    import paddle
    from paddle import _C_ops

    paddle.set_device("cpu")
    rng = np.random.default_rng(16)
    cases = []

    def T(a):
        return paddle.to_tensor(np.array(a, dtype=np.float64))

    def run(name, fn, inputs, attrs, shape=(3, 4)):
        """inputs: (operand name, array or None) in the op's operand order; fn(tensors) -> outputs."""
        tens = [None if a is None else T(a) for _, a in inputs]
        outs = fn(*tens)
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        cases.append({
            "op": f"pd_op.{name}_", "attrs": attrs,
            "inputs": [[n, None if a is None else np.asarray(a, dtype=np.float64).tolist()] for n, a in inputs],
            "outputs": [None if o is None else np.asarray(o.numpy(), dtype=np.float64).tolist() for o in outs],
        })

    def rand(shape=(3, 4), lo=-1.0, hi=1.0):
        return rng.uniform(lo, hi, shape)

    def pos(shape=(3, 4)):
        return rng.uniform(0.1, 1.0, shape)

    lr = np.array([0.01])
    # momentum_: param, grad, velocity, learning_rate, master_param
    for mu, nest, reg, coeff in ((0.9, False, "", 0.0), (0.8, True, "", 0.0), (0.9, False, "l2_decay", 0.01)):
        p, g, v = rand(), rand(), rand()
        run("momentum", lambda p_, g_, v_, l_, m_: _C_ops.momentum_(p_, g_, v_, l_, m_, mu, nest, reg, coeff, False, 1.0),
            [("param", p), ("grad", g), ("velocity", v), ("learning_rate", lr), ("master_param", None)],
            {"mu": mu, "use_nesterov": nest, "regularization_method": reg, "regularization_coeff": coeff,
             "multi_precision": False, "rescale_grad": 1.0})
    # lamb_: param, grad, lr, moment1, moment2, beta1_pow, beta2_pow, master_param, skip_update
    for wd, b1p, b2p, always in ((0.01, 0.9, 0.999, False), (0.0, 0.81, 0.998, False), (0.05, 0.9, 0.999, True)):
        p, g, m1, m2 = rand(), rand(), rand(), pos()
        run("lamb", lambda *t: _C_ops.lamb_(*t, wd, 0.9, 0.999, 1e-6, always, False),
            [("param", p), ("grad", g), ("learning_rate", lr), ("moment1", m1), ("moment2", m2),
             ("beta1_pow", np.array([b1p])), ("beta2_pow", np.array([b2p])), ("master_param", None),
             ("skip_update", None)],
            {"weight_decay": wd, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "always_adapt": always,
             "multi_precision": False})
    # adagrad_: param, grad, moment, learning_rate, master_param
    for eps in (1e-6, 1e-2):
        p, g, m = rand(), rand(), pos()
        run("adagrad", lambda *t: _C_ops.adagrad_(*t, eps, False),
            [("param", p), ("grad", g), ("moment", m), ("learning_rate", lr), ("master_param", None)],
            {"epsilon": eps, "multi_precision": False})
    # rmsprop_: param, mean_square, grad, moment, learning_rate, mean_grad, master_param
    for eps, rho, mom, centered in ((1e-6, 0.95, 0.0, False), (1e-6, 0.9, 0.5, False), (1e-4, 0.95, 0.3, True)):
        p, ms, g, m, mg = rand(), pos(), rand(), rand(), rand(lo=-0.1, hi=0.1)
        run("rmsprop", lambda *t: _C_ops.rmsprop_(*t, eps, rho, mom, centered, False),
            [("param", p), ("mean_square", ms), ("grad", g), ("moment", m), ("learning_rate", lr),
             ("mean_grad", mg), ("master_param", None)],
            {"epsilon": eps, "decay": rho, "momentum": mom, "centered": centered, "multi_precision": False})
    # adamax_: param, grad, learning_rate, moment, inf_norm, beta1_pow, master_param
    for b1, b2, eps, b1p in ((0.9, 0.999, 1e-8, 0.9), (0.8, 0.99, 1e-3, 0.512)):
        p, g, m, inf = rand(), rand(), rand(), pos()
        run("adamax", lambda *t: _C_ops.adamax_(*t, b1, b2, eps, False),
            [("param", p), ("grad", g), ("learning_rate", lr), ("moment", m), ("inf_norm", inf),
             ("beta1_pow", np.array([b1p])), ("master_param", None)],
            {"beta1": b1, "beta2": b2, "epsilon": eps, "multi_precision": False})
    # adadelta_: param, grad, avg_squared_grad, avg_squared_update, learning_rate, master_param
    for rho, eps, l in ((0.95, 1e-6, 1.0), (0.9, 1e-4, 0.5)):
        p, g, asg, asu = rand(), rand(), pos(), pos()
        run("adadelta", lambda *t: _C_ops.adadelta_(*t, rho, eps, False),
            [("param", p), ("grad", g), ("avg_squared_grad", asg), ("avg_squared_update", asu),
             ("learning_rate", np.array([l])), ("master_param", None)],
            {"rho": rho, "epsilon": eps, "multi_precision": False})
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump({"paddle": paddle.__version__, "cases": cases}, f)
    print(f"{len(cases)} cases -> {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "opt_steps.json.gz"))
