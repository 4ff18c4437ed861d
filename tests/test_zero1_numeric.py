"""ZeRO stage 1 proven numerically: ``distc shard`` + the SPMD simulator.

Issue 4: "Adam and Momentum stage 1 (which Paddle refuses) are proven by the simulator: the
sharded program's updated parameters on every rank equal the unsharded update."  Done here for
AdamW and SGD (which Paddle accepts) too, in both adam(w)_ signatures and with amsgrad.

Each case is a small hand-written optimizer step in the style of Paddle's own
``*.s0.r0.before_partition`` dumps (tests/data/corpus/paddle-3.3.1/stage1): persistable states
(``pd_op.data``), parameters (``builtin.parameter``), and gradients Partial(SUM) over the dp
mesh dim (``pd_op.data`` named ``W@GRAD``), on mesh [0,1,2,3] (dp) or [[0,1],[2,3]] (dp, mp)
with column- and row-parallel weights; shapes include uneven splits (5 rows over dp4: pieces
2,2,1,0; 5 columns over dp2: 3,2).

For every rank, ``distc shard --stage S --rank R`` gives the rank's lowered program (the
``after_reshard`` kind, op meshes kept so the simulator knows each collective's group).  All
ranks are simulated together on random inputs, the gradient given as every rank's own partial
contribution.  On every rank, the value ``assign_out_`` writes into each parameter (or, where
the update is not resharded, the update's own parameter result) must equal the reference update
computed by numpy on the global tensors with the summed gradient, and every updated optimizer
state must be the rank's piece of the reference state.  ``--stage 0`` is the control.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import distc
from distc.analysis.simulate import SimulationError, expected_piece, simulate_ranks
from distc.cli import main

# ------------------------------------------------------------------------------ the programs
MESHES = {"dp4": ((4,), (0, 1, 2, 3)), "dp2mp2": ((2, 2), (0, 1, 2, 3))}
# (parameter name, global shape, dims mapping of the parameter on the mesh)
PARAMS = {
    "dp4": [("w0", (8, 6), (-1, -1)), ("w1", (5, 3), (-1, -1)), ("b0", (6,), (-1,))],
    "dp2mp2": [("w0", (8, 6), (-1, 1)),   # column parallel
               ("w1", (6, 5), (1, -1)),   # row parallel: dp shards the 5 columns (3, 2)
               ("w2", (5, 3), (-1, -1)),  # replicated: dp shards the 5 rows (3, 2)
               ("b0", (6,), (1,))],       # sharded on mp on its only axis: states stay so
}
DP = 0  # the dp mesh dim (gradients are Partial(SUM) over it; Paddle's rule shards over it)

# optimizer variant -> (op name, operand count, states, attrs)
ADAM_ATTRS = {"lazy_mode": "false", "min_row_size_to_use_multithread": "1000", "multi_precision": "false",
              "use_global_beta_pow": "false"}
MOMENTS = ["moment1", "moment2", "beta1_pow", "beta2_pow"]
OPTIMIZERS = {
    "adamw": ("pd_op.adamw_", 13, MOMENTS,
              {"amsgrad": "false", "coeff": "0.01", "lr_ratio": "1", "with_decay": "true"}),
    "adamw_amsgrad": ("pd_op.adamw_", 13, MOMENTS + ["moment2_max"],
                      {"amsgrad": "true", "coeff": "0.05", "lr_ratio": "0.5", "with_decay": "true"}),
    "adamw_2024": ("pd_op.adamw_", 12, MOMENTS, {"coeff": "0.01", "lr_ratio": "1", "with_decay": "true"}),
    "adam": ("pd_op.adam_", 13, MOMENTS, {"amsgrad": "false"}),
    "adam_2024": ("pd_op.adam_", 12, MOMENTS, {}),
    "momentum": ("pd_op.momentum_", 5, ["velocity"],
                 {"mu": "0.9", "regularization_coeff": "0", "regularization_method": '""',
                  "rescale_grad": "1", "use_nesterov": "false", "multi_precision": "false"}),
    "momentum_nesterov_l2": ("pd_op.momentum_", 5, ["velocity"],
                             {"mu": "0.8", "regularization_coeff": "0.01",
                              "regularization_method": '"l2_decay"', "rescale_grad": "0.5",
                              "use_nesterov": "true", "multi_precision": "false"}),
    "sgd": ("pd_op.sgd_", 4, [], {"multi_precision": "false"}),
}
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def _mesh_text(mesh) -> str:
    shape, ids = mesh
    return f"mesh:{{shape:[{','.join(map(str, shape))}],process_ids:[{','.join(map(str, ids))}]}}"


def _dist(mesh, dm, partial: int | None = None) -> str:
    shape, ids = mesh
    pl = []
    for k in range(len(shape)):
        if k == partial:
            pl.append("Partial(reduce_type=SUM)")
        elif k in dm:
            pl.append(f"Shard(dim={dm.index(k)})")
        else:
            pl.append("Replicate()")
    part = f", partial({partial},SUM)" if partial is not None else ""
    return (f"mesh_shape:[{','.join(map(str, shape))}],process_ids:[{','.join(map(str, ids))}],"
            f"dims_mappings:[{','.join(map(str, dm))}]{part}, placements:[{', '.join(pl)}]")


EMPTY = "mesh_shape:[],process_ids:[],dims_mappings:[]"


def _type(mesh, shape, dm, partial=None) -> str:
    dims = "x".join(map(str, shape)) + "x" if shape else ""
    return f"pd_dist.tensor<{dims}f32, {_dist(mesh, dm, partial)}>"


class _Prog:
    def __init__(self, mesh) -> None:
        self.mesh = mesh
        self.lines: list[str] = []
        self.n = 0

    def value(self) -> str:
        self.n += 1
        return f"%{self.n - 1}"

    def data(self, name: str, shape, dm, *, partial=None, persistable=True) -> str:
        v = self.value()
        # Paddle prints the local shape (of rank 0) in the attribute, the global one in the type
        local = [-(-n // self.mesh[0][d]) if d >= 0 else n for n, d in zip(shape, dm)]
        self.lines.append(
            f'    ({v}) = "pd_op.data" () {{dtype:float32,name:"{name}",op_dist_attr:{{{_mesh_text(self.mesh)},'
            f'result(0):{{{_dist(self.mesh, dm, partial)}}},chunk_id:-1}},op_role:0,'
            f'persistable:[{str(persistable).lower()}],place:Place(undefined:0),shape:[{",".join(map(str, local))}],'
            f'stop_gradient:[{str(persistable).lower()}]}} : () -> {_type(self.mesh, shape, dm, partial)}')
        return v

    def parameter(self, name: str, shape, dm) -> str:
        v = self.value()
        self.lines.append(
            f'    ({v}) = "builtin.parameter" () {{is_distributed:[false],is_parameter:[true],need_clip:[true],'
            f'op_dist_attr:{{{_mesh_text(self.mesh)},result(0):{{{_dist(self.mesh, dm)}}},chunk_id:-1}},op_role:0,'
            f'parameter_name:"{name}",persistable:[true],stop_gradient:[false],trainable:[true]}} : () -> '
            f'{_type(self.mesh, shape, dm)}')
        return v

    def full(self, value: float) -> str:
        v = self.value()
        rep = (-1,)
        self.lines.append(
            f'    ({v}) = "pd_op.full" () {{dtype:float32,op_dist_attr:{{{_mesh_text(self.mesh)},'
            f'result(0):{{{_dist(self.mesh, rep)}}},chunk_id:-1}},op_role:2,place:Place(cpu),shape:[1],'
            f'stop_gradient:[true],value:{value}}} : () -> {_type(self.mesh, (1,), rep)}')
        return v

    def update(self, name: str, operands: list, results: list, attrs: dict) -> list[str]:
        """``operands``: (value, type text, entry text) or None; ``results``: (type, entry) or None."""
        outs = [self.value() for _ in results]
        ops = ", ".join("<<NULL VALUE>>" if o is None else o[0] for o in operands)
        ents = [f"operand({i}):{{{EMPTY if o is None else o[2]}}}" for i, o in enumerate(operands)]
        ents += [f"result({i}):{{{EMPTY if r is None else r[1]}}}" for i, r in enumerate(results)]
        a = dict(attrs)
        a["op_dist_attr"] = f"{{{_mesh_text(self.mesh)},{','.join(ents)},chunk_id:-1}}"
        a["op_role"] = "2"
        a["stop_gradient"] = "[" + ",".join("false" for _ in results) + "]"
        text = ",".join(f"{k}:{v}" for k, v in sorted(a.items()))
        in_t = ", ".join("<<NULL TYPE>>" if o is None else o[1] for o in operands)
        out_t = ", ".join("<<NULL TYPE>>" if r is None else r[0] for r in results)
        self.lines.append(f'    ({", ".join(outs)}) = "{name}" ({ops}) {{{text}}} : ({in_t}) -> {out_t}')
        return outs

    def text(self) -> str:
        return "{\n" + "\n".join(self.lines) + "\n}\n"


def build(mesh_name: str, opt: str) -> str:
    """The stage-0 program: what Paddle's data-parallel optimizer step looks like before
    ``shard_optimizer`` (update operands expected unsharded on dp, gradients Partial(SUM))."""
    mesh = MESHES[mesh_name]
    op_name, nops, states, attrs = OPTIMIZERS[opt]
    p = _Prog(mesh)
    lr = p.data("learning_rate_0", (), ())
    vals: dict = {}
    for name, shape, dm in PARAMS[mesh_name]:
        for s in states:
            sshape, sdm = ((1,), (-1,)) if s.endswith("_pow") else (shape, dm)
            vals[name, s] = (p.data(f"{name}_{s}_0", sshape, sdm), _type(mesh, sshape, sdm), _dist(mesh, sdm))
    for name, shape, dm in PARAMS[mesh_name]:
        vals[name, "param"] = (p.parameter(name, shape, dm), _type(mesh, shape, dm), _dist(mesh, dm))
        # the optimizer's SPMD rule expects the gradient as the parameter (no partial)
        vals[name, "grad"] = (p.data(f"{name}@GRAD", shape, dm, partial=DP, persistable=False),
                              _type(mesh, shape, dm, DP), _dist(mesh, dm))
    lr_o = (lr, _type(mesh, (), ()), _dist(mesh, ()))
    for name, shape, dm in PARAMS[mesh_name]:
        def v(s):
            return vals.get((name, s))

        def res(o):
            return None if o is None else o[1:]

        if nops in (12, 13):
            scal = [(p.full(x), _type(mesh, (1,), (-1,)), _dist(mesh, (-1,))) for x in (BETA1, BETA2, EPS)]
            m2max = [v("moment2_max")] if nops == 13 else []
            inplace = [v("param"), v("moment1"), v("moment2"), *m2max, v("beta1_pow"), v("beta2_pow"), None]
            operands = [v("param"), v("grad"), lr_o, v("moment1"), v("moment2"), *m2max, v("beta1_pow"),
                        v("beta2_pow"), None, None, *scal]
            p.update(op_name, operands, [res(o) for o in inplace], {**ADAM_ATTRS, **attrs})
        elif op_name == "pd_op.momentum_":
            p.update(op_name, [v("param"), v("grad"), v("velocity"), lr_o, None],
                     [res(v("param")), res(v("velocity")), None], attrs)
        else:
            p.update(op_name, [v("param"), lr_o, v("grad"), None], [res(v("param")), None], attrs)
    return p.text()


# ------------------------------------------------------------------------------ the reference
def reference(opt: str, p, g, lr: float, st: dict) -> tuple[np.ndarray, dict]:
    """The unsharded update on global tensors (Paddle's dense kernels, written out again)."""
    _, _, _, attrs = OPTIMIZERS[opt]
    a = {k: v.strip('"') for k, v in attrs.items()}
    st = {k: v.copy() for k, v in st.items()}
    if opt.startswith("adam"):
        b1p, b2p = st["beta1_pow"][0], st["beta2_pow"][0]
        if opt.startswith("adamw"):
            lr = lr * float(a["lr_ratio"])
            p = p * (1 - lr * float(a["coeff"]))  # decoupled weight decay (with_decay:true)
        st["moment1"] = BETA1 * st["moment1"] + (1 - BETA1) * g
        st["moment2"] = BETA2 * st["moment2"] + (1 - BETA2) * np.square(g)
        v = st["moment2"]
        if a.get("amsgrad") == "true":
            st["moment2_max"] = v = np.maximum(st["moment2_max"], st["moment2"])
        step = lr * np.sqrt(1 - b2p) / (1 - b1p)
        p = p - step * st["moment1"] / (np.sqrt(v) + EPS * np.sqrt(1 - b2p))
        st["beta1_pow"] = st["beta1_pow"] * BETA1
        st["beta2_pow"] = st["beta2_pow"] * BETA2
    elif opt.startswith("momentum"):
        g = g * float(a["rescale_grad"])
        if a["regularization_method"] == "l2_decay":
            g = g + float(a["regularization_coeff"]) * p
        mu = float(a["mu"])
        st["velocity"] = mu * st["velocity"] + g
        p = p - lr * (g + mu * st["velocity"]) if a["use_nesterov"] == "true" else p - lr * st["velocity"]
    else:
        p = p - lr * g
    return p, st


def random_inputs(mesh_name: str, opt: str, seed: int) -> tuple[dict, dict, float, dict]:
    """Global parameters, gradients (with every dp rank's contribution) and states."""
    rng = np.random.default_rng(seed)
    _, _, states, _ = OPTIMIZERS[opt]
    ndp = MESHES[mesh_name][0][DP]
    params, contribs, st = {}, {}, {}
    for name, shape, _ in PARAMS[mesh_name]:
        params[name] = rng.standard_normal(shape)
        contribs[name] = [rng.standard_normal(shape) for _ in range(ndp)]
        s = {}
        for k in states:
            if k.endswith("_pow"):
                b = BETA1 if k == "beta1_pow" else BETA2
                s[k] = np.array([b ** int(rng.integers(1, 20))])
            elif k.startswith("moment2"):
                s[k] = np.abs(rng.standard_normal(shape)) * 0.1  # second moments are >= 0
            else:
                s[k] = rng.standard_normal(shape)
        st[name] = s
    return params, contribs, float(rng.uniform(0.01, 0.2)), st


# ------------------------------------------------------------------------------ the proof
_SHARDED: dict[tuple, dict] = {}  # (mesh, optimizer, stage) -> rank -> lowered program


def shard_all_ranks(mesh_name: str, opt: str, stage: int, tmp) -> dict:
    key = (mesh_name, opt, stage)
    if key not in _SHARDED:
        src = tmp / f"{mesh_name}_{opt}.ir"
        src.write_text(build(mesh_name, opt))
        progs = {}
        for r in MESHES[mesh_name][1]:
            out = CliRunner().invoke(main, ["shard", str(src), "--stage", str(stage), "--rank", str(r), "-q"])
            assert out.exit_code == 0, out.stderr + repr(out.exception)
            progs[r] = distc.parse(out.stdout, f"{mesh_name}_{opt}.s{stage}.r{r}")
        _SHARDED[key] = progs
    return _SHARDED[key]


def _root(v):
    """The persistable input (pd_op.data / builtin.parameter) a value was cut from."""
    while v.owner.name not in ("pd_op.data", "builtin.parameter"):
        v = v.owner.operand(0)
    return v


def _key(v) -> str:
    a = v.owner.attr("name" if v.owner.name == "pd_op.data" else "parameter_name")
    return a.value


def final_values(prog, values) -> dict[str, tuple]:
    """persistable input name -> (its value, what this rank holds for it after the step): the
    value assign_out_ writes into it, else the in-place result of an update whose operand it is
    itself.  An update of a piece of it that is never written back is an error."""
    from distc.passes.shard_optimizer import inplace_map

    out: dict[str, tuple] = {}
    pending = {}
    for op in prog.ops:
        if op.name == "pd_op.assign_out_":
            tgt = op.operand(1)
            out[_key(tgt)] = (tgt, values.get_value(op.results[0]))
        elif op.name in ("pd_op.adamw_", "pd_op.adam_", "pd_op.momentum_", "pd_op.sgd_"):
            for ri, oi in inplace_map(op).items():
                v = op.operand(oi)
                if v is None:
                    continue
                if v.owner.name in ("pd_op.data", "builtin.parameter"):
                    out.setdefault(_key(v), (v, values.get_value(op.results[ri])))
                else:
                    pending[_key(_root(v))] = op
    lost = sorted(set(pending) - set(out))
    assert not lost, f"updates of pieces of {lost} are never written back"
    return out


CASES = [pytest.param(m, o, s, id=f"{m}-{o}-stage{s}")
         for m in MESHES for o in OPTIMIZERS for s in (1, 0)]


@pytest.mark.parametrize("mesh_name,opt,stage", CASES)
def test_sharded_update_equals_unsharded(mesh_name, opt, stage, tmp_path):
    progs = shard_all_ranks(mesh_name, opt, stage, tmp_path)
    params, contribs, lr, states = random_inputs(mesh_name, opt, seed=len(mesh_name) * 100 + len(opt))
    any_prog = progs[0]
    dtypes = {_key(op.results[0]): op.results[0].type for op in any_prog.ops
              if op.name in ("pd_op.data", "builtin.parameter")}
    inputs: dict = {"learning_rate_0": np.array(lr)}
    for name in params:
        inputs[name] = params[name]
        for k, v in states[name].items():
            inputs[f"{name}_{k}_0"] = v
        # the gradient: every rank holds its own dp contribution (its piece, where sharded)
        gd = dtypes[f"{name}@GRAD"].dist
        assert gd.partial_dims == {DP: "SUM"}
        mesh = gd.mesh
        inputs[f"{name}@GRAD"] = {r: expected_piece(contribs[name][mesh.coord(r)[DP]], gd, r)
                                  for r in mesh.process_ids}
    res = simulate_ranks(progs, inputs)
    checked = 0
    for name in params:
        want_p, want_st = reference(opt, params[name], sum(contribs[name]), lr, states[name])
        for r, prog in progs.items():
            finals = final_values(prog, res[r])
            for key, want in [(name, want_p)] + [(f"{name}_{k}_0", v) for k, v in want_st.items()]:
                assert key in finals, f"rank {r}: {key} is not updated"
                v, got = finals[key]
                exp = expected_piece(want, v.type.dist, r)
                assert got is not None and got.shape == exp.shape, \
                    f"rank {r}: {key} holds {None if got is None else got.shape}, its piece is {exp.shape}"
                np.testing.assert_allclose(got, exp, rtol=1e-12, atol=1e-12, err_msg=f"rank {r}: {key}")
                checked += 1
    assert checked == len(progs) * sum(1 + len(states[n]) for n in params)
    # stage 1 did shard: the dp-replicated parameters' states are split over dp, and the update
    # runs on pieces (reduce_scatter of the gradient); stage 0 all-reduces and keeps them whole
    layout = {n: dtypes[n].dist for n in dtypes}
    for name, shape, dm in PARAMS[mesh_name]:
        for k in states[name]:
            d = layout[f"{name}_{k}_0"]
            sharded = stage == 1 and not k.endswith("_pow") and DP not in dm and any(
                ax not in [dm.index(m) for m in dm if m >= 0] for ax in range(len(shape)))
            assert (d.placements[DP].kind == "S") == sharded, (name, k, d)
    # (SGD has no state to shard: its stage 1 is stage 0, as in Paddle's mlp_dp2_sgd snapshots)
    kinds = {op.name for p in progs.values() for op in p.ops}
    assert ("pd_op.reduce_scatter" in kinds) == (stage == 1 and opt != "sgd")


# ------------------------------------------------------------------------------ the kernels' options
def _dense(op_name: str, operands: list, results: list, attrs: str) -> str:
    """A one-rank dense program: every operand a ``pd_op.data`` (name, shape, dtype) or None;
    ``results``: the in-place operand index of each result (or None)."""
    lines, ts = [], []
    for i, o in enumerate(operands):
        if o is None:
            ts.append(None)
            continue
        name, shape, dt = o
        t = f"tensor<{''.join(f'{d}x' for d in shape)}{dt}>"
        ts.append(t)
        lines.append(f'    (%{i}) = "pd_op.data" () {{dtype:{"bool" if dt == "b" else "float32"},name:"{name}",'
                     f'place:Place(undefined:0),shape:[{",".join(map(str, shape))}],stop_gradient:[true]}} : () -> {t}')
    n = len(operands)
    outs = ", ".join(f"%{n + i}" for i in range(len(results)))
    ins = ", ".join("<<NULL VALUE>>" if o is None else f"%{i}" for i, o in enumerate(operands))
    in_t = ", ".join("<<NULL TYPE>>" if t is None else t for t in ts)
    out_t = ", ".join("<<NULL TYPE>>" if j is None or ts[j] is None else ts[j] for j in results)
    lines.append(f'    ({outs}) = "{op_name}" ({ins}) {{{attrs}}} : ({in_t}) -> {out_t}')
    return "{\n" + "\n".join(lines) + "\n}\n"


ADAM_OPERANDS = ["p", "g", "lr", "m1", "m2", None, "b1p", "b2p", "master", "skip", "beta1", "beta2", "eps"]


def _adam_prog(op_name: str, attrs: str, *, master=False, skip=False) -> str:
    shapes = {"lr": (), "b1p": (1,), "b2p": (1,), "beta1": (1,), "beta2": (1,), "eps": (1,), "skip": (1,)}
    ops = []
    for n in ADAM_OPERANDS:
        if n is None or (n == "master" and not master) or (n == "skip" and not skip):
            ops.append(None)
        else:
            ops.append((n, shapes.get(n, (3, 2)), "b" if n == "skip" else "f32"))
    return _dense(op_name, ops, [0, 3, 4, 5, 6, 7, 8], attrs)


def _adam_inputs(rng, **extra) -> dict:
    x = {"p": rng.standard_normal((3, 2)), "g": rng.standard_normal((3, 2)), "lr": np.array(0.1),
         "m1": rng.standard_normal((3, 2)), "m2": np.abs(rng.standard_normal((3, 2))), "b1p": np.array([0.9 ** 3]),
         "b2p": np.array([0.999 ** 3]), "beta1": np.array([BETA1]), "beta2": np.array([BETA2]), "eps": np.array([EPS])}
    x.update(extra)
    return x


ADAM_A = "amsgrad:false,lazy_mode:false,min_row_size_to_use_multithread:1000,multi_precision:false"


def _run1(text: str, inputs: dict) -> list:
    prog = distc.parse(text)
    res = simulate_ranks({0: prog}, inputs)[0]
    return [res.get_value(r) for r in prog.ops[-1].results]


def test_adam_kernel_options():
    rng = np.random.default_rng(5)
    x = _adam_inputs(rng)
    st = {"moment1": x["m1"], "moment2": x["m2"], "beta1_pow": x["b1p"], "beta2_pow": x["b2p"]}
    want_p, want = reference("adam", x["p"], x["g"], 0.1, st)
    # adam_ and adamw_ without decay are the same update
    for name, a in (("pd_op.adam_", ""), ("pd_op.adamw_", ",coeff:0.3,lr_ratio:1,with_decay:false")):
        out = _run1(_adam_prog(name, ADAM_A + a + ",use_global_beta_pow:false"), x)
        for got, exp in zip(out, [want_p, want["moment1"], want["moment2"], None, want["beta1_pow"],
                                  want["beta2_pow"], None]):
            assert (got is None) == (exp is None)
            if exp is not None:
                np.testing.assert_allclose(got, exp, rtol=1e-13)
    # use_global_beta_pow: the beta powers are not advanced (someone else does it)
    out = _run1(_adam_prog("pd_op.adam_", ADAM_A + ",use_global_beta_pow:true"), x)
    np.testing.assert_allclose(out[0], want_p, rtol=1e-13)
    assert out[4] == x["b1p"] and out[5] == x["b2p"]
    # skip_update true: every output is its input
    out = _run1(_adam_prog("pd_op.adam_", ADAM_A + ",use_global_beta_pow:false", skip=True),
                {**x, "skip": np.array([True])})
    for got, k in zip(out, ["p", "m1", "m2", None, "b1p", "b2p", None]):
        assert (got is None) if k is None else np.array_equal(got, x[k])
    out = _run1(_adam_prog("pd_op.adam_", ADAM_A + ",use_global_beta_pow:false", skip=True),
                {**x, "skip": np.array([False])})
    np.testing.assert_allclose(out[0], want_p, rtol=1e-13)
    # a master weight: the update reads it and writes it and the parameter
    master = rng.standard_normal((3, 2))
    want_m, _ = reference("adam", master, x["g"], 0.1, st)
    out = _run1(_adam_prog("pd_op.adam_", ADAM_A.replace("multi_precision:false", "multi_precision:true")
                           + ",use_global_beta_pow:false", master=True), {**x, "master": master})
    np.testing.assert_allclose(out[0], want_m, rtol=1e-13)
    np.testing.assert_allclose(out[6], want_m, rtol=1e-13)


def test_momentum_and_sgd_master_weight():
    rng = np.random.default_rng(6)
    p, g, v, m = (rng.standard_normal((4,)) for _ in range(4))
    t = "f32"
    text = _dense("pd_op.momentum_", [("p", (4,), t), ("g", (4,), t), ("v", (4,), t), ("lr", (), t),
                                      ("m", (4,), t)], [0, 2, 4],
                  'mu:0.9,multi_precision:true,regularization_coeff:0,regularization_method:"",'
                  'rescale_grad:1,use_nesterov:false')
    out = _run1(text, {"p": p, "g": g, "v": v, "lr": np.array(0.1), "m": m})
    want_p, want = reference("momentum", m, g, 0.1, {"velocity": v})
    np.testing.assert_allclose(out[0], want_p, rtol=1e-13)
    np.testing.assert_allclose(out[1], want["velocity"], rtol=1e-13)
    np.testing.assert_allclose(out[2], want_p, rtol=1e-13)
    text = _dense("pd_op.sgd_", [("p", (4,), t), ("lr", (), t), ("g", (4,), t), ("m", (4,), t)], [0, 3],
                  "multi_precision:true")
    out = _run1(text, {"p": p, "g": g, "lr": np.array(0.1), "m": m})
    np.testing.assert_allclose(out[0], m - 0.1 * g, rtol=1e-13)
    np.testing.assert_allclose(out[1], m - 0.1 * g, rtol=1e-13)


def test_update_of_pieces_with_different_shapes_is_an_error():
    text = _dense("pd_op.sgd_", [("p", (4,), "f32"), ("lr", (), "f32"), ("g", (2,), "f32"), None], [0, None],
                  "multi_precision:false")
    with pytest.raises(SimulationError, match="different local shapes"):
        _run1(text, {"p": np.zeros(4), "g": np.zeros(2), "lr": np.array(0.1)})


def test_assign_out_checks_shapes():
    text = _dense("pd_op.assign_out_", [("x", (4,), "f32"), ("out", (3,), "f32")], [1], "")
    with pytest.raises(SimulationError, match="writes local"):
        _run1(text, {"x": np.zeros(4), "out": np.zeros(3)})
    text = _dense("pd_op.assign_out_", [("x", (3,), "f32"), ("out", (3,), "f32")], [1], "")
    assert list(_run1(text, {"x": np.arange(3.0), "out": np.zeros(3)})[0]) == [0, 1, 2]


def test_partial_input_given_globally_or_per_rank(tmp_path):
    """A partial ``pd_op.data`` fed a global array gets random pieces that sum to it; a mapping
    rank -> array is taken as each rank's own value."""
    progs = shard_all_ranks("dp2mp2", "sgd", 0, tmp_path)
    g = np.arange(30.0).reshape(6, 5)
    (op,) = [op for op in progs[0].ops if op.name == "pd_op.data" and _key(op.results[0]) == "w1@GRAD"]
    d = op.results[0].type.dist
    params, contribs, lr, _ = random_inputs("dp2mp2", "sgd", 0)
    inputs = {"learning_rate_0": np.array(lr), **params,
              **{f"{n}@GRAD": sum(c) for n, c in contribs.items()}, "w1@GRAD": g}
    res = simulate_ranks(progs, inputs)
    pieces = {r: res[r]["%" + op.results[0].name] for r in progs}  # (same numbering on every rank)
    assert not np.allclose(pieces[0], expected_piece(g, d, 0))  # not the whole value on every rank
    for r in progs:  # ranks (0, 2) and (1, 3) are the dp pairs of the two mp columns
        pair = [q for q in progs if d.mesh.coord(q)[1] == d.mesh.coord(r)[1]]
        np.testing.assert_allclose(sum(pieces[q] for q in pair), expected_piece(g, d, r))
    inputs["w1@GRAD"] = {0: np.zeros((3, 5))}
    with pytest.raises(SimulationError, match="not for rank 1"):
        simulate_ranks(progs, inputs)
