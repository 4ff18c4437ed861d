"""One-reshard programs, as Paddle prints them before its reshard pass (the explorer's input).

``build_program`` makes exactly what ``paddle.static.data`` + ``dist.shard_tensor`` +
``dist.reshard`` print in Paddle 3.3.1 (current print style), e.g. for ``--from s1 --to r``::

    (%0) = "pd_op.data" () {dtype:float32,name:"x",...,shape:[4,8],...} : () -> tensor<4x8xf32>
    (%1) = "dist_op.shard_tensor" (%0) {op_dist_attr:{...},persistable:[false],...} : ...
    (%2) = "dist_op.reshard" (%1) {op_dist_attr:{...}} : ...
"""

from __future__ import annotations

import re
from typing import Sequence

from ...ir.dist import (REDUCE_TYPES, REPLICATE, OperationDistAttr, Partial, Placement, ProcessMesh, Shard,
                        TensorDistAttr, merge_meshes)
from ...ir.types import DTYPE_NAMES, DTYPE_SUFFIX_TO_NAME
from ...syntax.diagnostics import DiagnosticError
from ...dialects.partial_order import ordered_partial

_TOKEN = re.compile(r"^(r|s(\d*)|p(?::(\w+))?)$", re.I)


def parse_placement(tok: str) -> Placement:
    """``r``, ``s``/``s0``/``s1``..., ``p``, ``p:avg``, ``p:max`` ... (also ``R``, ``S1``, ``Pavg``)."""
    t = tok.strip()
    m = re.fullmatch(r"(?i)p(avg|max|min|sum|prod|product|any|all)", t)
    if m:
        t = "p:" + m.group(1)
    m = _TOKEN.match(t)
    if not m:
        raise DiagnosticError(f"bad placement {tok!r}: use r, s, s0, s1 ..., p, p:avg, p:max, p:min")
    if t.lower() == "r":
        return REPLICATE
    if t[0] in "sS":
        return Shard(int(m.group(2) or 0))
    red = (m.group(3) or "sum").upper()
    red = {"PROD": "PRODUCT"}.get(red, red)
    if red not in REDUCE_TYPES:
        raise DiagnosticError(f"bad reduce type {m.group(3)!r} (one of {', '.join(r.lower() for r in REDUCE_TYPES)})")
    return Partial(red)


def parse_placements(text: str | Sequence[str], ndim: int) -> list[Placement]:
    toks = [t for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if len(toks) == 1 and ndim > 1:
        # compact corpus spelling: S0R, PS1, RR ...
        toks = re.findall(r"(?i)Pavg|Pmax|Pmin|P|R|S\d", toks[0]) or toks
    if len(toks) != ndim:
        raise DiagnosticError(f"placements {','.join(toks)!r}: need one per mesh dim ({ndim})")
    return [parse_placement(t) for t in toks]


def layout(mesh: ProcessMesh, placements: Sequence[Placement], ndim: int, keep_given: bool = False) -> TensorDistAttr:
    """What Paddle makes of placements: a later mesh dim sharding the same tensor axis wins in the
    dims mapping; ``dist.reshard`` keeps the placements as given (``keep_given``), ``shard_tensor``
    prints them derived from the dims mapping."""
    dm = [-1] * ndim
    partial = []
    for md, p in enumerate(placements):
        if p.is_shard():
            if not 0 <= p.dim < ndim:
                raise DiagnosticError(f"Shard(dim={p.dim}) of a {ndim}-D tensor")
            dm[p.dim] = md
        elif p.is_partial():
            partial.append((md, p.reduce))
    attr = TensorDistAttr(mesh, tuple(dm), ordered_partial(partial), placements_shown=True)
    if keep_given and attr.derived_placements() != tuple(placements):
        attr = attr.with_(given=tuple(placements))
    return attr


def make_mesh(shape: Sequence[int], ids: Sequence[int] | None = None) -> ProcessMesh:
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    ids = tuple(int(i) for i in ids) if ids is not None else tuple(range(n))
    if len(ids) != n:
        raise DiagnosticError(f"mesh of shape {list(shape)} needs {n} process ids, got {len(ids)}")
    if len(set(ids)) != len(ids):
        raise DiagnosticError(f"duplicate process ids in {list(ids)}")
    return ProcessMesh(shape, ids)


def build_text(src: TensorDistAttr, dst: TensorDistAttr, shape: Sequence[int], dtype: str = "float32") -> str:
    if dtype in DTYPE_SUFFIX_TO_NAME:  # f32, bf16 ... spelled as in types
        dtype = DTYPE_SUFFIX_TO_NAME[dtype]
    suffix = DTYPE_NAMES.get(dtype)
    if suffix is None:
        raise DiagnosticError(f"unknown dtype {dtype!r} (one of {', '.join(DTYPE_NAMES)})")
    dims = "".join(f"{d}x" for d in shape)
    dense = f"tensor<{dims}{suffix}>"

    def ty(a: TensorDistAttr) -> str:
        return f"pd_dist.tensor<{dims}{suffix}, {a.format(placements=True)}>"

    shard_od = OperationDistAttr(src.mesh, (), (src,), -1).format(placements=True)
    reshard_od = OperationDistAttr(merge_meshes(src.mesh, dst.mesh), (src,), (dst,), -1).format(placements=True)
    shp = ",".join(map(str, shape))
    lines = [
        "{",
        f'    (%0) = "pd_op.data" () {{dtype:{dtype},name:"x",place:Place(undefined:0),shape:[{shp}],'
        f"stop_gradient:[true]}} : () -> {dense}",
        f'    (%1) = "dist_op.shard_tensor" (%0) {{op_dist_attr:{shard_od},'
        f"persistable:[false],stop_gradient:[true]}} : ({dense}) -> {ty(src)}",
        f'    (%2) = "dist_op.reshard" (%1) {{op_dist_attr:{reshard_od},'
        f"stop_gradient:[true]}} : ({ty(src)}) -> {ty(dst)}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def build_program(src_mesh: ProcessMesh, src_placements, dst_mesh: ProcessMesh, dst_placements,
                  shape: Sequence[int] = (4, 8), dtype: str = "float32", filename: str = "<explorer>",
                  coshard: bool = False):
    """The program Paddle prints for ``x = data(shape); y = shard_tensor(x, src_mesh, src_pl);
    reshard(y, dst_mesh, dst_pl)``.  Placements: lists of Placement or strings (``"s0,r"``).

    Paddle's ``shard_tensor`` prints co-sharded placements as its dims mapping says them
    (``[s0, s0]`` becomes ``[Replicate(), Shard(dim=0)]``: half the rows on each rank); with
    ``coshard`` the source keeps them as given (``[Shard(dim=0), Shard(dim=0)]``: a quarter)."""
    from ...syntax.parser import parse

    return parse(build_source(src_mesh, src_placements, dst_mesh, dst_placements, shape, dtype, coshard), filename)


def build_source(src_mesh: ProcessMesh, src_placements, dst_mesh: ProcessMesh, dst_placements,
                 shape: Sequence[int] = (4, 8), dtype: str = "float32", coshard: bool = False) -> str:
    """:func:`build_program`'s text (what it prints), without parsing it (a command that parses
    the text itself reads a 100,000-rank mesh once, not twice)."""
    shape = tuple(int(s) for s in shape)
    if isinstance(src_placements, str) or (src_placements and isinstance(src_placements[0], str)):
        src_placements = parse_placements(src_placements, src_mesh.ndim)
    if isinstance(dst_placements, str) or (dst_placements and isinstance(dst_placements[0], str)):
        dst_placements = parse_placements(dst_placements, dst_mesh.ndim)
    if len(src_placements) != src_mesh.ndim or len(dst_placements) != dst_mesh.ndim:
        raise DiagnosticError("need one placement per mesh dim")
    src = layout(src_mesh, src_placements, len(shape), keep_given=coshard)
    dst = layout(dst_mesh, dst_placements, len(shape), keep_given=True)
    return build_text(src, dst, shape, dtype)
