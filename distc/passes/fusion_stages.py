"""Fused ZeRO-1 across pipeline stages (parameters on disjoint stage meshes, Paddle's
``ShardingOptimizerStage1`` on a pp x dp mesh), as Paddle 3.3.1 writes it into a rank's program:

* every stage's buffers are in every rank's program (each on its stage mesh, reduce-scattered and
  gathered over that mesh's sharding group); a rank of another stage writes them as the rank at
  its own place in its own sharding group would, with its own group's communicator (the ops
  never run there: partition leaves them to the stage's ranks);
* the global-norm clip (``ClipGradByGlobalNorm._pir_clip`` with ``auto_parallel_pp``): each
  squared norm on its gradient's mesh, resharded to the first stage's mesh (the one holding
  process 0), summed and all-reduced there; the scale resharded back to each other stage's mesh
  before its ``multiply``;
* the learning rate: a ``builtin.parameter`` of it for each run of updates on one mesh, in the
  order the updates are written (the inner optimizer makes a new one whenever the mesh changes).

Programs whose meshes overlap (MoE experts on sub-meshes of the global mesh) keep distc's own
form (:mod:`.tensor_fusion`): nothing here applies to them.
"""

from __future__ import annotations

from itertools import combinations

from ..dialects import ops
from ..ir.core import Operation, Value


def stage_meshes(meshes) -> bool:
    """More than one mesh, pairwise disjoint: pipeline stages."""
    ms = list(dict.fromkeys(meshes))
    return len(ms) > 1 and not any(set(a.process_ids) & set(b.process_ids) for a, b in combinations(ms, 2))


def own_mesh(meshes: list, rank: int):
    """(the mesh the rank's sharding group is taken from, whether the meshes are pipeline stages):
    the first mesh, or among stages the rank's own stage's."""
    pp = stage_meshes(meshes)
    return next((m for m in meshes if rank in m.process_ids), meshes[0]) if pp else meshes[0], pp


def clip_mesh(meshes):
    """(the mesh the global norm is summed on, whether the meshes are pipeline stages): Paddle's
    ``pp_stage0_mesh`` (the stage mesh holding process 0; else the one of the lowest process)."""
    ms = list(dict.fromkeys(meshes))
    if not stage_meshes(ms):
        return ms[0], False
    return min(ms, key=lambda m: (0 not in m.process_ids, min(m.process_ids))), True


def lr_per_run(todo: list, lr_index: int) -> tuple[list[Operation], dict[int, Value]] | None:
    """Pipeline stages: the learning rate each update of ``todo`` ((update, param, grad, piece),
    in written order) reads — one ``builtin.parameter`` per run of updates on one mesh, copies of
    the stage-0 program's parameter of that mesh: (the new ops, not in the block yet: the caller
    appends them where the learning rate goes; ``id(update)`` -> its learning rate).  None when
    the updates share one learning rate (every other program: unchanged)."""
    lrs = {}
    for u, *_ in todo:
        v = u.operands[lr_index]
        if v is None or v.owner is None or v.owner.name != ops.PARAMETER or v.dist_attr is None:
            return None
        lrs.setdefault(v.dist_attr.mesh, v.owner)
    if len(lrs) < 2 or not stage_meshes(lrs):
        return None
    out: dict[int, Value] = {}
    made: list[Operation] = []
    cur = None
    for u, p, _, _ in todo:
        m = p.dist_attr.mesh
        src = lrs.get(m)
        if src is None:
            return None
        if cur is None or cur.results[0].dist_attr.mesh != m:
            cur = Operation(ops.PARAMETER, [], [src.results[0].type], dict(src.attrs))
            made.append(cur)
        out[id(u)] = cur.result
    for op in lrs.values():
        if op.parent is not None and not any(r.uses for r in op.results):
            op.erase()
    return made, out
