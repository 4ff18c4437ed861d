"""distc's extra reshard functions (distc/passes/reshard/x_*.py), proven with the SPMD simulator.

Every case is lowered by distc for every rank of its meshes and run by
:func:`distc.analysis.simulate.verify_reshard`, which checks each rank's piece of the result
against the serial meaning of the destination layout.
"""

from __future__ import annotations

import re

import pytest

from distc.analysis.simulate import verify_reshard
from distc.ir.dist import ProcessMesh
from distc.passes.base import PassContext, PassManager
from distc.passes.reshard import functions, lower_program
from distc.passes.reshard import extra_plan as X
from distc.passes.reshard.explore import build_program, parse_placements
from distc.passes.reshard.util import describe
from distc.passes.reshard_pass import ReshardPass
from distc.syntax.diagnostics import DiagnosticError

from test_simulate import COMPLETE, PADDLE_BUGS, STATUS

X_FUNCTIONS = ("x_p_to_r", "x_p_to_s", "x_r_to_p", "x_s_to_r", "x_s_to_p", "x_p_to_p", "x_s_to_s")


def lower_all(mesh, sp, dst_mesh, dp, shape, *, paddle_only=False, enable=(), disable=()):
    """Lower the one-reshard program for every rank; (before, {rank: program}, functions used, notes)."""
    before = build_program(mesh, sp, dst_mesh, dp, shape)
    ranks = sorted(set(mesh.process_ids) | set(dst_mesh.process_ids))
    progs, used, notes = {}, [], []
    for r in ranks:
        p = build_program(mesh, sp, dst_mesh, dp, shape)
        res = lower_program(p, r, paddle_only=paddle_only, enable=enable, disable=disable)
        used.extend(s.function for s in res.steps)
        notes.extend(res.notes)
        progs[r] = p
    return before, progs, used, notes


def prove(mesh, sp, dp, shape, dst_mesh=None, enable=()):
    dst_mesh = dst_mesh or mesh
    before, progs, used, notes = lower_all(mesh, sp, dst_mesh, dp, shape, enable=enable)
    rep = verify_reshard(progs, before=before)
    assert rep.ok, f"{sp} -> {dp} {list(shape)} on {list(mesh.process_ids)} via {sorted(set(used))}:\n{rep}"
    return used, notes


def test_registered():
    names = {f.name: f for f in functions()}
    for n in X_FUNCTIONS:
        assert n in names and not names[n].paddle


# ------------------------------------------------------------------ the corpus's 16 refusals
M2 = ProcessMesh((2,), (0, 1))
CORPUS_REFUSED = [
    ("P", "Pavg"), ("P", "Pmax"), ("Pavg", "P"), ("Pavg", "Pmax"), ("Pmax", "P"), ("Pmax", "Pavg"),
    ("Pavg", "S0"), ("Pavg", "S1"), ("Pmax", "S0"), ("Pmax", "S1"),
    ("S0", "P"), ("S0", "Pavg"), ("S0", "Pmax"), ("S1", "P"), ("S1", "Pavg"), ("S1", "Pmax"),
]
_FUNC_FOR = {("P", "P"): "x_p_to_p", ("P", "S"): "x_p_to_s", ("S", "P"): "x_s_to_p"}


def test_corpus_refusals_are_the_error_files(data_dir):
    errs = sorted(p.name for p in (data_dir / "corpus/paddle-3.3.1/reshard").glob("*.error.txt"))
    assert errs == sorted(f"m2_{a}_to_{b}.r0.error.txt" for a, b in CORPUS_REFUSED)


@pytest.mark.parametrize("a,b", CORPUS_REFUSED, ids=lambda x: x)
def test_corpus_refusal_lowered_and_proven(a, b):
    used, notes = prove(M2, a, b, (4, 8))
    want = _FUNC_FOR[(a[0], b[0])]
    assert set(used) == {want}
    assert len(notes) == 2 and all(n.startswith(want + ":") and "Paddle" in n for n in notes)
    # Paddle's functions alone still refuse
    with pytest.raises(DiagnosticError, match="no reshard function"):
        lower_all(M2, a, M2, b, (4, 8), paddle_only=True)


# ------------------------------------------------------------------ Paddle's wrong lowerings
def _case_of(name):
    _, before, _ = STATUS[name]
    rs = before.find("dist_op.reshard")[0]
    src, dst = rs.operand(0).dist_attr, rs.results[0].dist_attr
    return src, dst, tuple(rs.results[0].type.shape)


WRONG = sorted(PADDLE_BUGS)


@pytest.mark.parametrize("name", WRONG)
def test_paddle_bug_fixed(name):
    src, dst, shape = _case_of(name)
    used, notes = prove(src.mesh, list(src.placements), list(dst.placements), shape, dst.mesh)
    # fixed either by an extra function or inside distc's copy of Paddle's function (with a note)
    assert any(u.startswith("x_") for u in used) or any(n.split(":")[0].endswith(("r_to_p", "nd_mesh")) or
                                                        ": r_to_p:" in n or ": nd_mesh:" in n for n in notes)


@pytest.mark.parametrize("name", sorted(n for n in COMPLETE if n not in PADDLE_BUGS))
def test_paddle_kept_where_right(name):
    """Where the simulator proves Paddle right, the extra functions decline: distc = Paddle."""
    src, dst, shape = _case_of(name)
    assert X.paddle_problem(src, dst, shape) is None
    before, progs, used, _ = lower_all(src.mesh, list(src.placements), dst.mesh, list(dst.placements), shape)
    assert not [u for u in used if u.startswith("x_")]


def test_coshard_bug_taken_over():
    src, dst, shape = _case_of("m22_RR_to_S0S0")
    assert X.coshard(dst)
    used, notes = prove(src.mesh, list(src.placements), list(dst.placements), shape, dst.mesh)
    assert set(used) == {"x_coshard"}  # by default, since co-sharding is lowered right by default
    # disabled, co-shards are lowered as Paddle does (by dims mapping), and that is wrong
    before, progs, used, _ = lower_all(src.mesh, list(src.placements), dst.mesh, list(dst.placements), shape,
                                       disable=("x_coshard",))
    assert "x_coshard" not in used and not verify_reshard(progs, before=before).ok


# ------------------------------------------------------------------ sweeps over meshes and shapes
MESHES = {
    "1d2": ProcessMesh((2,), (0, 1)),
    "1d3": ProcessMesh((3,), (0, 1, 2)),
    "1d3_no0": ProcessMesh((3,), (1, 2, 3)),
    "1d3_unsorted": ProcessMesh((3,), (2, 0, 1)),
    "2d22": ProcessMesh((2, 2), (0, 1, 2, 3)),
    "2d23": ProcessMesh((2, 3), (0, 1, 2, 3, 4, 5)),
    "2d22_no0": ProcessMesh((2, 2), (4, 5, 6, 7)),
    "2d22_unsorted": ProcessMesh((2, 2), (1, 0, 3, 2)),
    "3d222": ProcessMesh((2, 2, 2), tuple(range(8))),
}
SHAPES = {1: [(6, 4), (5, 7)], 2: [(4, 6, 2), (7, 5, 3)], 3: [(8, 6, 4), (7, 9, 5)]}
REDUCES = ("P", "Pavg", "Pmax")


def _shapes_for(mesh):
    # even and uneven tensors; 3-D tensors (split axis 2) on every mesh
    return [(6, 4, 2) if mesh.ndim == 1 else s for s in SHAPES[mesh.ndim]] + [(5, 7, 3)] + \
        ([(4, 8)] if mesh.ndim == 1 else [])


def _others(mesh_ndim, used_axes, ndim_t, k):
    """Placements for the mesh dims other than ``k``: all R, or one of them sharding a free axis."""
    free = [a for a in range(ndim_t) if a not in used_axes]
    rest = [d for d in range(mesh_ndim) if d != k]
    yield {d: "R" for d in rest}
    for f in free:
        for d0 in rest:
            yield {d: (f"S{f}" if d == d0 else "R") for d in rest}


def transitions(kind, nt):
    """(source, destination) placements of one mesh dim for a ``nt``-D tensor."""
    axes = range(nt)
    return {
        "s_to_p": [(f"S{a}", r) for a in axes for r in REDUCES],
        "p_to_s": [(r, f"S{a}") for a in axes for r in REDUCES],
        "p_to_p": [(r1, r2) for r1 in REDUCES for r2 in REDUCES if r1 != r2],
        "r_to_p": [("R", r) for r in REDUCES],
        "s_to_r": [(f"S{a}", "R") for a in axes],
        "s_to_s": [(f"S{a}", f"S{b}") for a in axes for b in axes if a != b],
    }[kind]


def sweep(kind):
    """(mesh name, src placements, dst placements, shape): the transition on each mesh dim k of
    every mesh, for every tensor axis, reduce type and shape, the other mesh dims replicated or
    sharding another tensor axis."""
    out = []
    for mname, mesh in MESHES.items():
        for shape in _shapes_for(mesh):
            nt = len(shape)
            for k in range(mesh.ndim):
                for sk, dk in transitions(kind, nt):
                    used = {int(t[1:]) for t in (sk, dk) if t.startswith("S")}
                    for others in _others(mesh.ndim, used, nt, k):
                        sp = [sk if d == k else others[d] for d in range(mesh.ndim)]
                        dp = [dk if d == k else others[d] for d in range(mesh.ndim)]
                        out.append((mname, ",".join(sp), ",".join(dp), shape))
    return sorted(set(out))


def _features(c):
    mname, sp, dp, shape = c
    a, b = sp.split(","), dp.split(",")
    k = tuple(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    even = all(d % MESHES[mname].shape[0] == 0 for d in shape)
    return ({("mesh", mname), ("dim", mname, k), ("rank", len(shape), even), ("mesh-even", mname, even)}
            | {("tok", t) for t in a + b} | {("pair", x, y) for x, y in zip(a, b)})


def _select(cases, extra):
    """A deterministic subset covering every feature of the full sweep (mesh, changed mesh dim,
    even/uneven shape, tensor rank, placement pair), plus every ``extra``-th case."""
    feats = [_features(c) for c in cases]
    left = set().union(*feats)
    chosen = set()
    while left:
        i = max(range(len(cases)), key=lambda j: (len(feats[j] & left), -j))
        chosen.add(cases[i])
        left -= feats[i]
    chosen.update(cases[::extra])
    return sorted(chosen)


SWEEP_KINDS = ("s_to_p", "p_to_s", "p_to_p", "r_to_p", "s_to_r", "s_to_s")
SWEEPS = {kind: _select(sweep(kind), 20) for kind in SWEEP_KINDS}


def _id(c):
    return f"{c[0]}:{c[1]}->{c[2]}:{'x'.join(map(str, c[3]))}"


@pytest.mark.parametrize("kind", sorted(SWEEPS))
def test_sweep_covers_meshes_axes_and_shapes(kind):
    cases = SWEEPS[kind]
    meshes = {c[0] for c in cases}
    assert {"1d2", "1d3", "2d22", "3d222"} <= meshes
    axes = {int(t[1:]) for c in cases for t in re.findall(r"S\d", c[1] + c[2])}
    assert axes == {0, 1, 2}
    even = [c for c in cases if all(d % 2 == 0 for d in c[3])]
    assert even and len(even) < len(cases)


def _run(case, kind):
    mname, sp, dp, shape = case
    mesh = MESHES[mname]
    used, notes = prove(mesh, sp, dp, shape)
    src = parse_placements(sp, mesh.ndim)
    dst = parse_placements(dp, mesh.ndim)
    from distc.passes.reshard.explore import layout

    problem = X.paddle_problem(layout(mesh, src, len(shape)), layout(mesh, dst, len(shape)), shape)
    xs = [u for u in used if u.startswith("x_")]
    if problem is None:
        assert not xs
    else:
        assert xs and all(n.split(":")[0] in X_FUNCTIONS for n in notes)
        if mesh.ndim == 1:
            assert set(xs) == {"x_" + kind}


@pytest.mark.parametrize("case", SWEEPS["s_to_p"], ids=_id)
def test_x_s_to_p(case):
    _run(case, "s_to_p")


@pytest.mark.parametrize("case", SWEEPS["p_to_s"], ids=_id)
def test_x_p_to_s(case):
    _run(case, "p_to_s")


@pytest.mark.parametrize("case", SWEEPS["p_to_p"], ids=_id)
def test_x_p_to_p(case):
    _run(case, "p_to_p")


@pytest.mark.parametrize("case", SWEEPS["r_to_p"], ids=_id)
def test_x_r_to_p(case):
    _run(case, "r_to_p")


@pytest.mark.parametrize("case", SWEEPS["s_to_r"], ids=_id)
def test_x_s_to_r(case):
    _run(case, "s_to_r")


@pytest.mark.parametrize("case", SWEEPS["s_to_s"], ids=_id)
def test_x_s_to_s(case):
    _run(case, "s_to_s")


# ------------------------------------------------------------------ co-sharding
def _layout_given(mesh, text, nt):
    from distc.passes.reshard.explore import layout

    return layout(mesh, parse_placements(text, mesh.ndim), nt, keep_given=True)


def _coshard_cases():
    out = []
    m2d = ("2d22", "2d23", "2d22_no0", "2d22_unsorted")
    for mname in m2d:
        for shape in ((8, 12), (7, 9), (7, 5, 3)):
            nt = len(shape)
            for a in range(nt):
                co = f"S{a},S{a}"
                for other in ("R,R", "S0,R", "R,S1", "S1,S0", "P,R", "R,P", "P,P", "Pavg,S1", f"S{a},R", f"R,S{a}"):
                    if other == co or any(int(t[1:]) >= nt for t in re.findall(r"S\d", other)):
                        continue
                    if len(set(re.findall(r"S\d", other))) < len(re.findall(r"S\d", other)):
                        continue
                    out.append((mname, other, co, shape))
                    out.append((mname, co, other, shape))
                out.append((mname, co, f"S{(a + 1) % nt},S{(a + 1) % nt}", shape))
    for shape in ((8, 6, 4), (7, 5, 3)):
        for sp, dp in (("R,R,R", "S0,S0,R"), ("R,R,R", "S0,R,S0"), ("R,R,R", "S1,S1,S1"), ("S0,S1,S2", "S2,S2,S0"),
                       ("P,R,S2", "S0,S0,S2"), ("S0,S0,S0", "R,S1,R"), ("S1,R,S1", "P,P,S0"), ("R,P,R", "S2,S2,S2")):
            out.append(("3d222", sp, dp, shape))
    # pairs with one dims mapping (e.g. [R, S0] and [S0, S0]: both [1, -1]) are equal layouts to
    # the reshard pass (Paddle's attr equality ignores placements): it just drops the reshard
    return sorted(c for c in set(out) if not _same_dims(c))


def _same_dims(c):
    mesh, nt = MESHES[c[0]], len(c[3])
    a, b = _layout_given(mesh, c[1], nt), _layout_given(mesh, c[2], nt)
    return a.dims_mapping == b.dims_mapping and dict(a.partial) == dict(b.partial)


COSHARD = _coshard_cases()


@pytest.mark.parametrize("case", _select(COSHARD, 8), ids=_id)
def test_x_coshard(case):
    """Co-sharded destinations and sources (a source is given as printed placements, as a
    reshard result carries them), lowered by distc for every rank and proven."""
    from distc import parse
    from distc.passes.reshard.explore import build_text

    mname, sp, dp, shape = case
    mesh = MESHES[mname]
    text = build_text(_layout_given(mesh, sp, len(shape)), _layout_given(mesh, dp, len(shape)), shape)
    progs, used = {}, []
    for r in mesh.process_ids:
        progs[r] = parse(text)
        used += [s.function for s in lower_program(progs[r], r).steps]
    rep = verify_reshard(progs, before=parse(text))
    assert rep.ok, f"{case} via {sorted(set(used))}:\n{rep}"
    assert used and all(u.startswith("x_") for u in used)  # x_coshard, or an earlier x_ function


# ------------------------------------------------------------------ other reduce types, mixes
@pytest.mark.parametrize("sp,dp", [
    ("S0", "p:min"), ("S1", "p:prod"), ("R", "p:min"), ("R", "p:prod"), ("p:min", "S1"), ("p:prod", "S0"),
    ("p:prod", "p"), ("p:min", "p:max"), ("p", "p:prod"),
])
@pytest.mark.parametrize("mesh", ["1d3", "1d3_no0"])
def test_min_and_prod(mesh, sp, dp):
    prove(MESHES[mesh], sp, dp, (5, 3))


@pytest.mark.parametrize("sp,dp", [
    ("p,p:max", "s0,r"), ("p:max,s1", "p,r"), ("s0,p:min", "p:prod,r"),
    ("p,p", "p:prod,p:prod"), ("p:avg,p", "p:max,s2"), ("r,p:min", "p,s1"),
])
def test_mixed_reduce_types(sp, dp):
    prove(MESHES["2d23"], sp, dp, (7, 5, 3))


def test_cross_mesh_r_to_p_without_rank_0():
    used, notes = prove(ProcessMesh((2,), (0, 1)), "R", "P", (5, 7), dst_mesh=ProcessMesh((2,), (2, 3)))
    assert "r_to_p" in used and any("keeps the value on rank 2" in n for n in notes)


# ------------------------------------------------------------------ errors and notes
def test_no_lowering_is_a_located_error():
    prog = build_program(M2, "R", M2, "p:any", (4, 8))
    rs = prog.find("dist_op.reshard")[0]
    src, dst = rs.operand(0).dist_attr, rs.results[0].dist_attr
    with pytest.raises(DiagnosticError) as ei:
        lower_program(prog, 0)
    e = ei.value
    assert (e.line, e.col) == rs.loc
    assert describe(src) in e.message and describe(dst) in e.message


def test_notes_reach_explain():
    prog = build_program(M2, "S1", M2, "p:avg", (5, 7))
    ctx = PassContext()
    PassManager([ReshardPass(rank=1)]).run(prog, ctx)
    (note,) = [n for n in ctx.notes if n.startswith("x_s_to_p:")]
    assert "Paddle has no S->P lowering" in note and "rank 1" in note and "pad" in note
    names = [op.name for op in prog.ops]
    assert "dist_op.reshard" not in names and "pd_op.scale" in names and "pd_op.concat" in names


@pytest.mark.parametrize("sp,dp", [("R", "R"), ("S0", "S0"), ("S1", "S1"), ("P", "P"), ("R", "S0"), ("S0", "R")])
@pytest.mark.parametrize("dst_ids", [(1, 2), (1, 0), (2, 1)])
def test_overlapping_meshes(sp, dp, dst_ids):
    """Meshes sharing ranks ([0,1] -> [1,2], or a swap): Paddle's same_status stops at a rank's
    first role and deadlocks; distc sends and receives in pair order, proven on every rank."""
    used, notes = prove(ProcessMesh((2,), (0, 1)), sp, dp, (4, 8), dst_mesh=ProcessMesh((2,), dst_ids))
    assert any("same_status" in n for n in notes)


def test_overlapping_meshes_deadlock_in_paddle_mode():
    before, progs, _, _ = lower_all(ProcessMesh((2,), (0, 1)), "R", ProcessMesh((2,), (1, 2)), "R", (4, 8),
                                    paddle_only=True)
    rep = verify_reshard(progs, before=before)
    assert not rep.ok and "deadlock" in str(rep)


@pytest.mark.parametrize("src_mesh,sp,dst_mesh,dp,shape", [
    (ProcessMesh((2,), (0, 1)), "S0", ProcessMesh((4,), (0, 1, 2, 3)), "S0", (4, 8)),
    (ProcessMesh((2,), (0, 1)), "P", ProcessMesh((2, 2), (0, 1, 2, 3)), "S0,S1", (7, 9)),
    (ProcessMesh((2, 2), (0, 1, 2, 3)), "S0,S1", ProcessMesh((3,), (4, 5, 6)), "S1", (7, 9)),
    (ProcessMesh((4,), (0, 1, 2, 3)), "S0", ProcessMesh((2,), (2, 3)), "P", (7, 5)),
    (ProcessMesh((3,), (0, 1, 2)), "S1", ProcessMesh((2, 2), (2, 3, 4, 5)), "P,S0", (5, 6)),
])
def test_meshes_of_different_shapes(src_mesh, sp, dst_mesh, dp, shape):
    used, notes = prove(src_mesh, sp, dp, shape, dst_mesh=dst_mesh)
    assert "x_via_replicate" in used
