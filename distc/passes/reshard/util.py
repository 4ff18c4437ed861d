"""Layout predicates and mesh helpers shared by the reshard functions (Paddle's definitions)."""

from __future__ import annotations

import functools

from ...ir.dist import REDUCE_TYPES, ProcessMesh, TensorDistAttr, layout_name, mesh_text  # noqa: F401 (re-exported)
from ...dialects.partial_order import hash_map_order, ordered_partial  # noqa: F401 (re-exported)


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
    # slices of the row-major ids (linear in the mesh size; asked once per rank and mesh dim)
    n = mesh.shape[dim]
    inner = 1
    for s in mesh.shape[dim + 1:]:
        inner *= s
    ids = mesh.process_ids
    groups = [[p for base in range(0, len(ids), n * inner) for p in ids[base + k * inner: base + (k + 1) * inner]]
              for k in range(n)]
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
        if global_mesh.shape[d] < 2 or sub.size * global_mesh.shape[d] != global_mesh.size:
            continue  # (each piece holds size / shape[d] ranks: no need to cut the mesh)
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
