"""Layout predicates and mesh helpers shared by the reshard functions (Paddle's definitions)."""

from __future__ import annotations

import functools

from ...ir.dist import REDUCE_TYPES, ProcessMesh, TensorDistAttr, layout_name, mesh_text  # noqa: F401 (re-exported)
from ...ir.dist import merge_meshes as merged_mesh  # noqa: F401 (re-exported: the one reshard-mesh rule)


def is_shard(a: TensorDistAttr) -> bool:
    """Some tensor axis is split (partial dims allowed)."""
    return any(m != -1 for m in a.dims_mapping)


def is_partial(a: TensorDistAttr) -> bool:
    return bool(a.partial)


def is_replicated(a: TensorDistAttr) -> bool:
    return not a.partial and all(m == -1 for m in a.dims_mapping)


def reduce_index(name: str) -> int:
    """Paddle's ReduceType enum value (kRedSum=0 ... kRedAll=6)."""
    return REDUCE_TYPES.index(name)


def reduce_enum(name: str) -> str:
    """How Paddle's messages spell a reduce type: ``ReduceType.kRedAvg``."""
    return "ReduceType.kRed" + {"PRODUCT": "Prod"}.get(name, name.capitalize())


def partial_dict(a: TensorDistAttr) -> dict[int, str]:
    return dict(a.printed_partial)


def sorted_partial(p: dict[int, str]) -> tuple[tuple[int, str], ...]:
    return tuple(sorted(p.items()))


def mesh_1d(ids) -> ProcessMesh:
    ids = tuple(int(i) for i in ids)
    return ProcessMesh((len(ids),), ids)


def sub_mesh_1d(mesh: ProcessMesh, dim: int, rank: int) -> ProcessMesh:
    """Paddle's ``get_1D_sub_process_mesh``: the 1-D slice along ``dim`` holding ``rank``
    (for a rank outside the mesh, the slice holding the mesh's first process)."""
    if rank not in mesh.process_ids:
        rank = mesh.process_ids[0]
    return mesh.sub_mesh(dim, rank)


def split_mesh(mesh: ProcessMesh, dim: int) -> list[ProcessMesh]:
    """Paddle's ``split_mesh`` (numpy ``split`` along ``dim``): ``mesh.shape[dim]`` slices, each of
    size 1 on ``dim`` -- i.e. the groups *across* the other dims, not the 1-D groups along ``dim``."""
    return list(_split_mesh(mesh, dim))


@functools.lru_cache(maxsize=1024)
def _split_mesh(mesh: ProcessMesh, dim: int) -> tuple[ProcessMesh, ...]:
    # one pass over the ranks (a 512-rank explorer run asks this once per rank and mesh dim)
    groups: list[list[int]] = [[] for _ in range(mesh.shape[dim])]
    for r in mesh.process_ids:
        groups[mesh.coord(r)[dim]].append(r)
    shape = tuple(1 if k == dim else s for k, s in enumerate(mesh.shape))
    return tuple(ProcessMesh(shape, tuple(ids)) for ids in groups)


def sub_meshes_dim0(mesh: ProcessMesh) -> list[ProcessMesh]:
    """Paddle's ``get_sub_meshes``: the slices along mesh dim 0, with that dim dropped."""
    if mesh.ndim < 2:
        return []
    step = mesh.size // mesh.shape[0]
    return [ProcessMesh(mesh.shape[1:], mesh.process_ids[i * step:(i + 1) * step])
            for i in range(mesh.shape[0])]


def sub_mesh_dim(global_mesh: ProcessMesh, sub: ProcessMesh) -> int:
    """Paddle's ``sub_mesh_dim``: the dim of ``global_mesh`` that ``sub`` is one slice of, or -1."""
    if global_mesh.ndim < 1:
        return -1
    for d in range(global_mesh.ndim):
        if global_mesh.shape[d] < 2:
            continue
        for piece in split_mesh(global_mesh, d):
            if piece.process_ids != sub.process_ids:
                continue
            squeezed = tuple(s for k, s in enumerate(piece.shape) if k != d)
            if squeezed == sub.shape or piece.shape == sub.shape:
                return d
    return -1


def mesh_equal_ignore_one(a: ProcessMesh, b: ProcessMesh, dim: int) -> bool:
    if a == b:
        return True
    if a.process_ids != b.process_ids:
        return False
    if a.shape[dim] != 1:
        return False
    return tuple(s for k, s in enumerate(a.shape) if k != dim) == b.shape


def describe(a: TensorDistAttr) -> str:
    """The attr as Paddle prints it in its messages (with placements)."""
    return a.format(form="full", placements=True)


# ------------------------------------------------------------------------- partial status order
_FIB = 11400714819323198485
_M64 = (1 << 64) - 1


def _log2(n: int) -> int:
    return n.bit_length() - 1


def hash_map_order(keys) -> list[int]:
    """The iteration order of Paddle's partial-status map (``paddle::flat_hash_map``, i.e. ska's
    Robin Hood table with Fibonacci hashing, max load 0.5) after inserting ``keys`` in order.

    Paddle prints partial dims in this order: inserting 0, 1, 2 prints ``partial(0,..),
    partial(2,..),partial(1,..)``; 2, 1 prints ``partial(2,..),partial(1,..)``.
    """
    slots: list = []  # entries (distance, key) or None
    nslots = 0
    shift = 64
    max_lookups = 4
    count = 0

    def index(k: int) -> int:
        return ((k * _FIB) & _M64) >> shift

    def rehash(n: int) -> None:
        nonlocal slots, nslots, shift, max_lookups, count
        n = max(n, 2 * count)  # count / max_load_factor
        size = 2
        while size < n:
            size *= 2
        old = [e for e in slots if e is not None]
        nslots = size
        shift = 64 - _log2(size)
        max_lookups = max(4, _log2(size))
        slots = [None] * (size + max_lookups)
        count = 0
        for _, k in old:
            emplace(k)

    def emplace(k: int) -> None:
        nonlocal count
        if nslots:
            cur = index(k)
            dist = 0
            while slots[cur] is not None and slots[cur][0] >= dist:
                if slots[cur][1] == k:
                    return
                cur += 1
                dist += 1
        else:
            cur, dist = 0, 0
        if nslots == 0 or dist == max_lookups or count + 1 > nslots * 0.5:
            rehash(max(4, 2 * nslots))
            emplace(k)
            return
        item = (dist, k)
        while True:
            if slots[cur] is None:
                slots[cur] = item
                count += 1
                return
            if slots[cur][0] < item[0]:
                slots[cur], item = item, slots[cur]
            item = (item[0] + 1, item[1])
            cur += 1
            if cur >= len(slots):  # pragma: no cover - never for a handful of mesh dims
                rehash(2 * nslots)
                emplace(item[1])
                return

    for k in keys:
        emplace(int(k))
    return [e[1] for e in slots if e is not None]


def ordered_partial(p) -> tuple[tuple[int, str], ...]:
    """Partial status (dict or pairs, in insertion order) in the order Paddle prints it."""
    d = dict(p)
    return tuple((k, d[k]) for k in hash_map_order(list(d)))
