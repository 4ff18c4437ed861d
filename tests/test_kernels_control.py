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


def _branch_program(scale: str) -> str:
    t = "pd_dist.tensor<4x3xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1]>"
    return f"""{{
    (%0) = "pd_op.data" () {{dtype:float32,name:"x",place:Place(undefined:0),shape:[4,3],stop_gradient:[true]}} : () -> {t}
    (%1) = "pd_op.full" () {{dtype:bool,place:Place(cpu),shape:[],stop_gradient:[true],value:true}} : () -> pd_dist.tensor<b, mesh_shape:[2],process_ids:[0,1],dims_mappings:[]>
    (%2) = "pd_op.if" (%1) {{stop_gradient:[true]}} -> {t} {{
        (%3) = "pd_op.scale" (%0) {{bias:0,bias_after_scale:true,scale:{scale},stop_gradient:[true]}} : ({t}) -> {t}
        () = "cf.yield" (%3) {{}} : ({t}) -> 
    }} else {{
        (%4) = "pd_op.exp" (%0) {{stop_gradient:[true]}} : ({t}) -> {t}
        () = "cf.yield" (%4) {{}} : ({t}) -> 
    }}
    () = "builtin.shadow_output" (%2) {{output_name:"y"}} : ({t}) -> 
}}
"""


def test_control_flow_mutation_is_caught_and_located():
    """A branch's body wrong on one rank (scale 2 -> 3 inside the taken branch of rank 1): caught,
    located at the if whose result is not its piece of the serial value."""
    from distc.analysis.simulate.proof import verify_step

    serial = parse(_branch_program("2"), "serial.ir")
    good = {r: parse(_branch_program("2"), f"r{r}.ir") for r in (0, 1)}
    assert verify_step(serial, good).status == 0
    good[1] = parse(_branch_program("3"), "r1.ir")
    rep = verify_step(serial, good)
    d = rep.divergence
    assert rep.status == 1 and d.rank == 1 and d.op.name == "pd_op.if" and d.op.loc[0] == 4, rep.summary()
