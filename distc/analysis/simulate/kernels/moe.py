"""Expert parallelism's two dist ops (Paddle's ``moe_sub_mesh_tensors`` /
``moe_global_mesh_tensor``, api.py), which move a value between a global mesh and its sub-meshes
along one mesh dim k (the ``local_mesh_dim``) without communicating:

* ``moe_sub_mesh_tensors(x)`` -> one result per sub-mesh (the ranks with coordinate i on mesh dim
  k): result i is the part of x that sub-mesh holds — x's slice i along the tensor axis x's
  placement on dim k shards (all of x where that placement is Replicate);
* ``moe_global_mesh_tensor(x_0, ..., x_n)`` -> the global value those parts form.

On a rank each is Paddle's executable form (``replace_moe_sub_mesh_tensors`` /
``replace_moe_global_mesh_tensor``: ``share_data_``): the rank's local value passes through to
the result on its own sub-mesh; the results of other sub-meshes (operands from them) do not
exist there.  In the serial view the slices and the concatenation are computed."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import ABSENT
from ....ir.dist import split_bounds
from ....ir.types import DistTensorType


def _mesh_dim(glob, subs) -> int | None:
    """The mesh dim of ``glob`` along which the sub-meshes ``subs`` (process id tuples) lie."""
    if not subs or not glob.shape:
        return None
    for md, n in enumerate(glob.shape):
        if n != len(subs):
            continue
        ok = True
        for i, ids in enumerate(subs):
            if not ids or any(r not in glob.process_ids or glob.coord(r)[md] != i for r in ids):
                ok = False
                break
        if ok:
            return md
    return None


def _dist(v):
    t = v.type if v is not None else None
    return t.dist if isinstance(t, DistTensorType) else None


def _geometry(rt, op, glob_v, sub_vs):
    g = _dist(glob_v)
    subs = [_dist(v) for v in sub_vs]
    if g is None or any(s is None for s in subs):
        raise rt.err(op, "needs dist types on the global value and every sub-mesh value")
    md = _mesh_dim(g.mesh, [s.mesh.process_ids for s in subs])
    if md is None:
        raise rt.err(op, f"the sub-meshes {[list(s.mesh.process_ids) for s in subs]} are not the slices of "
                         f"mesh {list(g.mesh.process_ids)} along one of its dims")
    pl = g.placements[md]
    if pl.is_partial():
        raise rt.err(op, f"the global value is partial on mesh dim {md}: its sub-mesh parts are not slices")
    return g, md, (pl.dim if pl.is_shard() else None)


@kernel("dist_op.moe_sub_mesh_tensors")
def moe_sub_mesh_tensors(rt, op, vals):
    x = np.asarray(vals[0])
    g, md, axis = _geometry(rt, op, op.operand(0), op.results)
    if rt.serial:
        if axis is None:
            return [x.copy() for _ in op.results]
        n = g.mesh.shape[md]
        return [np.take(x, np.arange(*split_bounds(x.shape[axis], n, i)), axis=axis) for i in range(n)]
    return [x.copy() if rt.rank in _dist(r).mesh.process_ids else ABSENT for r in op.results]


@kernel("dist_op.moe_global_mesh_tensor", absent_ok=True)
def moe_global_mesh_tensor(rt, op, vals):
    g, md, axis = _geometry(rt, op, op.results[0], op.operands)
    if rt.serial:
        xs = [np.asarray(v) for v in vals]
        return [xs[0].copy() if axis is None else np.concatenate(xs, axis=axis)]
    mine = [x for v, x in zip(op.operands, vals) if rt.rank in _dist(v).mesh.process_ids]
    if not mine:
        return [ABSENT]
    if mine[0] is ABSENT:
        raise rt.err(op, "the operand on this rank's sub-mesh is not computed here")
    return [np.array(mine[0], copy=True)]
