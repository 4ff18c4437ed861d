"""The SPMD rules Paddle applies to the plain ops a reshard function creates.

When a reshard function calls ``paddle._C_ops.transpose`` (or reshape, split, concat ...) on a
dist value, Paddle infers the op's ``op_dist_attr`` and result type with the op's SPMD rule; the
function then often overrides the result type but keeps the inferred ``op_dist_attr``.  Only the
rules for the ops reshard functions create are needed, on dims mappings (mesh dims, not
placements).  Each returns ``(required input mappings, output mappings)``; partial status is kept
unless said otherwise.
"""

from __future__ import annotations

from math import prod


def even_only(dm, shape, mesh_shape) -> tuple[int, ...]:
    """Outputs of inferred ops keep a shard only where it splits evenly."""
    out = []
    for d, m in zip(shape, dm):
        if m != -1 and d > 0 and d % mesh_shape[m]:
            m = -1
        out.append(m)
    return tuple(out)


def transpose(dm: tuple[int, ...], perm) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(dm), tuple(dm[p] for p in perm)


def split(dm: tuple[int, ...], axis: int, num: int):
    """split / split_with_num: the split axis must be replicated; every output is the input."""
    req = list(dm)
    if 0 <= axis < len(req):
        req[axis] = -1
    return tuple(req), [tuple(req)] * num


def concat(dms: list[tuple[int, ...]], axis: int):
    """concat: the concat axis replicated; other axes merged over the inputs."""
    n = len(dms[0]) if dms else 0
    merged = [-1] * n
    used: set[int] = set()
    for a in range(n):
        if a == axis:
            continue
        for dm in dms:
            m = dm[a] if a < len(dm) else -1
            if m != -1 and m not in used:
                merged[a] = m
                used.add(m)
                break
    return [tuple(merged)] * len(dms), tuple(merged)


# the partial reduce types concat's rule keeps on its inputs (Paddle 3.3.1 prints a Partial(MAX)
# input of concat as replicated, SUM and AVG as partial: tests/data/oracle/reshard m22pk_*, m222pk_*)
CONCAT_KEEPS_PARTIAL = frozenset({"SUM", "AVG"})


def concat_input_partial(partial) -> tuple[tuple[int, str], ...]:
    """The partial dims concat's rule keeps on an input (pairs ``(mesh dim, reduce)``)."""
    return tuple((m, r) for m, r in partial if r in CONCAT_KEEPS_PARTIAL)


# ------------------------------------------------------------------------------------- reshape
# Paddle's reshape rule describes every output dim as a transformation of input dims:
# ("in", i) -- input dim i; ("flat", [i, j, ...]) -- several input dims merged;
# ("split", inner, shape, k) -- the k-th piece of ``inner`` split into ``shape``; ("one",).


def _flatten(dims: list[int]):
    if not dims:
        return ("one",)
    if len(dims) == 1:
        return ("in", dims[0])
    return ("flat", list(dims))


def _split(inner, shape: list[int], k: int):
    if len(shape) == 1:
        return inner
    return ("split", inner, list(shape), k)


def reshape_dim_trans(src: list[int], tgt: list[int]) -> list:
    tgt = list(tgt)
    if -1 in tgt:
        known = prod(d for d in tgt if d != -1) or 1
        tgt[tgt.index(-1)] = prod(src) // known
    out: list = []
    si = ti = 0
    ns, nt = len(src), len(tgt)
    while si < ns or ti < nt:
        src_dims: list[int] = []
        tgt_shape: list[int] = []
        if si >= ns:
            s = 1
        else:
            s = src[si]
            src_dims.append(si)
            si += 1
        if ti >= nt:
            t = 1
        else:
            t = tgt[ti]
            tgt_shape.append(t)
            ti += 1
        if s == 1 and t != 1:  # a size-1 source dim: skip it
            ti -= 1
            tgt_shape = []
        elif s != 1 and t == 1:  # a size-1 target dim
            si -= 1
            src_dims = []
        else:
            while s != t:
                if s < t:
                    src_dims.append(si)
                    s *= src[si]
                    si += 1
                else:
                    tgt_shape.append(tgt[ti])
                    t *= tgt[ti]
                    ti += 1
        if tgt_shape:
            inner = _flatten(src_dims)
            for k in range(len(tgt_shape)):
                out.append(_split(inner, tgt_shape, k))
    return out


def reshape(dm: tuple[int, ...], src_shape, tgt_shape, mesh_shape):
    """The reshape rule: only the first dim of a merged group, and only the first piece of a
    split dim (when its size divides by the mesh dim), can stay sharded."""
    trans = reshape_dim_trans(list(src_shape), list(tgt_shape))
    nd = len(src_shape)
    shardable = [[True] * len(mesh_shape) for _ in range(nd)]

    def walk(t):
        kind = t[0]
        if kind == "in":
            return t[1]
        if kind == "one":
            return None
        if kind == "flat":
            for d in t[1][1:]:
                shardable[d] = [False] * len(mesh_shape)
            return t[1][0]
        if kind == "split":
            d = walk(t[1])
            if d is None:
                return None
            if t[3] == 0:
                for m in range(len(mesh_shape)):
                    shardable[d][m] = shardable[d][m] and t[2][0] % mesh_shape[m] == 0
                return d
            return None
        return None

    sources = [walk(t) for t in trans]
    out = []
    used_in: set[int] = set()
    for d in sources:
        if d is not None and dm[d] != -1 and shardable[d][dm[d]]:
            out.append(dm[d])
            used_in.add(d)
        else:
            out.append(-1)
    req = tuple(dm[d] if d in used_in else -1 for d in range(nd))
    return req, tuple(out)
