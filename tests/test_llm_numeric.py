"""Where Paddle 3.3.1 refuses, distc's LLaMA programs are proven numerically on every rank.

* stage 3 on dp x mp meshes (Paddle: ``Tensor Axis[c] is Sharded by two different mesh
  dimension``): distc shards another tensor axis over dp (``[R,S1]`` -> ``[S0,S1]``);
* stage 2 under AMP, on every mesh (Paddle: ``embedding_grad ... is not support sharded``):
  distc gives the stage-1 AMP program (gradients resharded before the clip).

The proof is on the optimizer step of Paddle's own program (``llama_*.s0.rR.before_partition``,
both configurations): the forward and backward ops are cut off and every gradient becomes an
input (``pd_op.data`` named ``PARAM@GRAD``, Partial(SUM) over dp as Paddle's backward leaves it);
Paddle's global-norm clip and the 21 AdamW updates stay as they are.  ``distc shard`` lowers it
for every rank; all ranks are simulated together, each dp rank holding its own gradient
contribution; then on every rank every parameter and every optimizer state must equal its piece
of the unsharded update computed by numpy (clip by the global norm of the summed gradients, then
AdamW, Paddle's kernel written out again in test_zero1_numeric.reference).  Stage 1 (which Paddle
accepts, and distc matches byte for byte) is the control.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from click.testing import CliRunner

import distc
import llmdata as L
from distc.analysis.simulate import expected_piece, simulate_ranks
from distc.cli import main
from distc.ir.builder import Maker
from distc.ir.types import DistTensorType
from distc.ir.builder import InsertPoint
from distc.ir.core import Operation
from test_zero1_numeric import final_values, reference

CLIP = 1.0


# ------------------------------------------------------------------------------ the step only
def _role(op) -> int:
    a = op.attr("op_role")
    return int(getattr(a, "value", -1)) if a is not None else -1


def optimizer_step(text: str, name: str):
    """Paddle's training program cut to its optimizer step (see the module docstring)."""
    prog = distc.parse(text, name)
    mk = Maker(prog.style)
    ops = prog.block.ops
    first = next(op for op in ops if _role(op) == 2)
    cur = InsertPoint.before(first)
    grads = {}
    for op in ops:
        if _role(op) != 2:
            continue
        for i, v in enumerate(op.operands):
            if v is None or v.owner is None or _role(v.owner) == 2 or v.owner.name in ("pd_op.data",
                                                                                        "builtin.parameter"):
                continue
            if v not in grads:
                t = v.type
                assert isinstance(t, DistTensorType), t
                opt = next(u for u in _users_to_update(v))
                pname = opt.operand(0).owner.attr("parameter_name").value
                d = Operation("pd_op.data", [], [t], {
                    "dtype": mk.dtype("float32"), "name": mk.str(f"{pname}@GRAD"),
                    "op_dist_attr": mk.op_dist(t.dist.mesh, [], [t.dist]),
                    "op_role": mk.i32(0), "persistable": mk.bools([False]), "place": mk.place("Place(undefined:0)"),
                    "shape": mk.int_array(list(t.local_shape())), "stop_gradient": mk.bools([False])})
                grads[v] = cur.insert(d).result
            op.set_operand(i, grads[v])
    for op in reversed(list(prog.block.ops)):
        if _role(op) in (0, 1) and op.name not in ("pd_op.data", "builtin.parameter"):
            op.drop_all_uses_and_erase()
    for op in list(prog.block.ops):  # the token ids and labels
        if op.name == "pd_op.data" and not op.results[0].users:
            op.erase()
    return prog


def _users_to_update(v):
    """The optimizer update a gradient ends in (through the clip's multiply)."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        for u in x.users:
            if id(u) in seen:
                continue
            seen.add(id(u))
            if u.name.endswith("_") and u.name.startswith("pd_op.adam"):
                yield u
            elif u.name == "pd_op.multiply":
                todo.extend(u.results)


@functools.lru_cache(maxsize=None)
def step_text(config: str, case: str) -> str:
    return str(optimizer_step(L.get(config, case, "s0", 0, "before_partition"), f"{config}/{case}"))


# ------------------------------------------------------------------------------ the proof
def shard_every_rank(src, case: str, stage: int, amp: bool) -> dict:
    progs = {}
    for r in L.RANKS[case]:
        args = ["shard", str(src), "--stage", str(stage), "--rank", str(r), "--axis", "dp",
                "--mesh-dims", ",".join(L.MESH_DIMS[case]), "-q"] + (["--amp"] if amp else [])
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 0, out.stderr + repr(out.exception)
        progs[r] = distc.parse(out.stdout, f"{case}.s{stage}.r{r}")
    return progs


def _names(prog):
    out = {}
    for op in prog.ops:
        if op.name == "pd_op.data":
            out[op.attr("name").value] = op.results[0]
        elif op.name == "builtin.parameter":
            out[op.attr("parameter_name").value] = op.results[0]
    return out


def _state(param: str, k: str) -> str:
    """Paddle's accumulator names: PARAM_moment1_0, PARAM_beta1_pow_acc_0."""
    return f"{param}_{k}_acc_0" if k.endswith("_pow") else f"{param}_{k}_0"


def prove(config: str, case: str, stage: int, tmp_path) -> int:
    src = tmp_path / "step.ir"
    src.write_text(step_text(config, case))
    base = distc.parse(src.read_text(), "step")
    vals = _names(base)
    params = [n for n in vals if n.endswith(".w_0.dist")]
    rng = np.random.default_rng(stage * 10 + len(case))
    ndp = 2 if "mp" in case else 4
    lr = 0.01
    inputs: dict = {"learning_rate_0": np.array(lr) if vals["learning_rate_0"].type.rank == 0 else np.array([lr])}
    glob, contrib, states = {}, {}, {}
    for p in params:
        shape = vals[p].type.shape
        glob[p] = rng.standard_normal(shape)
        contrib[p] = [rng.standard_normal(shape) * 0.3 for _ in range(ndp)]
        states[p] = {"moment1": rng.standard_normal(shape) * 0.1, "moment2": np.abs(rng.standard_normal(shape)) * 0.01,
                     "beta1_pow": np.array([0.9 ** 3]), "beta2_pow": np.array([0.999 ** 3])}
        inputs[p] = glob[p]
        for k, v in states[p].items():
            inputs[_state(p, k)] = v
    # the clip: global norm of the summed gradients, then AdamW on the clipped gradient
    g = {p: sum(contrib[p]) for p in params}
    norm = np.sqrt(sum(np.sum(np.square(x)) for x in g.values()))
    assert norm > CLIP  # the clip really scales
    scale = CLIP / max(norm, CLIP)
    ref = {p: reference("adamw", glob[p], g[p] * scale, lr, states[p]) for p in params}

    progs = shard_every_rank(src, case, stage, config == "amp")
    gtypes = _names(progs[0])
    partial = 0
    for p in params:
        gd = gtypes[f"{p}@GRAD"].owner.dist_attr.results[0]
        if gd.partial_dims == {0: "SUM"}:  # every dp rank holds its own contribution
            inputs[f"{p}@GRAD"] = {r: expected_piece(contrib[p][gd.mesh.coord(r)[0]], gd, r)
                                   for r in gd.mesh.process_ids}
            partial += 1
        else:  # Paddle's backward already summed it (e.g. the RMSNorm weights on a dp x mp mesh)
            assert not gd.partial_dims
            inputs[f"{p}@GRAD"] = g[p]
    assert partial >= 14
    res = simulate_ranks(progs, inputs)
    checked = 0
    for r, prog in progs.items():
        fin = final_values(prog, res[r])
        for p in params:
            want_p, want_st = ref[p]
            v, got = fin[p]
            np.testing.assert_allclose(got, expected_piece(want_p, v.type.dist, r), rtol=1e-9, atol=1e-12,
                                       err_msg=f"rank {r} {p}")
            checked += 1
            for k in ("moment1", "moment2", "beta1_pow", "beta2_pow"):
                v, got = fin[_state(p, k)]
                np.testing.assert_allclose(got, expected_piece(want_st[k], v.type.dist, r), rtol=1e-9, atol=1e-12,
                                           err_msg=f"rank {r} {p} {k}")
                checked += 1
    return checked


REFUSED = [pytest.param(c, case, s, id=f"{c}/{case}.s{s}")
           for case in ("llama_dp2mp2", "llama_dp2mp4") for c, s in (("clip", 3), ("amp", 3), ("amp", 2))]
REFUSED.append(pytest.param("amp", "llama_dp4", 2, id="amp/llama_dp4.s2"))


@pytest.mark.parametrize("config,case,stage", REFUSED)
def test_paddle_refuses_distc_proves(config, case, stage, tmp_path):
    assert all(L.error(config, case, f"s{stage}", r) for r in L.RANKS[case])  # Paddle fails on every rank
    n = prove(config, case, stage, tmp_path)
    assert n == len(L.RANKS[case]) * 21 * 5


@pytest.mark.parametrize("config,case", [("clip", "llama_dp2mp2"), ("amp", "llama_dp4"), ("clip", "llama_dp4")])
def test_control_paddle_accepts(config, case, tmp_path):
    """Stage 1 (and stage 3 on dp4), which Paddle accepts: the same proof holds."""
    for stage in (1, 3) if case == "llama_dp4" else (1,):
        assert prove(config, case, stage, tmp_path) == len(L.RANKS[case]) * 21 * 5


# ------------------------------------------------------------------------------ the whole step
@pytest.mark.parametrize("config,stage", [("clip", 3), ("amp", 3), ("amp", 2)])
def test_refused_whole_step_verified(config, stage, tmp_path):
    """The whole training step (forward, backward, clip, AdamW) of distc's program for every rank
    of dp2 x mp2, against the serial program, with ``distc verify``: EQUAL."""
    case = "llama_dp2mp2"
    assert all(L.error(config, case, f"s{stage}", r) for r in L.RANKS[case])
    src = L.write(tmp_path, config, case, "s0", 0, "before_partition")
    for r in L.RANKS[case]:
        args = ["shard", str(src), "--stage", str(stage), "--rank", str(r), "--axis", "dp", "--mesh-dims", "dp,mp",
                "-q", "-o", str(tmp_path / f"main.r{r}.ir")] + (["--amp"] if config == "amp" else [])
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 0, out.stderr
    out = CliRunner().invoke(main, ["verify", str(src), "--ranks", str(tmp_path / "main.r{rank}.ir")])
    assert out.exit_code == 0, out.stdout + out.stderr
    assert re.search(r"main: EQUAL: \d+ values .* compared on ranks \[0, 1, 2, 3\]", out.stdout + out.stderr)
