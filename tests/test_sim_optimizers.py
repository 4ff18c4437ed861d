"""The optimizer table and the simulator agree: every optimizer op distc shards
(``dialects/optimizers.py``) has a simulator kernel, and each kernel gives what Paddle 3.3.1's own
CPU kernel gives for one update step (tests/data/oracle/opt_steps.json.gz, made by
gen_opt_steps.py: random float64 inputs, several attribute settings per op)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from conftest import DATA
from distc.analysis.simulate import NoKernel, lookup
from distc.dialects.optimizers import OPTIMIZERS
from test_sim_kernels import run_op

STEPS = json.loads(gzip.decompress((DATA / "oracle/opt_steps.json.gz").read_bytes()))["cases"]


def _attr(v) -> str:
    """Paddle's optimizer attributes are C++ ``float``: the kernel got ``v`` rounded to float32."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(float(np.float32(v)))


def test_every_table_optimizer_has_a_kernel():
    """A table entry without a kernel fails here (and `distc verify` would stop at it, exit 3)."""
    missing = []
    for name, _n in OPTIMIZERS:
        try:
            lookup(name)
        except NoKernel:
            missing.append(name)
    assert not missing, f"optimizer ops in dialects/optimizers.py without a simulator kernel: {missing}"


def test_every_table_optimizer_is_checked_against_paddle():
    checked = {c["op"] for c in STEPS} | {"pd_op.adam_", "pd_op.adamw_", "pd_op.sgd_"}  # test_sim_kernels
    assert {name for name, _ in OPTIMIZERS} <= checked


@pytest.mark.parametrize("case", STEPS, ids=[f"{c['op'][6:]}{i}" for i, c in enumerate(STEPS)])
def test_kernel_equals_paddle_step(case):
    attrs = ",".join(f"{k}:{_attr(v)}" for k, v in case["attrs"].items())
    inputs = [None if a is None else np.asarray(a, dtype=np.float64) for _, a in case["inputs"]]
    got = run_op(case["op"], inputs, attrs, results=len(case["outputs"]))
    for i, (g, want) in enumerate(zip(got, case["outputs"])):
        if want is None:
            assert g is None, f"result {i}"
            continue
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), np.asarray(want), rtol=1e-12, atol=1e-14,
                                   err_msg=f"{case['op']} result {i}")
