"""Compare two programs op by op, up to a consistent renaming of values and ring ids.

1. Every op gets a key: its name, nesting depth, attributes (without ``ring_id`` unless rings are
   exact, without ignored attributes), operand and result types, and where each operand comes
   from (the producing op's name, or the ``name`` of a ``pd_op.data``/parameter op, and the
   result index) -- never a value name.
2. The key sequences are aligned (:mod:`.align`); the ops left over between two aligned pairs are
   paired by op name in order, so an op with one attribute changed is one changed op, not a
   removal and an insertion.
3. Walking the pairs in program order, results of paired ops correspond (a bijection by
   construction) and ring ids are mapped A -> B on first sight; a pair differs when an
   attribute, a result type, an operand's correspondence or a ring id's mapping does not hold.
   An operand that comes from an added or removed op is not a difference of its own (the
   added/removed op is).
"""

from __future__ import annotations

from bisect import bisect_right

from ...ir.attrs import StrAttr
from ...ir.core import Operation, Program, Value
from ...ir.dist import OperationDistAttr, placements_name, ranks_text
from ...ir.records import field, record
from ...ir.types import DistTensorType
from .align import align

RING = "ring_id"
NAME_ATTRS = ("name", "parameter_name")


@record
class Change:
    """One attribute-level difference of a changed op (``what`` is attr, type, operand, ...)."""

    what: str
    name: str
    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.name}{' type' if self.what == 'type' else ''}: {self.a} -> {self.b}"


@record
class OpDiff:
    kind: str  # "added", "removed", "changed"
    a: Operation | None
    b: Operation | None
    changes: list[Change] = field(default_factory=list)

    @property
    def op(self) -> str:
        return (self.a or self.b).name  # type: ignore[union-attr]


@record
class DiffResult:
    a: Program
    b: Program
    diffs: list[OpDiff]
    rings: dict[int, int]  # ring id in A -> ring id in B, as the pairing found them
    n_a: int
    n_b: int
    exact_rings: bool = False
    ignored: tuple[str, ...] = ()

    @property
    def equal(self) -> bool:
        return not self.diffs

    def counts(self) -> dict[str, int]:
        out = {"added": 0, "removed": 0, "changed": 0}
        for d in self.diffs:
            out[d.kind] += 1
        return out


def _flatten(prog: Program) -> list[tuple[Operation, int]]:
    out: list[tuple[Operation, int]] = []
    stack = [(op, 0) for op in reversed(prog.ops)]
    while stack:
        op, depth = stack.pop()
        out.append((op, depth))
        inner = [(o, depth + 1) for r in op.regions for blk in r.blocks for o in blk.ops]
        stack.extend(reversed(inner))
    return out


def _label(op: Operation) -> object:
    for n in NAME_ATTRS:
        a = op.attrs.get(n)
        if isinstance(a, StrAttr):
            return (op.name, a.raw)
    return op.name


def _source(v: Value | None, labels: dict[int, object]) -> object:
    if v is None:
        return None
    owner = v.owner
    if owner is None:
        return ("arg", getattr(v, "index", 0))
    return (labels.get(id(owner), owner.name), getattr(v, "index", 0))


def _keys(ops: list[tuple[Operation, int]], drop: frozenset[str]) -> list[int]:
    labels = {id(op): _label(op) for op, _ in ops}
    hashes: dict[int, int] = {}  # the parser shares attribute and type objects: hash each once

    def h(x) -> int:
        r = hashes.get(id(x))
        if r is None:
            r = hashes[id(x)] = hash(x)
        return r

    keys = []
    for op, depth in ops:
        attrs = frozenset((k, h(v)) for k, v in op.attrs.items() if k not in drop)
        keys.append(hash((op.name, depth, attrs,
                          tuple(h(v.type) if v is not None else None for v in op.operands),
                          tuple(h(r.type) for r in op.results),
                          tuple(_source(v, labels) for v in op.operands),
                          len(op.regions))))
    return keys


def _pair_gaps(fa, fb, matches: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Pair the unmatched ops between consecutive matches by op name and depth, in order."""
    out = list(matches)
    bounds = [(-1, -1), *matches, (len(fa), len(fb))]
    for (i0, j0), (i1, j1) in zip(bounds, bounds[1:]):
        if i1 - i0 <= 1 or j1 - j0 <= 1:
            continue
        by_name: dict[tuple, list[int]] = {}
        for j in range(j0 + 1, j1):
            op, d = fb[j]
            by_name.setdefault((op.name, d), []).append(j)
        last = j0
        for i in range(i0 + 1, i1):
            op, d = fa[i]
            cand = by_name.get((op.name, d))
            if not cand:
                continue
            k = bisect_right(cand, last)
            if k < len(cand):
                last = cand[k]
                out.append((i, last))
    out.sort()
    return out


def diff_programs(a: Program, b: Program, *, exact_rings: bool = False,
                  ignore_attrs: tuple[str, ...] | list[str] = ()) -> DiffResult:
    """The differences of ``b`` against ``a`` (see the module docstring)."""
    ignored = tuple(ignore_attrs)
    drop = frozenset(ignored) | (frozenset() if exact_rings else {RING})
    fa, fb = _flatten(a), _flatten(b)
    ka, kb = _keys(fa, drop), _keys(fb, drop)
    pairs = _pair_gaps(fa, fb, align(ka, kb))
    check_rings = not exact_rings and RING not in ignored
    vmap: dict[int, Value] = {}
    _map_block_args(a, b, vmap)
    paired_a = {id(fa[i][0]) for i, _ in pairs}
    paired_b = {id(fb[j][0]) for _, j in pairs}
    _map_top_args(a, b, vmap)
    for i, j in pairs:
        _map_values(fa[i][0], fb[j][0], vmap)
    rings: dict[int, int] = {}
    rings_back: dict[int, int] = {}
    diffs: list[OpDiff] = []
    pi = pj = 0
    for i, j in pairs:
        diffs.extend(OpDiff("removed", fa[k][0], None) for k in range(pi, i))
        diffs.extend(OpDiff("added", None, fb[k][0]) for k in range(pj, j))
        pi, pj = i + 1, j + 1
        oa, ob = fa[i][0], fb[j][0]
        ch = _op_changes(oa, ob, vmap, paired_a, paired_b, drop, check_rings, rings, rings_back, ka[i] == kb[j])
        if ch:
            diffs.append(OpDiff("changed", oa, ob, ch))
    diffs.extend(OpDiff("removed", fa[k][0], None) for k in range(pi, len(fa)))
    diffs.extend(OpDiff("added", None, fb[k][0]) for k in range(pj, len(fb)))
    return DiffResult(a, b, diffs, rings, len(fa), len(fb), exact_rings, ignored)


def _map_block_args(a: Program, b: Program, vmap: dict[int, Value]) -> None:
    """The top blocks' arguments: plain ones by position, keyword ones (``%kwarg_NAME``) by name."""
    kb = {x.keyword: x for x in b.block.args if x.keyword is not None}
    plain_b = [x for x in b.block.args if x.keyword is None]
    for x, y in zip([x for x in a.block.args if x.keyword is None], plain_b):
        vmap[id(x)] = y
    for x in a.block.args:
        if x.keyword is not None and x.keyword in kb:
            vmap[id(x)] = kb[x.keyword]


def _map_top_args(a: Program, b: Program, vmap: dict[int, Value]) -> None:
    """The programs' own block arguments (``^kw:`` ``%kwarg_*`` of job and tensor-fusion programs):
    a keyword argument corresponds to B's of the same keyword, the others by position."""
    kw = {x.keyword: x for x in b.block.args if getattr(x, "keyword", None)}
    plain = [x for x in b.block.args if not getattr(x, "keyword", None)]
    k = 0
    for x in a.block.args:
        if getattr(x, "keyword", None):
            y = kw.get(x.keyword)
        else:
            y = plain[k] if k < len(plain) else None
            k += 1
        if y is not None:
            vmap[id(x)] = y


def _map_values(oa: Operation, ob: Operation, vmap: dict[int, Value]) -> None:
    for ra, rb in zip(oa.results, ob.results):
        vmap[id(ra)] = rb
    for rga, rgb in zip(oa.regions, ob.regions):
        for ba, bb in zip(rga.blocks, rgb.blocks):
            for va, vb in zip(ba.args, bb.args):
                vmap[id(va)] = vb


def vname(v: Value | None) -> str:
    if v is None:
        return "<<NULL VALUE>>"
    return f"%{v.name}" if v.name is not None else "%?"


def _op_changes(oa, ob, vmap, paired_a, paired_b, drop, check_rings, rings, rings_back,
                same_key: bool) -> list[Change]:
    """What differs between two paired ops (``same_key``: their keys are equal, so attributes,
    types and operand sources are: only operand correspondence and ring ids are left)."""
    ch: list[Change] = []
    if check_rings and (RING in oa.attrs or RING in ob.attrs):
        _ring_change(oa, ob, rings, rings_back, ch)
    if same_key:
        _operand_changes(oa, ob, vmap, paired_a, paired_b, ch)
        return ch
    for k in sorted(set(oa.attrs) | set(ob.attrs)):
        if k in drop:
            continue
        va, vb = oa.attrs.get(k), ob.attrs.get(k)
        if va == vb:
            continue
        if isinstance(va, OperationDistAttr) and isinstance(vb, OperationDistAttr):
            ch.extend(_dist_changes(va, vb))
        else:
            ch.append(Change("attr", k, "(absent)" if va is None else str(va), "(absent)" if vb is None else str(vb)))
    if oa.num_operands != ob.num_operands:
        ch.append(Change("operands", "operands", str(oa.num_operands), str(ob.num_operands)))
    else:
        _operand_changes(oa, ob, vmap, paired_a, paired_b, ch)
    if oa.num_results != ob.num_results:
        ch.append(Change("results", "results", str(oa.num_results), str(ob.num_results)))
    else:
        for n, (ra, rb) in enumerate(zip(oa.results, ob.results)):
            if ra.type != rb.type:
                ta, tb = short_type(ra.type), short_type(rb.type)
                if ta == tb:
                    ta, tb = str(ra.type), str(rb.type)
                ch.append(Change("type", f"result({n})", ta, tb))
    return merge_changes(ch)


def _operand_changes(oa, ob, vmap, paired_a, paired_b, ch: list[Change]) -> None:
    for n, (va, vb) in enumerate(zip(oa.operands, ob.operands)):
        if va is None or vb is None:
            if (va is None) != (vb is None):
                ch.append(Change("operand", f"operand {n}", vname(va), vname(vb)))
            continue
        if not _counts(va, paired_a) or not _counts(vb, paired_b):
            continue  # comes from an added or removed op: reported there
        if vmap.get(id(va)) is not vb:
            ch.append(Change("operand", f"operand {n}", vname(va), vname(vb)))


def _counts(v: Value, paired: set[int]) -> bool:
    """Whether ``v`` comes from a paired op (block arguments: from the paired op owning them)."""
    owner = v.owner
    if owner is None:
        blk = getattr(v, "block", None)
        region = getattr(blk, "parent", None)
        owner = getattr(region, "parent", None)
        return owner is None or id(owner) in paired
    return id(owner) in paired


def _ring_change(oa, ob, rings, rings_back, ch: list[Change]) -> None:
    ra = getattr(oa.attrs.get(RING), "value", None)
    rb = getattr(ob.attrs.get(RING), "value", None)
    if ra is None or rb is None:
        if (ra is None) != (rb is None):
            ch.append(Change("attr", RING, "(absent)" if ra is None else str(ra), "(absent)" if rb is None else str(rb)))
        return
    want_b, want_a = rings.get(ra), rings_back.get(rb)
    if want_b is None and want_a is None:
        rings[ra] = rb
        rings_back[rb] = ra
        return
    if want_b == rb:
        return
    why = (f"ring {ra} is ring {want_b} elsewhere in B" if want_b is not None
           else f"ring {rb} of B is ring {want_a} elsewhere in A")
    ch.append(Change("ring", RING, str(ra), f"{rb} ({why})"))


def _dist_changes(a: OperationDistAttr, b: OperationDistAttr) -> list[Change]:
    out = []
    if a.mesh != b.mesh:
        out.append(Change("attr", "op_dist_attr.mesh", _mesh(a.mesh), _mesh(b.mesh)))
    for what, xa, xb in (("operand", a.operands, b.operands), ("result", a.results, b.results)):
        for n in range(max(len(xa), len(xb))):
            ea = xa[n] if n < len(xa) else None
            eb = xb[n] if n < len(xb) else None
            if ea != eb:
                ta, tb = _entry(ea, True), _entry(eb, True)
                if ta == tb:
                    ta, tb = _entry(ea, False), _entry(eb, False)
                out.append(Change("attr", f"op_dist_attr.{what}({n})", ta, tb))
    if a.chunk_id != b.chunk_id:
        out.append(Change("attr", "op_dist_attr.chunk_id", str(a.chunk_id), str(b.chunk_id)))
    if not out:  # equal parts spelt differently
        out.append(Change("attr", "op_dist_attr", a.format(), b.format()))
    return out


def _entry(e, short: bool) -> str:
    """A dist attr entry: ``[s0,r] on [0,1,2,3]`` (short) or as printed."""
    if e is None:
        return "(absent)"
    if not short:
        return "{" + e.format() + "}"
    items = getattr(e, "items", None)
    if items is not None:
        return "[" + ", ".join(_entry(x, True) for x in items) + "]"
    return placements_name(e) + " on " + _mesh(e.mesh)


def merge_changes(changes: list[Change]) -> list[Change]:
    """One line for equal changes of several operands/results:
    ``op_dist_attr.operand(0,1), result(0): [r] -> [s0]``."""
    out: list[Change] = []
    seen: dict[tuple[str, str, str], Change] = {}
    for c in changes:
        key = (c.what, c.a, c.b)
        prev = seen.get(key)
        if prev is None:
            seen[key] = c
            out.append(c)
        else:
            prev.name = f"{prev.name}, {c.name.split('.', 1)[-1] if c.what == 'attr' else c.name}"
    return out


def _mesh(m) -> str:
    ids = ranks_text(m.process_ids)
    return ids if len(m.shape) <= 1 else f"{ids} as {'x'.join(map(str, m.shape))}"


def short_type(t) -> str:
    """``16x32xf32[s0,r]``: shape, dtype and placements of a tensor type."""
    shape = getattr(t, "shape", None)
    dtype = getattr(t, "dtype", None)
    if shape is None or dtype is None:
        return str(t)
    text = "x".join(map(str, shape)) + ("x" if shape else "") + str(dtype)
    if isinstance(t, DistTensorType):
        text += placements_name(t.dist)
    return text
