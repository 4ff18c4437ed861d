"""Which 1-D group a collective on a larger op mesh runs over, when its ring is not named.

Paddle prints a fused ZeRO buffer's ``reduce_scatter``/``all_gather`` with the whole 2-D mesh and
``nranks`` 2 (:mod:`distc.dialects.fusion`): two sub-meshes of 2 pass through every rank of a
[2,2] mesh, and the ring id is the only link to the group.  The scheduler asks, in order, a
1-D op mesh of the rank's own program on the same ring, then the ring table the program's builder
handed over (``rank_rings``); failing both, :func:`infer_group` reads what all the ranks'
programs together say (the simulator holds every rank of the mesh):

* the ring's *users*: Paddle numbers each process group once for the whole job (its fused
  programs, tests/data/oracle/fusion, dp2×mp2: ring 12 on ranks 0 and 2 only, 13 on 1 and 3, 14
  on 0 and 1, 15 on 2 and 3), so a mesh dim is possible when the ranks using the ring are whole
  sub-meshes along it.  (distc numbers each rank's rings on its own, 12 on every rank: then both
  dims are possible and this says nothing);
* the *partial* mesh dims of what the rank reduces on that ring (the gradients coalesced into a
  fused buffer, or shared into it: partial on the sharding dim): a sum of partial pieces is taken
  over the sub-mesh along a partial dim, never along another one.

A dim both allow, if there is exactly one, gives the group (and a note says the files do not name
it); none or several: :class:`~.values.Undecidable` -- the proof cannot be made (not a
divergence: the programs may be right under the real ring table)."""

from __future__ import annotations

from collections.abc import Callable

from ...dialects import collectives as C
from ...dialects import ops
from ...ir.core import Operation, Program, Value
from ...ir.dist import ProcessMesh
from ...ir.types import DistTensorType, VectorType
from .values import Undecidable

_VIEWS = ("pd_op.view_slice", "pd_op.view_shape")
_SHARE = "pd_op.share_var"


def candidates(mesh: ProcessMesh, rank: int, nranks: int) -> dict[int, tuple[int, ...]]:
    """mesh dim -> the sorted sub-mesh of ``nranks`` ranks through ``rank`` along it."""
    return {i: tuple(sorted(mesh.sub_mesh(i, rank).process_ids)) for i, s in enumerate(mesh.shape) if s == nranks}


def _partial_dims(t, mesh: ProcessMesh) -> set[int]:
    if isinstance(t, VectorType):
        return set().union(*(_partial_dims(e, mesh) for e in t.elements)) if t.elements else set()
    if isinstance(t, DistTensorType) and t.dist.mesh == mesh:
        return {d for d, _ in t.dist.partial}
    return set()


def reduced_partial_dims(op: Operation, mesh: ProcessMesh, limit: int = 10_000) -> set[int]:
    """The partial mesh dims of what a reducing collective reduces: its operand's type, and those
    of the values sharing its memory (a fused buffer: the gradients ``coalesce_tensor_`` packed
    into it, or ``share_var`` wrote into its views)."""
    if C.COLLECTIVE_OPS.get(op.name) not in (C.ALL_REDUCE, C.REDUCE_SCATTER) or not op.operands:
        return set()
    out: set[int] = set()
    seen: set[Value] = set()
    todo = [v for v in op.operands[:1] if v is not None]
    while todo and len(seen) < limit:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        out |= _partial_dims(v.type, mesh)
        owner = v.owner
        if owner is not None and (owner.name in _VIEWS or owner.name in (ops.COALESCE_TENSOR_, "builtin.combine")):
            todo.extend(u for u in owner.operands if u is not None)
        for user, _ in v.uses:
            if user.name in _VIEWS and user.results:
                todo.append(user.results[0])
            elif user.name == _SHARE:
                todo.extend(u for u in user.operands if u is not None)
    return out


def _ring_ops(prog: Program, ring: int) -> list[Operation]:
    from ...ir.attrs import attr_value

    return [o for o in prog.walk() if o.attrs.get("ring_id") is not None and int(attr_value(o.attrs["ring_id"])) == ring]


def infer_group(prog: Program, op: Operation, rank: int, ring: int, nranks: int,
                users: Callable[[int], tuple[int, ...]]) -> tuple[tuple[int, ...], int, str]:
    """The group of ``op`` (on ``rank``'s program ``prog``, ``ring``, a mesh with several
    sub-meshes of ``nranks`` through the rank), its mesh dim, and why; raises
    :class:`Undecidable` when the programs do not tell.  ``users(ring)``: the ranks whose
    programs use the ring."""
    mesh = op.dist_attr.mesh
    cands = candidates(mesh, rank, nranks)
    by_users = set(cands)
    in_mesh = [u for u in users(ring) if u in mesh]
    for d in cands:
        if any(not set(mesh.sub_mesh(d, u).process_ids) <= set(in_mesh) for u in in_mesh):
            by_users.discard(d)
    reduced: set[int] = set()
    for o in _ring_ops(prog, ring):
        if o.dist_attr is not None and o.dist_attr.mesh == mesh:
            reduced |= reduced_partial_dims(o, mesh)
    by_partial = set(cands) & reduced if reduced & set(cands) else set(cands)
    dims = by_users & by_partial
    said = []
    if by_users != set(cands):
        said.append(f"the ranks using ring {ring} ({list(in_mesh)}) are whole sub-meshes along mesh dim(s) "
                    f"{sorted(by_users)} only")
    if by_partial != set(cands):
        said.append(f"what it reduces is partial on mesh dim(s) {sorted(reduced)}")
    groups = ", ".join(f"{list(g)} (mesh dim {d})" for d, g in sorted(cands.items()))
    if len(dims) != 1:
        why = "; ".join(said) if said else "no 1-D collective names the ring, no ring table was given, every rank " \
                                          "uses it and what it reduces is not partial on one of those dims"
        raise Undecidable(f"ring_id {ring}, nranks {nranks} on mesh {list(mesh.shape)}: the group could be "
                          f"{groups} ({why})", rank, op)
    d = next(iter(dims))
    return cands[d], d, " and ".join(said)


def assumed_notes(assumed: dict) -> dict[int, list[str]]:
    """rank -> the notes of the groups :func:`infer_group` gave its rings (``assumed``: (ring,
    mesh, dim, why) -> rank -> group), one note a ring and dim for all its ranks."""
    out: dict[int, list[str]] = {}
    for (ring, mesh, d, why), got in assumed.items():
        groups = ", ".join(f"{list(g)}" for g in dict.fromkeys(got[r] for r in sorted(got)))
        note = (f"ring {ring}: no file names its group; taken as the sub-mesh along mesh dim {d} of "
                f"{list(mesh.shape)} on ranks {sorted(got)} ({groups}): {why}")
        for r in got:
            out.setdefault(r, []).append(note)
    return out
