"""Control flow in the simulator (issue 17): ``pd_op.while``/``pd_op.if``/``pd_op.pylayer`` run their
blocks, ``cf.stack_create``/``tuple_push``/``tuple_pop``/``has_elements`` carry the forward values
to the backward loop; Paddle's own to_static programs (tests/data/oracle) give the forward value
and the gradient a finite difference of the forward gives."""

from __future__ import annotations

import numpy as np

from distc import parse
from distc.analysis.simulate import simulate_serial

from conftest import DATA
from kernel_util import close, numgrad

CF = DATA / "oracle" / "syntax" / "control_flow_grad.ir"


def forward(x):
    h = x
    for _ in range(3):  # while i < 3: h = tanh(h) * x
        h = np.tanh(h) * x
    return 2 * h if h.mean() > 0 else np.exp(h)


def test_while_and_if_forward_and_their_backward_loop():
    prog = parse(CF.read_text(), str(CF))
    for x in (np.array([0.5, 1.0, 1.5, 0.2]), np.array([-0.5, -1.0, 0.3, -0.2])):
        v = simulate_serial(prog, {"x": x})
        close(v["%15"], forward(x))
        # %49: d mean(out) / dx, summed over the loop's uses of x and the carried value
        close(v["%49"], numgrad(lambda t: forward(t).mean(), x, np.ones(())), 1e-5)


def test_pylayer_runs_its_forward_block():
    path = DATA / "oracle" / "syntax" / "pylayer.ir"
    prog = parse(path.read_text(), str(path))
    x = np.arange(6.0).reshape(2, 3) / 7
    v = simulate_serial(prog, {"x": x})
    close(v["%1"], np.tanh(x))
    close(v["%8"], np.full((2, 3), 2 / 6))  # the backward pylayer: 2 * d mean / dx
