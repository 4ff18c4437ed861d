"""The meaning of a distributed value, as numpy: a rank's piece of a global array under a
``TensorDistAttr`` (Paddle's uneven split, co-sharding split over mesh dims in turn), random
partial pieces that reduce to a global value, and the check that pieces form a layout."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np

from ...ir.dist import REDUCE_TYPES, ProcessMesh, TensorDistAttr, split_bounds

def reduce_arrays(arrays: list[np.ndarray], rtype: str | int) -> np.ndarray:
    """Reduce equally-shaped arrays with a Paddle ReduceType (name or enum value)."""
    if isinstance(rtype, int):
        rtype = REDUCE_TYPES[rtype]
    st = np.stack(arrays)
    if rtype == "SUM":
        return st.sum(0)
    if rtype == "AVG":
        return st.sum(0) / len(arrays)
    if rtype == "MAX":
        return st.max(0)
    if rtype == "MIN":
        return st.min(0)
    if rtype == "PRODUCT":
        return st.prod(0)
    if rtype == "ANY":
        return st.any(0)
    if rtype == "ALL":
        return st.all(0)
    raise ValueError(f"unknown reduce type {rtype!r}")


def _split_for_reduce(x: np.ndarray, p: int, rtype: str, rng: np.random.Generator) -> list[np.ndarray]:
    """``p`` random arrays that reduce with ``rtype`` to ``x``."""
    if p == 1:
        return [x.copy()]
    shape = (p - 1,) + x.shape
    if x.dtype == bool:  # a bool reduce is a logical one: sum/avg/max are "any", min/product "all"
        rtype = "ALL" if rtype in ("MIN", "PRODUCT", "ALL") else "ANY"
    if rtype in ("SUM", "AVG"):
        target = x * p if rtype == "AVG" else x
        if x.dtype.kind in "iu":
            r = rng.integers(-5, 6, size=shape).astype(x.dtype)
        else:
            r = rng.standard_normal(shape)
        return [*r, target - r.sum(0)]
    if rtype in ("MAX", "MIN", "ANY", "ALL"):
        owner = rng.integers(0, p, size=x.shape)
        out = []
        for i in range(p):
            if rtype == "ANY":
                other = np.zeros_like(x, dtype=bool)
            elif rtype == "ALL":
                other = np.ones_like(x, dtype=bool)
            else:
                delta = rng.uniform(0.25, 2.0, size=x.shape)
                if x.dtype.kind in "iu":
                    delta = np.ceil(delta).astype(x.dtype)
                other = x - delta if rtype == "MAX" else x + delta
            out.append(np.where(owner == i, x, other))
        return out
    if rtype == "PRODUCT":
        r = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        return [*r, x / r.prod(0)]
    raise ValueError(f"cannot build partial values for reduce type {rtype!r}")


# ------------------------------------------------------------------------------------ layouts
def _coords(mesh: ProcessMesh, rank: int) -> tuple[int, ...]:
    return mesh.coord(rank)


def shard_index(dist: TensorDistAttr, shape: tuple[int, ...], rank: int) -> tuple[slice, ...]:
    """The rank's slice of every tensor axis.  A tensor axis sharded over several mesh dims
    (co-sharding, placements ``[Shard(0), Shard(0)]``) is split over them in mesh-dim order:
    first over the lower mesh dim, then each part over the next."""
    c = _coords(dist.mesh, rank)
    bounds = [(0, n) for n in shape]
    for md, pl in enumerate(dist.placements):
        if not pl.is_shard():
            continue
        lo, hi = bounds[pl.dim]
        a, b = split_bounds(hi - lo, dist.mesh.shape[md], c[md])
        bounds[pl.dim] = (lo + a, lo + b)
    return tuple(slice(lo, hi) for lo, hi in bounds)


def expected_piece(global_value: np.ndarray, dist: TensorDistAttr, rank: int) -> np.ndarray:
    """The rank's piece of a non-partial layout (partial dims are ignored: full-size piece)."""
    return global_value[shard_index(dist, global_value.shape, rank)]


def distribute(global_value: np.ndarray, dist: TensorDistAttr, rng: np.random.Generator | int = 0) -> dict[int, np.ndarray]:
    """Every rank's local piece of ``global_value`` under ``dist``; partial dims get random
    values that reduce to the global value."""
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    mesh = dist.mesh
    pdims = sorted(dict(dist.partial).items())
    pieces: dict[tuple[int, ...], np.ndarray] = {(): global_value}
    # split over the highest partial dim first, so that reducing the lowest first undoes it
    for md, rtype in reversed(pdims):
        nxt = {}
        for key, arr in pieces.items():
            for i, a in enumerate(_split_for_reduce(arr, mesh.shape[md], rtype, rng)):
                nxt[key + (i,)] = a
        pieces = nxt
    out = {}
    for r in mesh.process_ids:
        c = _coords(mesh, r)
        arr = pieces[tuple(c[md] for md, _ in reversed(pdims))]
        out[r] = np.array(arr[shard_index(dist, global_value.shape, r)], copy=True)
    return out


def layout_groups(pieces: Mapping[int, Any], global_value: np.ndarray, dist: TensorDistAttr
                  ) -> Iterator[tuple[list[int], np.ndarray | None, np.ndarray, list[tuple[int, tuple]]]]:
    """For each group of ranks holding one piece (the ranks along the partial mesh dims):
    (ranks, the value their pieces reduce to or None, the expected piece, [(rank, wrong local shape)])."""
    pdims = sorted(dict(dist.partial).items())
    groups: dict[tuple, list[tuple[tuple[int, ...], int]]] = {}
    for r in dist.mesh.process_ids:
        c = _coords(dist.mesh, r)
        key = tuple(ci for k, ci in enumerate(c) if k not in dict(pdims))
        groups.setdefault(key, []).append((tuple(c[md] for md, _ in pdims), r))
    for key, members in groups.items():
        ranks = [r for _, r in members]
        want = global_value[shard_index(dist, global_value.shape, members[0][1])]
        arrays = {pc: np.asarray(pieces[r]) for pc, r in members}
        bad_shape = [(r, arrays[pc].shape) for pc, r in members if arrays[pc].shape != want.shape]
        if bad_shape:
            yield ranks, None, want, bad_shape
            continue
        # reduce over the partial dims, lowest mesh dim first
        level = dict(arrays)
        for j in range(len(pdims)):
            rtype = pdims[j][1]
            nxt: dict[tuple, list] = {}
            for pc, a in sorted(level.items()):
                nxt.setdefault(pc[1:], []).append(a)
            level = {k: reduce_arrays(v, rtype) for k, v in nxt.items()}
        yield ranks, level[()], want, []


def check_layout(pieces: Mapping[int, Any], global_value: np.ndarray, dist: TensorDistAttr, *,
                 rtol: float = 1e-7, atol: float = 1e-7) -> list[str]:
    """Problems (empty if none) with ``pieces`` (rank -> local array) as the layout ``dist`` of
    ``global_value``: shard pieces must equal the rank's slice; partial pieces must reduce to it."""
    problems: list[str] = []
    missing = [r for r in dist.mesh.process_ids if r not in pieces or pieces[r] is None]
    if missing:
        return [f"no value on ranks {missing}"]
    for ranks, got, want, bad_shape in layout_groups(pieces, global_value, dist):
        for r, s in bad_shape:
            problems.append(f"rank {r}: local shape {list(s)}, expected {list(want.shape)}")
        if got is not None and want.dtype == bool:
            got = np.asarray(got).astype(bool)
        if got is not None and not close(got, want, rtol, atol):
            what = "reduced value of ranks" if dist.partial else "value on rank"
            problems.append(f"{what} {ranks if dist.partial else ranks[0]} differs from the expected piece "
                            f"(max abs error {max_err(got, want):.3g})")
    return problems


def close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype == bool or b.dtype == bool:
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=rtol, atol=atol))


def max_err(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))

