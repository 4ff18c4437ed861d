"""The reshard proof on integer, bool and low-precision float tensors.

The proof's global input must be exact in the tensor's dtype: an int32 rank reading a global
value with fractions truncates it, and every right lowering looked wrong (``max abs error 0.875``).
These cases are lowered by distc (Paddle's functions) for every rank and proven; deliberately wrong
lowerings must still fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from distc.analysis.simulate import verify_reshard
from distc.analysis.simulate.reshard import random_global
from distc.cli import main
from distc.ir.attrs import IntAttr
from distc.passes.reshard import lower_program
from distc.passes.reshard.explore import build_program, make_mesh

CASES_1D = [("p", "r"), ("p", "s0"), ("p", "s1"), ("s0", "r"), ("s1", "r"), ("r", "p"), ("s0", "s1"),
            ("p:avg", "r"), ("p:max", "r"), ("p:min", "s0")]
CASES_2D = [("p,r", "r,r"), ("p,p", "r,s1"), ("r,p", "s0,r"), ("s0,s1", "r,r"), ("s0,r", "r,s1"),
            ("r,r", "p,s0"), ("r,s0", "r,p"), ("p,s1", "s0,r")]


def lower_all(mesh_shape, sp, dp, dtype, shape=(4, 8)):
    mesh = make_mesh(mesh_shape)
    before = build_program(mesh, sp, mesh, dp, shape, dtype)
    progs = {}
    for r in mesh.process_ids:
        p = build_program(mesh, sp, mesh, dp, shape, dtype)
        lower_program(p, r)
        progs[r] = p
    return before, progs


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("mesh,sp,dp", [((2,), *c) for c in CASES_1D] + [((2, 2), *c) for c in CASES_2D])
def test_integer_reshards_are_proven(dtype, mesh, sp, dp):
    before, progs = lower_all(mesh, sp, dp, dtype)
    rep = verify_reshard(progs, before=before)
    assert rep.ok, rep.summary()


@pytest.mark.parametrize("dtype", ["bool", "float16", "bfloat16", "uint8"])
@pytest.mark.parametrize("sp,dp", [("p", "r"), ("r", "p"), ("s0", "r"), ("p", "s1")])
def test_other_dtypes_are_proven(dtype, sp, dp):
    before, progs = lower_all((2,), sp, dp, dtype)
    rep = verify_reshard(progs, before=before)
    assert rep.ok, rep.summary()


def test_the_input_is_exact_in_its_dtype():
    i = random_global((64, 8), "int32")
    assert i.dtype.kind == "i" and i.min() < 0 < i.max()
    assert random_global((4, 8), "bool").dtype == bool
    f = random_global((64, 8), "bfloat16")
    assert np.all(f * 8 == np.round(f * 8)) and np.abs(f).max() * 8 < 256  # exact in bfloat16's 8 bits
    # floats are unchanged by the dtype fix (same values as before it)
    rng = np.random.default_rng([0, 12345])
    old = np.round(rng.standard_normal((4, 8)) * 8) / 8 + rng.integers(-3, 4, size=(4, 8))
    assert np.array_equal(random_global((4, 8), "float32"), old)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_wrong_integer_lowerings_fail(dtype):
    before, progs = lower_all((2,), "p", "r", dtype)
    for p in progs.values():
        p.find("pd_op.all_reduce")[0].set_attr("reduce_type", IntAttr(1))  # MAX where SUM is due
    rep = verify_reshard(progs, before=before)
    assert not rep.ok and "differs" in rep.problems[0]
    before, progs = lower_all((2,), "r", "s0", dtype)
    assert verify_reshard(progs, before=before).ok
    progs[0], progs[1] = progs[1], progs[0]  # each rank keeps the other's rows
    assert not verify_reshard(progs, before=before).ok


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "float16", "bfloat16"])
def test_cli_verify_integer_dtypes(dtype):
    r = run("reshard", "--from", "p", "--to", "r", "--dtype", dtype, "--all-ranks", "--verify", "-q")
    assert r.exit_code == 0 and "OK [p]" in r.stderr, r.output
    r = run("reshard", "--from", "p,s1", "--to", "s0,r", "--mesh", "2,2", "--dtype", dtype, "--verify", "-q")
    assert r.exit_code == 0 and "OK [p, s1]" in r.stderr, r.output


def test_cli_verify_failure_exits_1():
    """A wrong lowering (Paddle's co-shard by dims mapping) on int32: FAIL, an error line, exit 1."""
    r = run("reshard", "--from", "r,r", "--to", "s0,s0", "--mesh", "2,2", "--shape", "8x8", "--dtype", "int32",
            "--paddle", "--verify", "-q")
    assert r.exit_code == 1, r.output
    assert "FAIL [r, r]" in r.stderr and "error: --verify: the lowered programs do not compute" in r.stderr
    assert "Traceback" not in r.output
