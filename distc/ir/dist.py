"""Distributed attributes as frozen values: process meshes, tensor and operation dist attrs.

Paddle stores a tensor's layout as a ``dims_mapping`` (for each tensor axis, the mesh dim it is
split over, or -1) plus a set of *partial* mesh dims with a reduce type.  Placements (one per mesh
dim: ``Shard(dim=k)``, ``Replicate()``, ``Partial(reduce_type=X)``) are derived from those two.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from .records import field, record, replace

REDUCE_TYPES = ("SUM", "MAX", "MIN", "PRODUCT", "AVG", "ANY", "ALL")


@record(frozen=True, slots=True)
class ProcessMesh:
    """A logical mesh of processes: ``shape`` and the row-major ``process_ids`` filling it."""

    shape: tuple[int, ...]
    process_ids: tuple[int, ...]
    dim_names: tuple[str, ...] = field(default=(), compare=False)
    _memo: dict | None = field(default=None, init=False, compare=False, repr=False, hash=False)

    def __hash__(self) -> int:
        return _memo(self, "hash", lambda: hash((self.shape, self.process_ids)))

    def __post_init__(self) -> None:
        n = 1
        for s in self.shape:
            n *= s
        if self.shape and n != len(self.process_ids):
            raise ValueError(
                f"mesh of shape {list(self.shape)} needs {n} process ids, got {len(self.process_ids)}"
            )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def ids_text(self) -> str:
        """``0,1,2,3``: the process ids as printed (once a mesh: a mesh of 100,000 ranks prints often)."""
        return _memo(self, "ids_text", lambda: _ints(self.process_ids))

    @property
    def size(self) -> int:
        return len(self.process_ids)

    def __contains__(self, rank: object) -> bool:
        return rank in self._index()

    def _index(self) -> dict[int, int]:
        """process id -> its place in ``process_ids`` (once a mesh: membership in O(1))."""
        return _memo(self, "index", lambda: {p: i for i, p in enumerate(self.process_ids)})

    def coord(self, rank: int) -> tuple[int, ...]:
        """The rank's coordinate in the mesh (row-major)."""
        idx = self._index()[rank]
        out = []
        for s in reversed(self.shape):
            out.append(idx % s)
            idx //= s
        return tuple(reversed(out))

    def rank_at(self, coord: Iterable[int]) -> int:
        idx = 0
        for c, s in zip(coord, self.shape):
            idx = idx * s + c
        return self.process_ids[idx]

    def sub_mesh(self, dim: int, rank: int) -> "ProcessMesh":
        """The 1-D mesh of the processes that share ``rank``'s coordinate on every dim but ``dim``."""
        c = list(self.coord(rank))
        ids = []
        for i in range(self.shape[dim]):
            c[dim] = i
            ids.append(self.rank_at(c))
        return ProcessMesh((self.shape[dim],), tuple(ids))

    def sub_meshes(self, dim: int) -> list["ProcessMesh"]:
        """Every 1-D group along ``dim``, in Paddle's order (by the remaining coordinates, row-major):
        strided slices of the row-major ids, linear in the mesh size."""
        return list(_memo(self, ("sub_meshes", dim), lambda: self._sub_meshes(dim)))

    def _sub_meshes(self, dim: int) -> tuple["ProcessMesh", ...]:
        n = self.shape[dim]
        inner = 1
        for s in self.shape[dim + 1:]:
            inner *= s
        ids = self.process_ids
        return tuple(ProcessMesh((n,), ids[base + i: base + n * inner: inner])
                     for base in range(0, len(ids), n * inner) for i in range(inner))


EMPTY_MESH = ProcessMesh((), ())


def merge_meshes(*meshes: ProcessMesh) -> ProcessMesh:
    """The mesh of an op over ``meshes`` (Paddle's ``MergeMeshes``, as in ``ReshardOp::Build`` and
    ``_complete_op_dist_attr``): the common mesh, else a 1-D mesh over the sorted union of their
    process ids -- also when one mesh holds the other (a 2-D mesh and one of its rows merge to a
    1-D mesh)."""
    first = meshes[0]
    if all(m == first for m in meshes[1:]):
        return first
    ids = tuple(sorted({p for m in meshes for p in m.process_ids}))
    return ProcessMesh((len(ids),), ids)


@record(frozen=True, slots=True)
class Placement:
    kind: str  # "S", "R" or "P"
    dim: int = -1  # tensor axis for Shard
    reduce: str = "SUM"  # reduce type for Partial

    def __str__(self) -> str:
        if self.kind == "S":
            return f"Shard(dim={self.dim})"
        if self.kind == "P":
            return f"Partial(reduce_type={self.reduce})"
        return "Replicate()"

    def __repr__(self) -> str:
        return str(self)

    def is_shard(self, dim: int | None = None) -> bool:
        """``Shard`` (on tensor axis ``dim`` if given), as Paddle's ``Placement.is_shard``."""
        return self.kind == "S" and (dim is None or self.dim == dim)

    def is_partial(self) -> bool:
        return self.kind == "P"

    def is_replicate(self) -> bool:
        return self.kind == "R"

    def short(self) -> str:
        """The short name the explorer and reports use: ``s1``, ``r``, ``p``, ``p:avg``."""
        if self.is_shard():
            return f"s{self.dim}"
        if self.is_partial():
            return "p" if self.reduce == "SUM" else f"p:{self.reduce.lower()}"
        return "r"


REPLICATE = Placement("R")


def Shard(dim: int) -> Placement:
    return Placement("S", dim)


def Partial(reduce: str = "SUM") -> Placement:
    return Placement("P", -1, reduce)


@record(frozen=True, slots=True)
class TensorDistAttr:
    """A tensor's layout on a mesh.

    ``partial`` holds ``(mesh_dim, reduce_type)`` pairs in ascending mesh-dim order (canonical: so
    ``==`` is the layout equality); the order to print them in (Paddle prints its partial-status
    hash map's order, or the order the input wrote) is kept apart in ``partial_order`` (not
    compared), set from the order the pairs are given in.  ``printed_partial`` applies it.
    ``form`` records how the attribute was spelt so it prints back the same way:
    ``"full"`` (mesh_shape, process_ids, dims_mappings), ``"nopids"`` (2024 F1 types: no
    process_ids) or ``"maping"`` (F1 op_dist_attr entries: ``dims_maping`` only).
    ``placements`` records whether the ``placements:[...]`` suffix was printed.
    """

    mesh: ProcessMesh
    dims_mapping: tuple[int, ...]
    partial: tuple[tuple[int, str], ...] = ()
    form: str = field(default="full", compare=False)
    placements_shown: bool = field(default=False, compare=False)
    # placements as printed, kept only where dims_mapping cannot say them (co-sharding one tensor
    # axis over several mesh dims: [Shard(dim=0), Shard(dim=0)] with dims_mappings [1,-1])
    given: tuple[Placement, ...] | None = None
    # mesh dims of ``partial`` in print order, when that is not ascending
    partial_order: tuple[int, ...] | None = field(default=None, compare=False, repr=False)
    _memo: dict | None = field(default=None, init=False, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        p = self.partial
        if len(p) > 1:
            canon = tuple(sorted(p))
            if canon != p:
                object.__setattr__(self, "partial", canon)
                object.__setattr__(self, "partial_order", tuple(d for d, _ in p))
            elif self.partial_order is not None and list(self.partial_order) == sorted(self.partial_order):
                object.__setattr__(self, "partial_order", None)

    def __hash__(self) -> int:
        return _memo(self, "hash", lambda: hash((self.mesh, self.dims_mapping, self.partial, self.given)))

    def paddle_equal(self, other: "TensorDistAttr") -> bool:
        """Paddle's ``TensorDistAttribute ==``: mesh, dims mapping, partial status.  ``==`` also
        tells co-sharded placements apart (``[Shard(0), Shard(0)]`` vs ``[Replicate(), Shard(0)]``
        share a dims mapping); where co-sharding is absent the two agree."""
        return self.mesh == other.mesh and self.dims_mapping == other.dims_mapping and self.partial == other.partial

    @property
    def printed_partial(self) -> tuple[tuple[int, str], ...]:
        """``partial`` in the order it prints (and Paddle iterates its partial-status map)."""
        if self.partial_order is None:
            return self.partial
        d = dict(self.partial)
        return tuple((k, d[k]) for k in self.partial_order)

    @property
    def is_empty(self) -> bool:
        return not self.mesh.shape and not self.dims_mapping and not self.partial

    @property
    def partial_dims(self) -> dict[int, str]:
        return dict(self.partial)

    @property
    def placements(self) -> tuple[Placement, ...]:
        if self.given is not None:
            return self.given
        return self.derived_placements()

    def derived_placements(self) -> tuple[Placement, ...]:
        return _memo(self, "derived", self._derive)

    def _derive(self) -> tuple[Placement, ...]:
        out = []
        pd = dict(self.partial)
        for md in range(self.mesh.ndim):
            axes = [a for a, m in enumerate(self.dims_mapping) if m == md]
            if axes:
                out.append(Shard(axes[0]))
            elif md in pd:
                out.append(Partial(pd[md]))
            else:
                out.append(REPLICATE)
        return tuple(out)

    @staticmethod
    def from_placements(
        mesh: ProcessMesh, placements: Iterable[Placement], ndim: int, like: "TensorDistAttr | None" = None
    ) -> "TensorDistAttr":
        placements = tuple(placements)
        dm = [-1] * ndim
        partial = []
        for md, p in enumerate(placements):
            if p.is_shard():
                dm[p.dim] = md
            elif p.is_partial():
                partial.append((md, p.reduce))
        attr = TensorDistAttr(
            mesh,
            tuple(dm),
            tuple(partial),
            form=like.form if like else "full",
            placements_shown=like.placements_shown if like else False,
        )
        if attr.derived_placements() != placements:
            attr = replace(attr, given=placements)
        return attr

    def with_(self, **kw: object) -> "TensorDistAttr":
        """A copy with fields changed; printed placements are derived again unless given."""
        unknown = kw.keys() - _TDA_FIELDS
        if unknown:
            raise TypeError(f"TensorDistAttr has no field(s) {sorted(unknown)}")
        g = kw.get
        return TensorDistAttr(g("mesh", self.mesh), g("dims_mapping", self.dims_mapping),  # type: ignore[arg-type]
                              g("partial", self.printed_partial), g("form", self.form),  # type: ignore[arg-type]
                              g("placements_shown", self.placements_shown), g("given", None))  # type: ignore[arg-type]

    def consistent(self, placements: tuple[Placement, ...]) -> bool:
        """Whether printed placements agree with dims_mapping and partial (co-sharding allowed)."""
        derived = self.derived_placements()
        if len(placements) != len(derived):
            return False
        for d, g in zip(derived, placements):
            if d == g:
                continue
            if d.is_replicate() and g.is_shard() and 0 <= g.dim < len(self.dims_mapping) and self.dims_mapping[g.dim] >= 0:
                continue
            return False
        return True

    def is_partial(self, mesh_dim: int | None = None) -> bool:
        if mesh_dim is None:
            return bool(self.partial)
        return any(d == mesh_dim for d, _ in self.partial)

    def is_replicated(self) -> bool:
        return not self.partial and all(m == -1 for m in self.dims_mapping)

    def local_shape(self, shape: tuple[int, ...], rank: int | None = None) -> tuple[int, ...]:
        """The shape of ``rank``'s piece (Paddle's rule: ceil(n/p) pieces, the last ones hold less)."""
        if not any(md >= 0 for md in self.dims_mapping):
            return tuple(shape)
        return _memo(self, ("local", tuple(shape), rank), lambda: self._local_shape(shape, rank))

    def _local_shape(self, shape: tuple[int, ...], rank: int | None) -> tuple[int, ...]:
        out = list(shape)
        for axis, md in enumerate(self.dims_mapping):
            if md < 0 or shape[axis] < 0:
                continue
            p = self.mesh.shape[md]
            if rank is None or rank not in self.mesh.process_ids:
                out[axis] = (shape[axis] + p - 1) // p if shape[axis] % p else shape[axis] // p
            else:
                lo, hi = split_bounds(shape[axis], p, self.mesh.coord(rank)[md])
                out[axis] = hi - lo
        return tuple(out)

    # -- text --------------------------------------------------------------------------------
    def format(self, *, form: str | None = None, placements: bool | None = None) -> str:
        form = form or self.form
        show = self.placements_shown if placements is None else placements
        return _memo(self, ("fmt", form, show), lambda: self._format(form, show))

    def _format(self, form: str, show: bool) -> str:
        if form == "blank" and self.is_empty:  # an op_dist_attr entry written as '{}'
            return ""
        if form == "null" and self.is_empty:  # a value Paddle gave no dist attr: '{<#AttrNull>}'
            return ATTR_NULL
        if form == "maping":
            return f"dims_maping:[{_ints(self.dims_mapping)}]"
        parts = [f"mesh_shape:[{_ints(self.mesh.shape)}]"]
        if form != "nopids":
            parts.append(f"process_ids:[{self.mesh.ids_text}]")
        parts.append(f"dims_mappings:[{_ints(self.dims_mapping)}]")
        text = ",".join(parts)
        if self.partial:
            text += ", " + ",".join(f"partial({d},{r})" for d, r in self.printed_partial)
        if show and not self.is_empty:
            text += ", placements:[" + ", ".join(str(p) for p in self.placements) + "]"
        return text

    def __str__(self) -> str:
        return self.format()

    def short_name(self) -> str:
        """``s1 on [0,1]``, ``p,s1 on [[0,1],[2,3]]``: placements (short names) and mesh."""
        return layout_name(self)


SHOWN_RANKS = 16  # reports list at most this many ranks of a group or mesh, then summarise


def ranks_text(ids, limit: int = SHOWN_RANKS) -> str:
    """``[0,1,2,3]``; over ``limit`` ranks a summary a report line can hold: ``[0,1,...,99999]
    (100000 ranks)`` (evenly spaced), else the first and last few and the count."""
    ids = list(ids)
    if len(ids) <= limit:
        return "[" + ",".join(map(str, ids)) + "]"
    step = ids[1] - ids[0]
    if step > 0 and all(b - a == step for a, b in zip(ids, ids[1:])):
        return f"[{ids[0]},{ids[1]},...,{ids[-1]}] ({len(ids)} ranks)"
    return f"[{','.join(map(str, ids[:3]))},...,{ids[-1]}] ({len(ids)} ranks)"


def mesh_text(mesh: ProcessMesh) -> str:
    """``[0,1]``, ``[[0,1],[2,3]]``: the mesh as nested lists (over 16 ranks, summarised:
    ``[0,1,...,65535] (65536 ranks) as 256x256``)."""
    ids = list(mesh.process_ids)
    if len(ids) > SHOWN_RANKS:
        return ranks_text(ids) + (f" as {'x'.join(map(str, mesh.shape))}" if mesh.ndim > 1 else "")

    def nest(shape, flat):
        if len(shape) <= 1:
            return "[" + ",".join(map(str, flat)) + "]"
        step = len(flat) // shape[0]
        return "[" + ",".join(nest(shape[1:], flat[i * step:(i + 1) * step]) for i in range(shape[0])) + "]"

    return nest(list(mesh.shape), ids)


def placements_name(a: TensorDistAttr, sep: str = ",") -> str:
    """The placements in short names, bracketed: ``[s0,r]``, ``[p,s1]`` (``sep=", "``: ``[s0, r]``)."""
    return "[" + sep.join(p.short() for p in a.placements) + "]"


def layout_name(a: TensorDistAttr, report: bool = False) -> str:
    """The one short-name formatter of a layout: ``s1 on [0,1]``, ``p,s1 on [[0,1],[2,3]]``;
    ``report=True``: the ``--verify`` reports' spelling, ``[p, s1] on mesh [2, 2] [0, 1, 2, 3]``."""
    if report:
        return f"{placements_name(a, ', ')} on mesh {list(a.mesh.shape)} {list(a.mesh.process_ids)}"
    return ",".join(p.short() for p in a.placements) + " on " + mesh_text(a.mesh)


_TDA_FIELDS = frozenset({"mesh", "dims_mapping", "partial", "form", "placements_shown", "given"})


def split_bounds(n: int, parts: int, index: int) -> tuple[int, int]:
    """Paddle's split of ``n`` elements over ``parts``: ``ceil(n/parts)`` each, the tail holds less."""
    size = (n + parts - 1) // parts
    lo = min(size * index, n)
    hi = min(size * (index + 1), n)
    return lo, hi


def empty_dist_attr() -> TensorDistAttr:
    return TensorDistAttr(EMPTY_MESH, ())


ATTR_NULL = "<#AttrNull>"


def null_dist_attr() -> TensorDistAttr:
    """The op_dist_attr entry of a value without a dist attr (Paddle prints ``{<#AttrNull>}``,
    e.g. the velocity-out of ``momentum_`` outside ``shard_optimizer``): empty, like ``{}``."""
    return TensorDistAttr(EMPTY_MESH, (), form="null")


@record(frozen=True, slots=True)
class VecDistAttr:
    """The dist attr of a vector-valued operand or result (``{[a,b,...]}`` in op_dist_attr)."""

    items: tuple[TensorDistAttr, ...]

    def format(self, **kw: object) -> str:
        return "[" + ",".join(i.format(**kw) for i in self.items) + "]"  # type: ignore[arg-type]


DistEntry = TensorDistAttr | VecDistAttr


@record(frozen=True, slots=True)
class OperationDistAttr:
    """``op_dist_attr``: the op's mesh, one entry per operand and result, and ``chunk_id``."""

    mesh: ProcessMesh
    operands: tuple[DistEntry, ...] = ()
    results: tuple[DistEntry, ...] = ()
    chunk_id: int | None = -1
    _memo: dict | None = field(default=None, init=False, compare=False, repr=False, hash=False)

    def __hash__(self) -> int:
        return _memo(self, "hash", lambda: hash((self.mesh, self.operands, self.results, self.chunk_id)))

    def format(self, *, placements: bool | None = None) -> str:
        return _memo(self, ("fmt", placements), lambda: self._shared_format(placements))

    def _shared_format(self, placements: bool | None) -> str:
        # passes build many equal op dist attrs as separate objects: share their text by value
        # equality ignores how entries are spelt (form, placements shown): key on that too
        return _op_format(self, placements, tuple(_spelling(e) for e in self.operands + self.results))

    def _format(self, placements: bool | None) -> str:
        parts = [f"mesh:{{shape:[{_ints(self.mesh.shape)}],process_ids:[{self.mesh.ids_text}]}}"]
        for i, e in enumerate(self.operands):
            parts.append(f"operand({i}):{{{e.format(placements=placements)}}}")
        for i, e in enumerate(self.results):
            parts.append(f"result({i}):{{{e.format(placements=placements)}}}")
        if self.chunk_id is not None:
            parts.append(f"chunk_id:{self.chunk_id}")
        return "{" + ",".join(parts) + "}"

    def __str__(self) -> str:
        return self.format()

    def with_(self, **kw: object) -> "OperationDistAttr":
        if kw.keys() - {"mesh", "operands", "results", "chunk_id"}:
            return replace(self, **kw)  # type: ignore[arg-type]  (its TypeError)
        g = kw.get  # (the constructor: replace() costs 5x, and passes rebuild thousands)
        return OperationDistAttr(g("mesh", self.mesh), g("operands", self.operands),  # type: ignore[arg-type]
                                 g("results", self.results), g("chunk_id", self.chunk_id))  # type: ignore[arg-type]


@functools.lru_cache(maxsize=50_000)
def _op_format(attr: "OperationDistAttr", placements: bool | None, spellings: tuple) -> str:
    """The text of op dist attrs equal to ``attr`` and spelt alike (``spellings``)."""
    return attr._format(placements)


def _spelling(e) -> tuple:
    if isinstance(e, VecDistAttr):
        return tuple(_spelling(x) for x in e.items)
    return (e.form, e.placements_shown, e.given, e.partial_order)


def _memo(obj, key, compute):
    """A per-instance cache for frozen values (hash, placements, printed text)."""
    m = obj._memo
    if m is None:
        m = {}
        object.__setattr__(obj, "_memo", m)
    v = m.get(key)
    if v is None:
        v = compute()
        m[key] = v
    return v


def _ints(xs: Iterable[int]) -> str:
    return ",".join(map(str, xs))
