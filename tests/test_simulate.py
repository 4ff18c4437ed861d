"""The SPMD simulator (distc.analysis.simulate), validated on Paddle 3.3.1's own lowered programs.

For every reshard case whose after-files exist for every rank of its source and destination
meshes (shared corpus rank 0 + tests/data/oracle/reshard ranks 1..), the simulator must prove
Paddle's lowering correct, unless the case is one of the Paddle bugs listed in PADDLE_BUGS (where
it must find the bug).
"""

from __future__ import annotations

import collections
import pathlib
import re

import numpy as np
import pytest

from conftest import DATA
from distc import parse
from distc.analysis.simulate import (
    SimulationError, check_layout, distribute, expected_piece, reduce_arrays, simulate_ranks,
    verify_reshard,
)
from distc.ir.attrs import IntAttr
from distc.ir.dist import ProcessMesh, TensorDistAttr

CORPUS = DATA / "corpus" / "paddle-3.3.1" / "reshard"
ORACLE = DATA / "oracle" / "reshard"

_FILE = re.compile(r"(.*)\.r(\d+)\.(before\.ir|after\.ir|error\.txt)$")


def reshard_cases() -> dict[str, dict[int, dict[str, pathlib.Path]]]:
    """name -> rank -> {'before.ir'|'after.ir'|'error.txt': path}, corpus and oracle merged."""
    out: dict = collections.defaultdict(dict)
    for d in (CORPUS, ORACLE):
        if not d.is_dir():
            continue
        for f in d.iterdir():
            m = _FILE.match(f.name)
            if m:
                out[m.group(1)].setdefault(int(m.group(2)), {})[m.group(3)] = f
    return dict(out)


_PARSED: dict[pathlib.Path, object] = {}


def load(path: pathlib.Path):
    p = _PARSED.get(path)
    if p is None:
        p = _PARSED[path] = parse(path.read_text(), str(path))
    return p


def case_kind(ranks: dict) -> tuple[str, set]:
    """('refused'|'incomplete'|'complete', the ranks of the reshard's meshes); parses the before
    program only."""
    bf = next((v["before.ir"] for v in ranks.values() if "before.ir" in v), None)
    if bf is None:
        return "refused", set()
    rs = load(bf).find("dist_op.reshard")[0]
    src, dst = rs.operands[0].type.dist, rs.results[0].type.dist
    need = set(src.mesh.process_ids) | set(dst.mesh.process_ids)
    if any("error.txt" in ranks.get(r, {}) for r in need):
        return "refused", need
    if not all("after.ir" in ranks.get(r, {}) for r in need):
        return "incomplete", need
    return "complete", need


def case_status(name: str, ranks: dict) -> tuple[str, object, dict]:
    """('refused'|'incomplete'|'complete', before program, {rank: after program})."""
    kind, need = case_kind(ranks)
    bf = next((v["before.ir"] for v in ranks.values() if "before.ir" in v), None)
    before = load(bf) if bf else None
    return kind, before, {r: load(ranks[r]["after.ir"]) for r in sorted(need)} if kind == "complete" else {}


class _Status(dict):
    """name -> case_status(...), parsed when a test first asks (not at collection: a worker parses
    only the after programs of the cases it runs)."""

    def __missing__(self, name):
        v = self[name] = case_status(name, CASES[name])
        return v


# Paddle 3.3.1 lowerings the simulator proves wrong (every rank's after-file is Paddle's own).
_R2P_ND = ("R->P on a mesh dim of the 2-D mesh: global rank 0 keeps the value, every other rank "
           "writes zeros, so groups without rank 0 sum to 0; the zero `full` also has the global "
           "shape where the value is sharded on the other mesh dim")
_R2P_PS1 = _R2P_ND + "; and ->[P,S1] never slices axis 1 (no R->S step is emitted)"
_COSHARD = ("co-shard [Shard(0), Shard(0)] is lowered as its dims_mapping [1,-1] = [R, S0]: "
            "ranks hold twice the rows the placements ask for")
_UNEVEN_P2S = ("uneven P->S: the last rank drops the padding with split sections in the global "
               "frame ([n, pad]) on its local piece: the split cannot run")
PADDLE_BUGS: dict[str, str] = {
    "cross_m2_R_to_P": "R->P on destination mesh [2,3] (no global rank 0): every rank writes zeros",
    **{f"m22_{a}_to_{b}": _R2P_ND for a in ("RR", "S0R", "RS1", "S0S1", "S1S0", "S0S0") for b in ("PR", "RP")},
    **{f"m22_{a}_to_{b}": _R2P_ND for a, b in (("PR", "PP"), ("PR", "RP"), ("RP", "PP"), ("RP", "PR"),
                                                ("PS1", "PP"), ("PS1", "RP"))},
    **{f"m22_{a}_to_PS1": _R2P_PS1 for a in ("RR", "S0R", "RS1", "S0S1", "S1S0", "S0S0", "RP")},
    **{f"m22_{a}_to_S0S0": _COSHARD for a in ("RR", "S0R", "RS1", "S0S1", "S1S0", "PR", "RP", "PS1", "PP")},
    "m22u_7x9_RR_to_S0S0": _COSHARD,
    **{f"{m}_{s}_P_to_{b}": _UNEVEN_P2S for m in ("u2", "u3") for s in ("5x7", "7x5") for b in ("S0", "S1")},
}
# (PP->PR, PP->RP, PP->PS1, PR->PS1, PS1->PR need no R->P step: Paddle gets them right)

CASES = reshard_cases()
KIND = {name: case_kind(ranks)[0] for name, ranks in sorted(CASES.items())}
STATUS = _Status()
COMPLETE = sorted(n for n, k in KIND.items() if k == "complete")


def test_oracle_data_is_there():
    assert len(COMPLETE) >= 140, "expected the corpus + oracle reshard cases with all ranks"


@pytest.mark.parametrize("name", COMPLETE)
def test_paddle_lowering(name):
    _, before, progs = STATUS[name]
    rep = verify_reshard(progs, before=before)
    if name in PADDLE_BUGS:
        assert not rep.ok, f"{name}: listed as a Paddle bug ({PADDLE_BUGS[name]}) but proven correct"
    else:
        assert rep.ok, rep.summary()
        assert rep.checked == sorted(rep.dst.mesh.process_ids)


def test_every_listed_bug_is_a_complete_case():
    assert set(PADDLE_BUGS) <= set(COMPLETE)


def test_paddle_bug_symptoms():
    # the simulator names what goes wrong
    s = verify_reshard(STATUS["u3_5x7_P_to_S0"][2], before=STATUS["u3_5x7_P_to_S0"][1])
    assert "pd_op.split" in s.error and "sections [5, 1]" in s.error and "rank 2" in s.error
    s = verify_reshard(STATUS["cross_m2_R_to_P"][2], before=STATUS["cross_m2_R_to_P"][1])
    assert s.problems == [s.problems[0]] and "ranks [2, 3]" in s.problems[0]
    s = verify_reshard(STATUS["m22_RR_to_S0S0"][2], before=STATUS["m22_RR_to_S0S0"][1])
    assert "local shape [4, 12], expected [2, 12]" in s.problems[0]


def test_coshard_bug_is_r_s0_layout():
    """Paddle's [S0,S0] result is exactly the [R,S0] layout (its dims_mapping)."""
    _, before, progs = STATUS["m22_RR_to_S0S0"]
    dst = before.find("dist_op.reshard")[0].results[0].type.dist
    r_s0 = TensorDistAttr(dst.mesh, dst.dims_mapping, ())
    assert verify_reshard(progs, dst=r_s0).ok


# ------------------------------------------------------------------------------ discrimination
def _complete(name):
    _, before, progs = STATUS[name]
    return before, {r: p.clone() for r, p in progs.items()}


def test_wrong_reduce_type_is_caught():
    before, progs = _complete("m2_P_to_R")
    assert verify_reshard(progs, before=before).ok
    op = progs[1].find("pd_op.all_reduce")[0]
    op.set_attr("reduce_type", IntAttr(1))  # MAX instead of SUM on one rank
    rep = verify_reshard(progs, before=before)
    assert not rep.ok and "different reduce types" in rep.error
    for p in progs.values():
        p.find("pd_op.all_reduce")[0].set_attr("reduce_type", IntAttr(1))
    rep = verify_reshard(progs, before=before)
    assert not rep.ok and "differs" in rep.problems[0]


def test_swapped_slices_are_caught():
    before, progs = _complete("m2_R_to_S0")
    progs[0], progs[1] = progs[1], progs[0]
    assert not verify_reshard(progs, before=before).ok


def test_missing_collective_deadlocks():
    before, progs = _complete("m22_S0S1_to_RR")
    progs[3].find("pd_op.all_gather")[-1].drop_all_uses_and_erase()
    with pytest.raises(SimulationError, match="deadlock"):
        simulate_ranks(progs, {"x": np.zeros((8, 12))})


def test_deadlock_names_the_collective_that_waits_forever():
    before, progs = _complete("m22_S0S1_to_RR")
    progs[3].find("pd_op.all_gather")[-1].drop_all_uses_and_erase()
    with pytest.raises(SimulationError, match="deadlock") as e:
        simulate_ranks(progs, {"x": np.zeros((8, 12))})
    assert e.value.op is not None and e.value.op.name == "pd_op.all_gather"
    assert 3 in e.value.op.dist_attr.mesh.process_ids and e.value.rank != 3
    assert "rank 3 has finished its program" in str(e.value)


def test_mismatched_collectives():
    before, progs = _complete("m2_S0_to_R")
    x = np.arange(32.0).reshape(4, 8)
    res = simulate_ranks(progs, {"x": x})
    assert all(np.array_equal(res[r]["%2"], x) for r in (0, 1))
    ag = progs[1].find("pd_op.all_gather")[0]
    ag.name = "pd_op.all_to_all"
    with pytest.raises(SimulationError, match="mismatched collectives"):
        simulate_ranks(progs, {"x": x})


def test_recv_shape_checked():
    before, progs = _complete("cross_m2_S0")
    recv = progs[2].find("pd_op.recv_v2")[0]
    from distc.ir.attrs import ArrayAttr
    recv.set_attr("out_shape", ArrayAttr((IntAttr(4), IntAttr(8))))
    with pytest.raises(SimulationError, match="out_shape"):
        simulate_ranks(progs, {"x": np.zeros((4, 8))})


def test_cross_mesh_pairs_by_mesh_position():
    # ring ids are process-local in Paddle's dumps (rank 0 sends on 15, rank 2 receives on 14)
    before, progs = _complete("cross_m2_S1")
    x = np.arange(32.0).reshape(4, 8)
    res = simulate_ranks(progs, {"x": x})
    assert np.array_equal(res[2]["%2"], x[:, :4]) and np.array_equal(res[3]["%2"], x[:, 4:])


def test_dangling_use_is_an_error():
    before, progs = _complete("m2_S0_to_R")
    # the all_gather now claims a mesh without rank 1, whose consumer runs on rank 1
    import dataclasses
    ag = progs[1].find("pd_op.all_gather")[0]
    ag.dist_attr = dataclasses.replace(ag.dist_attr, mesh=ProcessMesh((1,), (0,)))
    with pytest.raises(SimulationError):
        simulate_ranks(progs, {"x": np.zeros((4, 8))})


# ------------------------------------------------------------------------------ layouts
M1 = ProcessMesh((3,), (0, 1, 2))
M2 = ProcessMesh((2, 2), (0, 1, 2, 3))
M3 = ProcessMesh((2, 2, 2), tuple(range(8)))
M_OFF = ProcessMesh((2, 2), (4, 6, 5, 7))


@pytest.mark.parametrize("mesh,dm,partial,shape", [
    (M1, (0, -1), (), (7, 5)),
    (M1, (-1, 0), (), (4, 2)),
    (M1, (-1, -1), ((0, "SUM"),), (3, 4)),
    (M1, (-1, -1), ((0, "AVG"),), (3, 4)),
    (M1, (-1, -1), ((0, "MAX"),), (3, 4)),
    (M1, (-1, -1), ((0, "MIN"),), (3, 4)),
    (M1, (-1, -1), ((0, "PRODUCT"),), (3, 4)),
    (M2, (1, 0), (), (7, 9)),
    (M2, (-1, 1), ((0, "SUM"),), (5, 3)),
    (M2, (-1, -1), ((0, "SUM"), (1, "MAX")), (4, 4)),
    (M3, (2, -1, 0), ((1, "AVG"),), (5, 6, 7)),
    (M_OFF, (0, -1), ((1, "SUM"),), (3, 3)),
])
def test_distribute_then_check(mesh, dm, partial, shape):
    d = TensorDistAttr(mesh, dm, partial)
    g = np.random.default_rng(1).standard_normal(shape)
    pieces = distribute(g, d, 3)
    assert sorted(pieces) == sorted(mesh.process_ids)
    for r in mesh.process_ids:
        assert pieces[r].shape == d.local_shape(shape, r)
    assert check_layout(pieces, g, d) == []
    bad = dict(pieces)
    r = [q for q in mesh.process_ids if pieces[q].size][-1]
    bad[r] = pieces[r] + 1
    assert check_layout(bad, g, d) != []


def test_uneven_pieces_follow_split_bounds():
    d = TensorDistAttr(ProcessMesh((3,), (0, 1, 2)), (0,), ())
    g = np.arange(5.0)
    assert [list(expected_piece(g, d, r)) for r in range(3)] == [[0, 1], [2, 3], [4]]
    d = TensorDistAttr(ProcessMesh((4,), (0, 1, 2, 3)), (0,), ())
    # ceil(5/4) = 2: the last rank holds nothing
    assert [len(expected_piece(g, d, r)) for r in range(4)] == [2, 2, 1, 0]


def test_reduce_arrays():
    a, b = np.array([1.0, 5.0]), np.array([3.0, 2.0])
    assert list(reduce_arrays([a, b], 0)) == [4, 7]
    assert list(reduce_arrays([a, b], "MAX")) == [3, 5]
    assert list(reduce_arrays([a, b], 2)) == [1, 2]
    assert list(reduce_arrays([a, b], "AVG")) == [2, 3.5]
    assert list(reduce_arrays([a, b], "PRODUCT")) == [3, 10]


# ------------------------------------------------------------------------------ transitively
# Cases dumped for some ranks only (3-D mesh: ranks 0 and 5; offset ids: ranks 4 and 6).
# tests/test_reshard_parity.py shows distc's Paddle-only lowering equals Paddle's files on the
# dumped ranks; here that lowering, for every rank, is proven (or shown wrong where Paddle is).
INCOMPLETE = sorted(n for n, k in KIND.items() if k == "incomplete")
PADDLE_BUGS_VIA_PARITY = {
    "m4567_R_to_P": "R->P on mesh [4,5,6,7] (no global rank 0): every rank writes zeros",
    "m45_67_RR_to_PR": "R->P on a 2-D mesh without rank 0",
    "m222_S0RR_to_RRP": "R->P on a 3-D mesh: groups without global rank 0 hold zeros",
}


@pytest.mark.parametrize("name", INCOMPLETE)
def test_paddle_lowering_via_parity(name):
    from distc.passes.reshard import lower_program

    _, before, _ = STATUS[name]
    rs = before.find("dist_op.reshard")[0]
    ranks = sorted(set(rs.operand(0).dist_attr.mesh.process_ids) | set(rs.results[0].dist_attr.mesh.process_ids))
    progs = {}
    for r in ranks:
        p = before.clone()
        lower_program(p, r, paddle_only=True)
        progs[r] = p
    rep = verify_reshard(progs, before=before)
    assert rep.ok == (name not in PADDLE_BUGS_VIA_PARITY), rep.summary()


# ------------------------------------------------------------------------------ 2024 op names
def _text_2024(src: TensorDistAttr, dst: TensorDistAttr, shape) -> str:
    sh = "x".join(map(str, shape))
    a, b = src.format(placements=False), dst.format(placements=False)
    m = (f"mesh:{{shape:[{','.join(map(str, src.mesh.shape))}],"
         f"process_ids:[{','.join(map(str, src.mesh.process_ids))}]}}")
    t = f"pd_dist.tensor<{sh}xf32, "
    return (
        "{\n"
        f'    (%0) = "pd_op.data" () {{dtype:(pd_op.DataType)float32,name:"x",place:(pd_op.Place)Place(undefined:0),'
        f'shape:(pd_op.IntArray)[{",".join(map(str, shape))}],stop_gradient:[true]}} : () -> builtin.tensor<{sh}xf32>\n'
        f'    (%1) = "dist_op.shard_tensor" (%0) {{op_dist_attr:{{{m},result(0):{{{a}}},chunk_id:-1}},'
        f"stop_gradient:[true]}} : (builtin.tensor<{sh}xf32>) -> {t}{a}>\n"
        f'    (%2) = "dist_op.reshard" (%1) {{op_dist_attr:{{{m},operand(0):{{{a}}},result(0):{{{b}}},chunk_id:-1}},'
        f"stop_gradient:[true]}} : ({t}{a}>) -> {t}{b}>\n"
        "}\n")


@pytest.mark.parametrize("src,dst,shape,op", [
    (((-1, -1), ((0, "SUM"),)), ((-1, -1), ()), (4, 8), "pd_op.c_allreduce_sum_"),
    (((-1, -1), ((0, "MAX"),)), ((-1, -1), ()), (4, 8), "pd_op.c_allreduce_max_"),
    (((0, -1), ()), ((-1, -1), ()), (4, 8), "pd_op.c_allgather"),
    (((-1, 0), ()), ((-1, -1), ()), (5, 7), "pd_op.c_allgather"),
    (((-1, -1), ((0, "SUM"),)), ((0, -1), ()), (4, 8), "pd_op.c_reducescatter"),
    (((-1, -1), ((0, "AVG"),)), ((-1, 0), ()), (5, 7), "pd_op.c_reducescatter"),
])
def test_2024_collective_names(src, dst, shape, op):
    """Typed-attribute (2024) programs lower to c_allreduce_*_/c_allgather/c_reducescatter with
    ``nranks``: the simulator runs them the same way."""
    from distc.passes.reshard import lower_program

    mesh = ProcessMesh((2,), (0, 1))
    text = _text_2024(TensorDistAttr(mesh, *src), TensorDistAttr(mesh, *dst), shape)
    progs = {}
    for r in (0, 1):
        progs[r] = parse(text)
        lower_program(progs[r], r)
    assert op in {o.name for o in progs[1].ops}
    assert verify_reshard(progs, before=parse(text)).ok
