"""ZeRO-1 passes on their own, against Paddle 3.3.1's own snapshots (no reshard pass needed):

* ``shard-optimizer``: ``CASE.s0.rR.before_partition`` -> ``CASE.s1.rR.before_partition``;
* ``remove-other-rank{rank=R}``: ``after_reshard`` -> ``after_remove``;
* ``dist-to-dense{rank=R}``: ``after_remove`` -> ``dense``;

for every case of tests/data/corpus/paddle-3.3.1/stage1 and tests/data/oracle/stage1 (all ranks),
text-equal up to a consistent renaming of ring ids.  Plus the optimizer table, option and error
handling, and the memory analysis.
"""

from __future__ import annotations

import re

import pytest

import distc
from distc.analysis.memory import optimizer_memory
from distc.driver import load_inputs
from distc.passes.base import PassContext, PassManager, parse_pipeline
from distc.passes.shard_optimizer import OPTIMIZERS, inplace_map, optimizer_sig, placements_with_sharding
from distc.syntax.diagnostics import DiagnosticError

from conftest import DATA
from irutil import normalize_rings

STAGE1_DIRS = [DATA / "corpus/paddle-3.3.1/stage1", DATA / "oracle/stage1"]
NAME = re.compile(r"^(?P<case>.+)\.(?P<stage>s[01])\.r(?P<rank>\d+)\.(?P<snap>[a-z_.]+)\.ir$")


canon = normalize_rings  # the one ring-id normaliser (tests/irutil.py)


def snapshots() -> dict[tuple[str, str, str, int], dict[str, object]]:
    """(dir, case, stage, rank) -> {snapshot: path}."""
    out: dict = {}
    for d in STAGE1_DIRS:
        for p in sorted(d.glob("*.ir")):
            m = NAME.match(p.name)
            if m:
                out.setdefault((str(d.relative_to(DATA)), m["case"], m["stage"], int(m["rank"])), {})[m["snap"]] = p
    return out


SNAPS = snapshots()


def pairs(src_snap: str, dst_snap: str, *, src_stage: str | None = None):
    """Parametrize over (src path, dst path, rank) for every case/stage/rank that has both."""
    out = []
    for (d, case, stage, rank), files in sorted(SNAPS.items()):
        src_files = SNAPS.get((d, case, src_stage or stage, rank), {})
        if src_snap in src_files and dst_snap in files:
            out.append(pytest.param(src_files[src_snap], files[dst_snap], rank,
                                    id=f"{d.split('/')[0]}/{case}.{stage}.r{rank}"))
    return out


def mesh_dim_names(case: str) -> list[str]:
    """'mlp_mp2dp2_adamw' -> ['mp', 'dp']; 'mlp_dp2mp2x2_adamw' -> ['dp', 'mp', 'x']."""
    token = case.split("_")[1]
    return re.findall(r"([a-z]+)\d+", token)


def run(text: str, pipeline: str, name: str = "<test>") -> str:
    prog = distc.parse(text, name)
    PassManager(parse_pipeline(pipeline)).run(prog, PassContext())
    return str(prog)


# ------------------------------------------------------------------------------ parity
ANNOTATE = [p for p in pairs("before_partition", "before_partition", src_stage="s0") if ".s1." in p.values[1].name]


@pytest.mark.parametrize("src,dst,rank", ANNOTATE)
def test_shard_optimizer_parity(src, dst, rank):
    """shard-optimizer on the s0 program gives Paddle's s1 program (Paddle's own axis rule)."""
    assert canon(run(src.read_text(), "shard-optimizer")) == canon(dst.read_text())


@pytest.mark.parametrize("src,dst,rank", ANNOTATE)
def test_shard_optimizer_parity_named_axis(src, dst, rank):
    """... and with the sharding mesh dim named explicitly (the dp dim)."""
    case = NAME.match(dst.name)["case"]  # type: ignore[index]
    dims = mesh_dim_names(case)
    out = run(src.read_text(), f"shard-optimizer{{axis=dp,mesh_dims={','.join(dims)}}}")
    assert canon(out) == canon(dst.read_text())
    out = run(src.read_text(), f"shard-optimizer{{axis={dims.index('dp')}}}")
    assert canon(out) == canon(dst.read_text())


@pytest.mark.parametrize("src,dst,rank", pairs("after_reshard", "after_remove"))
def test_remove_other_rank_parity(src, dst, rank):
    assert canon(run(src.read_text(), f"remove-other-rank{{rank={rank}}}")) == canon(dst.read_text())


@pytest.mark.parametrize("src,dst,rank", pairs("after_remove", "dense"))
def test_dist_to_dense_parity(src, dst, rank):
    assert canon(run(src.read_text(), f"dist-to-dense{{rank={rank}}}")) == canon(dst.read_text())


def test_parity_inputs_present():
    # the three corpus cases, both stages, rank 0: every snapshot kind is covered above
    n = sum(1 for (d, *_), f in SNAPS.items() if d.startswith("corpus") for s in f)
    assert n == 48
    assert len(pairs("after_reshard", "after_remove")) >= 6
    assert len(pairs("after_remove", "dense")) >= 6


# ------------------------------------------------------------------------------ the table
def test_optimizer_table_signatures():
    assert OPTIMIZERS[("pd_op.adamw_", 13)].operands[5] == ("state", "moment2_max")
    assert OPTIMIZERS[("pd_op.adamw_", 12)].operands[5] == ("beta_pow", "beta1_pow")
    assert [r for r, _ in OPTIMIZERS[("pd_op.sgd_", 4)].operands] == ["param", "lr", "grad", "master"]
    assert OPTIMIZERS[("pd_op.momentum_", 5)].operands[2] == ("state", "velocity")
    for (name, n), sig in OPTIMIZERS.items():
        assert len(sig.operands) == n, name
        assert sig.operands[0][0] == "param" and sig.inplace[0] == 0, name
        assert all(0 <= i < n for i in sig.inplace), name


def test_inplace_map_of_both_adamw_signatures():
    seed = distc.parse((DATA / "corpus/seed/seed_stage1_eraB.ir").read_text())
    (op,) = seed.find("pd_op.adamw_")
    assert optimizer_sig(op) is OPTIMIZERS[("pd_op.adamw_", 12)]
    assert inplace_map(op) == {0: 0, 1: 3, 2: 4, 3: 5, 4: 6, 5: 7}
    cur = distc.parse((DATA / "corpus/paddle-3.3.1/stage1/mlp_dp4_adamw.s0.r0.before_partition.ir").read_text())
    op = cur.find("pd_op.adamw_")[0]
    assert inplace_map(op) == {0: 0, 1: 3, 2: 4, 3: 5, 4: 6, 5: 7, 6: 8}


def test_placements_with_sharding():
    from distc.ir.dist import ProcessMesh, TensorDistAttr

    m = ProcessMesh((2, 2), (0, 1, 2, 3))
    fmt = lambda pl: [str(p) for p in pl]  # noqa: E731
    # replicated weight: shard tensor axis 0 on the sharding dim
    assert fmt(placements_with_sharding(TensorDistAttr(m, (-1, -1)), 2, 0)) == ["Shard(dim=0)", "Replicate()"]
    # column-parallel weight (tensor axis 1 on mp): axis 0 left for dp
    assert fmt(placements_with_sharding(TensorDistAttr(m, (-1, 1)), 2, 0)) == ["Shard(dim=0)", "Shard(dim=1)"]
    # row-parallel weight (tensor axis 0 on mp): axis 1 for dp
    assert fmt(placements_with_sharding(TensorDistAttr(m, (1, -1)), 2, 0)) == ["Shard(dim=1)", "Shard(dim=0)"]
    # 1-D parameter already sharded on its only axis: nothing left to shard
    assert fmt(placements_with_sharding(TensorDistAttr(m, (1,)), 1, 0)) == ["Replicate()", "Shard(dim=0)"]


# ------------------------------------------------------------------------------ options, errors
CORPUS = DATA / "corpus/paddle-3.3.1/stage1"


def test_stage0_is_identity():
    text = (CORPUS / "mlp_dp4_adamw.s0.r0.before_partition.ir").read_text()
    assert run(text, "shard-optimizer{stage=0}") == text


def test_unknown_axis_name_is_a_diagnostic():
    text = (CORPUS / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir").read_text()
    with pytest.raises(DiagnosticError, match="unknown sharding mesh dim 'pp'"):
        run(text, "shard-optimizer{axis=pp,mesh_dims=dp,mp}")
    with pytest.raises(DiagnosticError, match="out of range"):
        run(text, "shard-optimizer{axis=2}")


def test_unknown_axis_name_without_names_points_to_the_shard_option():
    from click.testing import CliRunner

    from distc.cli import main

    path = CORPUS / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir"
    r = CliRunner().invoke(main, ["shard", str(path), "--axis", "dp", "-q"])
    assert r.exit_code == 1 and "unknown sharding mesh dim 'dp'" in r.output
    assert "--mesh-dims dp,mp" in r.output and "Traceback" not in r.output


def test_axis_where_a_parameter_is_sharded_is_refused_with_location():
    # on [[0,1],[2,3]] the weights are Shard over mp (mesh dim 1): Paddle refuses that axis
    path = CORPUS / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir"
    with pytest.raises(DiagnosticError) as ei:
        run(path.read_text(), "shard-optimizer{axis=1}", str(path))
    e = ei.value
    assert "should be Replicate" in e.message and e.line is not None
    assert '"pd_op.adamw_"' in path.read_text().splitlines()[e.line - 1]


def test_parameters_with_first_dim_1_keep_replicated_states():
    prog = distc.parse(MOMENTUM.replace("8x6xf32", "1x6xf32").replace("shape:[8,6]", "shape:[1,6]"))
    ctx = PassContext()
    PassManager(parse_pipeline("shard-optimizer")).run(prog, ctx)
    assert any("first dim 1" in n for n in ctx.notes)
    assert prog.find("pd_op.data")[0].results[0].type.dist.dims_mapping == (-1, -1)


MOMENTUM = """{
    (%0) = "pd_op.data" () {dtype:float32,name:"w_velocity_0",op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},chunk_id:-1},persistable:[true],place:Place(undefined:0),shape:[8,6],stop_gradient:[true]} : () -> pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>
    (%1) = "pd_op.data" () {dtype:float32,name:"learning_rate_0",op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[], placements:[Replicate()]},chunk_id:-1},persistable:[true],place:Place(undefined:0),shape:[],stop_gradient:[true]} : () -> pd_dist.tensor<f32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[], placements:[Replicate()]>
    (%2) = "builtin.parameter" () {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},chunk_id:-1},parameter_name:"w",persistable:[true],stop_gradient:[false]} : () -> pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>
    (%3) = "pd_op.data" () {dtype:float32,name:"w@GRAD",op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], partial(0,SUM), placements:[Partial(reduce_type=SUM)]},chunk_id:-1},persistable:[false],place:Place(undefined:0),shape:[8,6],stop_gradient:[false]} : () -> pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], partial(0,SUM), placements:[Partial(reduce_type=SUM)]>
    (%4, %5, %6) = "pd_op.momentum_" (%2, %3, %0, %1, <<NULL VALUE>>) {mu:0.9,multi_precision:false,op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},operand(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},operand(1):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},operand(2):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},operand(3):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[], placements:[Replicate()]},operand(4):{mesh_shape:[],process_ids:[],dims_mappings:[]},result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},result(1):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},result(2):{mesh_shape:[],process_ids:[],dims_mappings:[]},chunk_id:-1},op_role:2,regularization_coeff:0,regularization_method:"",rescale_grad:1,stop_gradient:[false,false,false],use_nesterov:false} : (pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>, pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], partial(0,SUM), placements:[Partial(reduce_type=SUM)]>, pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>, pd_dist.tensor<f32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[], placements:[Replicate()]>, <<NULL TYPE>>) -> pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>, pd_dist.tensor<8x6xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>, <<NULL TYPE>>
}
"""


def test_adam_is_sharded_like_adamw():
    """pd_op.adam_ (refused by Paddle's shard_optimizer) has adamw_'s operands: same result."""
    src = (CORPUS / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir").read_text()
    want = (CORPUS / "mlp_dp2mp2_adamw.s1.r0.before_partition.ir").read_text()
    adam = lambda t: t.replace('"pd_op.adamw_"', '"pd_op.adam_"')  # noqa: E731
    assert run(adam(src), "shard-optimizer{axis=0}") == adam(want)


def test_momentum_is_sharded_like_adamw():
    """Paddle refuses Momentum in shard_optimizer; distc shards its velocity the same way."""
    prog = distc.parse(MOMENTUM)
    PassManager(parse_pipeline("shard-optimizer,partition")).run(prog, PassContext())
    out = str(prog)
    vel = prog.find("pd_op.data")[0]
    assert vel.results[0].type.dist.dims_mapping == (0, -1)
    (mom,) = prog.find("pd_op.momentum_")
    d = mom.dist_attr
    assert [getattr(e, "dims_mapping", None) for e in d.operands] == [(0, -1), (0, -1), (0, -1), (), ()]
    assert [getattr(e, "dims_mapping", None) for e in d.results] == [(0, -1), (0, -1), ()]
    # partition: param and grad resharded before the update, param resharded back and assigned
    names = [op.name for op in prog.ops]
    i = names.index("pd_op.momentum_")
    assert names[i - 2:i] == ["dist_op.reshard", "dist_op.reshard"]
    assert names[i + 1:i + 3] == ["dist_op.reshard", "pd_op.assign_out_"]
    assert "op_role:2" in out.splitlines()[i - 1]


# ------------------------------------------------------------------------------ memory
def test_memory_report_zero1_saving():
    text = (CORPUS / "mlp_dp4_adamw.s0.r0.before_partition.ir").read_text()
    prog = distc.parse(text)
    before = optimizer_memory(prog, 0)
    PassManager(parse_pipeline("shard-optimizer")).run(prog, PassContext())
    after = optimizer_memory(prog, 0)
    n = 16 * 32 + 32 + 32 * 16 + 16  # parameter elements of Linear(16,32), Linear(32,16)
    assert before.params == after.params == 4 * n
    assert before.grads == after.grads == 4 * n
    betas = 4 * 2 * 4  # two 1-element beta-pow accumulators a parameter
    assert before.states == 2 * 4 * n + betas
    assert after.states == 2 * 4 * n // 4 + betas  # moments split over dp4
    assert before.by_name()["linear_0.w_0.dist"].states["moment1"] == 16 * 32 * 4
    assert after.by_name()["linear_0.w_0.dist"].states["moment1"] == 4 * 32 * 4


def test_memory_report_uneven_last_rank():
    # 15 rows over dp4: ranks 0-2 hold 4 rows, rank 3 holds 3
    path = DATA / "oracle/stage1/mlp15_dp4_adamw.s1.r3.before_partition.ir"
    if not path.exists():
        pytest.skip("oracle case not generated")
    prog = distc.parse(path.read_text())
    r0 = optimizer_memory(prog, 0).by_name()["linear_0.w_0.dist"].states["moment1"]
    r3 = optimizer_memory(prog, 3).by_name()["linear_0.w_0.dist"].states["moment1"]
    assert (r0, r3) == (4 * 30 * 4, 3 * 30 * 4)


# ------------------------------------------------------------------------------ startup
def test_shard_startup_inserts_reshards_for_sharded_states():
    """shard-startup{stop=insert}: a reshard after each sharded state's initializer (no lowering)."""
    main = CORPUS / "mlp_dp4_adamw.s1.r0.before_partition.ir"
    startup = CORPUS / "mlp_dp4_adamw.s0.r0.startup_after_remove.ir"
    prog = distc.parse(startup.read_text())
    passes = parse_pipeline(f"shard-startup{{main={main},stop=insert}}")
    load_inputs(passes)  # the driver loads main=PATH (passes read no files)
    PassManager(passes).run(prog, PassContext())
    reshards = prog.find("dist_op.reshard")
    assert len(reshards) == 8  # two moments of four parameters
    for r in reshards:
        init, sink = r.operand(0).owner, r.results[0].users[0]
        assert init.name == "pd_op.full" and str(init.attr("persistable")) == "[false]"
        assert sink.name == "builtin.shadow_output" and "moment" in str(sink.attr("output_name"))
        assert r.results[0].type.dist.dims_mapping[0] == 0
    assert all(op.attr("op_role") is not None for op in prog.ops)
    # the replicated states (beta pows, learning rate) and parameters are untouched
    assert sum(op.name == "builtin.set_parameter" for op in prog.ops) == 4


def _t(shape: str, dm: str, pl: str) -> str:
    return f"pd_dist.tensor<{shape}, mesh_shape:[2],process_ids:[0,1],dims_mappings:[{dm}], placements:[{pl}]>"


def _e(dm: str, pl: str) -> str:
    return f"mesh_shape:[2],process_ids:[0,1],dims_mappings:[{dm}], placements:[{pl}]"


M2 = "mesh:{shape:[2],process_ids:[0,1]}"
S0, R1, R = _t("4x8xf32", "0,-1", "Shard(dim=0)"), _t("1xi32", "-1", "Replicate()"), _t("8x8xf32", "-1,-1", "Replicate()")
CONCAT = f"""{{
    (%0) = "pd_op.data" () {{dtype:float32,name:"a",op_dist_attr:{{{M2},result(0):{{{_e("0,-1", "Shard(dim=0)")}}},chunk_id:-1}},place:Place(undefined:0),shape:[4,8],stop_gradient:[false]}} : () -> {S0}
    (%1) = "pd_op.data" () {{dtype:float32,name:"b",op_dist_attr:{{{M2},result(0):{{{_e("0,-1", "Shard(dim=0)")}}},chunk_id:-1}},place:Place(undefined:0),shape:[4,8],stop_gradient:[true]}} : () -> {S0}
    (%2) = "builtin.combine" (%0, %1) {{stop_gradient:[false]}} : ({S0}, {S0}) -> vec[{S0},{S0}]
    (%3) = "pd_op.full" () {{dtype:int32,op_dist_attr:{{{M2},result(0):{{{_e("-1", "Replicate()")}}},chunk_id:-1}},place:Place(cpu),shape:[1],stop_gradient:[true],value:0}} : () -> {R1}
    (%4) = "pd_op.concat" (%2, %3) {{op_dist_attr:{{{M2},operand(0):{{[{_e("-1,-1", "Replicate()")},{_e("-1,-1", "Replicate()")}]}},operand(1):{{{_e("-1", "Replicate()")}}},result(0):{{{_e("-1,-1", "Replicate()")}}},chunk_id:-1}},op_role:1,stop_gradient:[false]}} : (vec[{S0},{S0}], {R1}) -> {_t("8x8xf32", "-1,-1", "Replicate()")}
}}
"""


def test_partition_rebuilds_a_combine_from_resharded_inputs():
    prog = distc.parse(CONCAT)
    PassManager(parse_pipeline("partition")).run(prog, PassContext())
    assert [op.name for op in prog.ops] == ["pd_op.data", "pd_op.data", "pd_op.full", "dist_op.reshard",
                                            "dist_op.reshard", "builtin.combine", "pd_op.concat"]
    comb = prog.ops[5]
    assert str(comb.attr("stop_gradient")) == "[false]" and str(comb.attr("op_role")) == "1"
    assert [v.owner.name for v in comb.operands] == ["dist_op.reshard", "dist_op.reshard"]
    for r in prog.ops[3:5]:
        assert r.results[0].type.dist.dims_mapping == (-1, -1)
    # reshard stop_gradient follows its input
    assert [str(r.attr("stop_gradient")) for r in prog.ops[3:5]] == ["[false]", "[true]"]


def test_dense_programs_pass_through_the_whole_pipeline(tmp_path):
    """Programs with no dist attributes at all (control flow, pylayer, kernel dialect) go through
    `distc shard --dense` without losing ops."""
    from click.testing import CliRunner

    from distc.cli import main

    for name in ("pylayer.ir", "pylayer_to_static.ir", "if_else.ir", "while_loop.ir"):
        src = DATA / "oracle/syntax" / name
        out = tmp_path / name
        # no optimizer op: an error at stage 1 (nothing for ZeRO), a warning at stage 0
        r = CliRunner().invoke(main, ["shard", str(src), "--stage", "0", "--dense", "-q", "-o", str(out)])
        assert r.exit_code == 0, r.output
        assert "warning: MAIN has no optimizer update op" in r.stderr
        assert out.read_text() == src.read_text()  # nothing distributed: nothing changes
