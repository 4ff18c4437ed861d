"""Checks of a program: use-def chains, dominance, dist-attribute shapes (:func:`verify`), and
the values a parseable program may still get wrong (:func:`verify_values`: shapes, meshes,
optimizer operands) — located errors, never a silent wrong output."""

from __future__ import annotations

from operator import attrgetter

from ..dialects.optimizers import BETA_POW, GRAD, LR, OPTIMIZERS, PARAM, STATE, optimizer_sig
from ..ir.core import Block, Operation, Program, Value
from ..ir.dist import OperationDistAttr, ProcessMesh, TensorDistAttr, VecDistAttr
from ..ir.types import DenseTensorType, DistTensorType, VectorType
from ..syntax.diagnostics import DiagnosticError

INT64_MAX = (1 << 63) - 1
_REGIONS = attrgetter("regions")
# operands an optimizer update cannot do without (<<NULL VALUE>> is Paddle's absent optional:
# master weights, skip_update, moment2_max without amsgrad)
REQUIRED = {PARAM, GRAD, LR, STATE, BETA_POW}
OPTIONAL_STATES = {"moment2_max"}
OPTIMIZER_KEYS = frozenset(name for name, _ in OPTIMIZERS)  # the op names optimizer_sig may know
ROLE_NAMES = {PARAM: "the parameter", GRAD: "its gradient", LR: "the learning rate", STATE: "an optimizer state",
              BETA_POW: "a beta power accumulator"}


def _fail(op: Operation, msg: str) -> DiagnosticError:
    line, col = op.loc if op.loc else (None, None)
    return DiagnosticError(f"'{op.name}': {msg}", line, col)


def verify(prog: Program) -> None:
    """Raise a located DiagnosticError on the first inconsistency."""
    _verify_block(prog.block, set(), set())
    verify_values(prog)


def verify_changed(prog: Program) -> None:
    """:func:`verify` for the end of a pass pipeline whose input passed :func:`verify_values`
    (the commands' ``load``, :meth:`distc.pipeline.ShardPipeline.check_main`): the same errors,
    the same first one, checking in full only the ops the passes created or changed.
    ``--verify-each`` and ``distc verify`` keep the full :func:`verify`.

    Why that finds every error :func:`verify` finds.  An op is *clean* (``op.dirty`` false) only
    if it is as it was parsed: every change of an op's operands, attributes or result types goes
    through :mod:`distc.ir.core`, which marks it dirty, and retyping a value marks its owner and
    every user dirty (:class:`~distc.ir.values.Value`); a new op is dirty from birth.  So, op by op:

    * parent links and def-before-use are checked on every op (a set lookup an operand: an op
      moved or removed under a clean user is still found);
    * each operand of every op must be in its value's use list (also a clean op's: an operand
      slot set by hand, not through ``ir.core``, leaves the op clean; it costs no measurable time);
    * stale uses (an entry whose op no longer reads the value there) anywhere: the uses of the
      program's values are counted against the operand slots that hold a value; with every slot
      in its value's list, equal counts leave no room for a stale entry; other counts (an op
      taken out of its block keeps its uses, which the full verify lets pass) get the full
      structural walk, which decides as :func:`verify` does;
    * dist entries are checked against their values' types on every op (each (entry, type) pair
      once: cheap; the input never had this check);
    * the value checks (dims, meshes, optimizer operands) on dirty ops, after the structure of
      every op (as :func:`verify` orders them): a clean op's types and attributes are those
      :func:`verify_values` accepted in the input.

    The first error is :func:`verify`'s: where the structural walk finds one, the full walk
    names the first (it may be another: a stale use ahead of it); the value checks' first is the
    first dirty op's, clean ops having none.  A program with regions (control flow) gets the full
    :func:`verify`."""
    block = prog.block
    try:
        listed = _structure(block)
    except DiagnosticError:
        verify(prog)  # (names the first error as it orders them; it finds every one this finds)
        raise
    if listed is None:  # (regions)
        verify(prog)
        return
    checked: set[int] = set()  # types and meshes already value-checked (by identity)
    sigs = OPTIMIZER_KEYS
    for op, full in listed:
        if full:
            _values_of(op, checked, sigs)
        else:  # (an update of a key checked before: its types and dist attr are that op's)
            sig = optimizer_sig(op)
            if sig is not None:
                _check_optimizer(op, sig)


def _key(d, operands, results) -> tuple:
    """What the dist and value checks of an op read, by identity: its op_dist_attr and the types
    of its results and operands (0: an absent operand).  Two ops of one key pass or fail those
    checks alike, so only the first of each key is checked (types, meshes and dist attrs are
    immutable, shared objects)."""
    n = len(operands)
    if len(results) == 1 and n < 3:  # (most ops: no list built)
        if not n:
            return id(d), id(results[0]._type)
        a = operands[0]
        if n == 1:
            return id(d), id(results[0]._type), 0 if a is None else id(a._type)
        b = operands[1]
        return id(d), id(results[0]._type), 0 if a is None else id(a._type), 0 if b is None else id(b._type)
    return (id(d), len(results), *[id(r._type) for r in results],
            *[0 if v is None else id(v._type) for v in operands])


def _structure(block: Block) -> list[tuple[Operation, bool]] | None:
    """:func:`verify_changed`'s structural walk of ``block``: the dirty ops whose value checks are
    to run, in program order, each with whether it needs them all (the first of each
    :func:`_key`) or only the optimizer operand check (an update whose key was listed before);
    None: the block holds regions.  Every op of a lowered program passes here (mlp256: 10,769
    ops), so the common case -- one result, up to two operands -- is inline: each present
    operand's def-before-use (a membership test), its use-list entry and its slot counted, and
    the key built (:func:`_key`'s); other ops take one subset test for def-before-use (``None``,
    an absent operand, counts as defined) and a loop over their operands.  The dist entries are
    checked against their values' types once a key (:func:`_verify_dist`, whose pairs then go to
    ``fits``).  The checks' order within an op is not the full walk's: any error found here is
    named by :func:`verify` (:func:`verify_changed`)."""
    seen: set = set(block.args)
    seen.add(None)
    defined = seen.issuperset
    define = seen.update
    add = seen.add
    fits: set = set()  # (entry, type) pairs found to fit, by identity
    fit_keys: set = set()  # keys of ops whose every pair fits
    value_keys: set = set()  # keys of the dirty ops listed
    sigs = OPTIMIZER_KEYS
    long_uses: dict = {}
    listed: list[tuple[Operation, bool]] = []
    slots = uses = 0
    for a in block.args:
        uses += len(a.uses)
    for op in block.ops:
        if op.regions:
            return None
        if op.parent is not block:
            raise _fail(op, "op's parent link does not point at its block")
        operands = op._operands
        n = len(operands)
        results = op.results
        attrs = op._attrs
        d = attrs.get("op_dist_attr") if attrs is not None else op.dist_attr
        if d is not None and d.__class__ is not OperationDistAttr:
            d = op.dist_attr  # (not one: None; a subclass: itself)
        if len(results) == 1 and n < 3:  # (most ops: def-before-use, the use lists and _key's key, inline)
            r = results[0]
            if not n:
                key = id(d), id(r._type)
            else:
                a = operands[0]
                if a is None:
                    ta = 0
                else:
                    if a not in seen:
                        raise _fail(op, "operand 0 is used before it is defined (or is not in scope)")
                    u = a.uses
                    if (op, 0) not in u if len(u) <= _LONG else not _in_uses(a, op, 0, long_uses):
                        raise _fail(op, "operand 0 is missing from its value's use list")
                    ta = id(a._type)
                    slots += 1
                if n == 1:
                    key = id(d), id(r._type), ta
                else:
                    b = operands[1]
                    if b is None:
                        tb = 0
                    else:
                        if b not in seen:
                            raise _fail(op, "operand 1 is used before it is defined (or is not in scope)")
                        u = b.uses
                        if (op, 1) not in u if len(u) <= _LONG else not _in_uses(b, op, 1, long_uses):
                            raise _fail(op, "operand 1 is missing from its value's use list")
                        tb = id(b._type)
                        slots += 1
                    key = id(d), id(r._type), ta, tb
            uses += len(r.uses)
            add(r)
        else:
            if n:
                if not defined(operands):
                    i = next(i for i, v in enumerate(operands) if v not in seen)
                    raise _fail(op, f"operand {i} is used before it is defined (or is not in scope)")
                slots += n - operands.count(None)
                for i, v in enumerate(operands):  # (in its value's use list: _check_uses, inline; every op, see above)
                    if v is not None:
                        u = v.uses
                        if (op, i) not in u if len(u) <= _LONG else not _in_uses(v, op, i, long_uses):
                            raise _fail(op, f"operand {i} is missing from its value's use list")
            key = _key(d, operands, results)
            define(results)
            for r in results:
                uses += len(r.uses)
        if d is not None and key not in fit_keys:
            _verify_dist(op, fits)
            if all((id(e), id(v._type)) in fits for e, v in zip(d.operands, operands) if v is not None) and \
                    all((id(e), id(v._type)) in fits for e, v in zip(d.results, results)):
                fit_keys.add(key)  # (not where _verify_dist let an op pass unchecked: grad_merge_add)
        if op.dirty:
            if key not in value_keys:
                value_keys.add(key)
                listed.append((op, True))
            elif op.name in sigs:
                listed.append((op, False))
    if uses != slots:  # uses of ops no longer in the program, or a stale one: the full walk decides
        _verify_block(block, set(), set())
    return listed


def _values_of(op: Operation, seen: set[int], sigs) -> None:
    """:func:`verify_values` on one op (``seen``: types and meshes checked already)."""
    _values_of_ops((op,), seen, sigs)


def _values_of_ops(ops, seen: set[int], sigs) -> None:
    """:func:`verify_values` on ``ops``, in order (``seen``: types and meshes checked already):
    the one loop of the input's check (mlp96: 2,318 ops), no call an op but for what is new."""
    for op in ops:
        for v in op.results:
            if id(v._type) not in seen:
                _new_types(op, seen)
                break
        else:
            for v in op._operands:
                if v is not None and id(v._type) not in seen:
                    _new_types(op, seen)
                    break
        a = op._attrs
        d = a.get("op_dist_attr") if a is not None else op.attr("op_dist_attr")
        if d is not None and id(d) not in seen and isinstance(d, OperationDistAttr):
            _new_dist(op, d, seen)
        if op.name in sigs:
            sig = optimizer_sig(op)
            if sig is not None:
                _check_optimizer(op, sig)


def _new_dist(op: Operation, d: OperationDistAttr, seen: set[int]) -> None:
    """The meshes of ``op``'s op dist attr ``d``, not seen before, and of its entries not seen before."""
    seen.add(id(d))
    _check_mesh(op, "op_dist_attr", d.mesh, seen)
    for kind, entries in (("operand", d.operands), ("result", d.results)):
        for i, e in enumerate(entries):
            if id(e) in seen:  # (an entry shared with an op_dist_attr checked before: its meshes too)
                continue
            seen.add(id(e))
            for t in (e.items if isinstance(e, VecDistAttr) else (e,)):
                if isinstance(t, TensorDistAttr) and id(t.mesh) not in seen:
                    _check_mesh(op, f"op_dist_attr {kind}({i})", t.mesh, seen)


def verify_values(prog: Program) -> None:
    """What parses but no program can hold, as a located error: a dim below -1 (-1 is Paddle's
    unknown dim) or beyond int64, or a tensor of more than int64 elements; a mesh of no ranks, a
    dim of 0 ranks, negative or repeated process ids; an optimizer update missing its parameter,
    gradient, learning rate or a state (``<<NULL VALUE>>``).  Types and meshes are shared
    objects: each is checked once."""
    ops = prog.block.ops
    _values_of_ops(prog.walk() if any(map(_REGIONS, ops)) else ops, set(), OPTIMIZER_KEYS)  # (walk only for regions)


def _new_types(op: Operation, seen: set[int]) -> None:
    """Check the types of ``op``'s results, then operands, not seen before."""
    for values, kind in ((op.results, "result"), (op._operands, "operand")):
        for v in values:
            if v is not None and id(v._type) not in seen:
                i = values.index(v)
                seen.add(id(v._type))
                _check_type(op, f"{kind}({i})", v._type, seen)


def _check_type(op: Operation, where: str, t, seen: set[int]) -> None:
    if isinstance(t, VectorType):
        for k, e in enumerate(t.elements):
            _check_type(op, f"{where}[{k}]", e, seen)
        return
    if not isinstance(t, (DenseTensorType, DistTensorType)):
        return
    n = 1
    for d in t.shape:
        if d < -1:
            raise _fail(op, f"{where} has type {_short(t)}: dim {d} is negative (-1, an unknown dim, is the "
                            "only negative dim)")
        if d > INT64_MAX:
            raise _fail(op, f"{where} has type {_short(t)}: dim {d} is beyond int64")
        n *= max(d, 1)
    if n > INT64_MAX:
        raise _fail(op, f"{where} has type {_short(t)}: {n} elements, beyond int64")
    if isinstance(t, DistTensorType):
        _check_mesh(op, f"{where} type", t.dist.mesh, seen)


def _check_mesh(op: Operation, where: str, mesh: ProcessMesh, seen: set[int]) -> None:
    if id(mesh) in seen:
        return
    seen.add(id(mesh))
    if not mesh.shape and not mesh.process_ids:  # no mesh given (an entry without one)
        return
    ids = mesh.process_ids
    shown = f"mesh_shape:{list(mesh.shape)},process_ids:[{','.join(map(str, ids[:8]))}{',...' if len(ids) > 8 else ''}]"
    if not ids or any(s < 1 for s in mesh.shape):
        raise _fail(op, f"{where}: a mesh of no ranks ({shown}): every mesh dim holds at least one rank")
    if min(ids) < 0 or max(ids) > INT64_MAX:
        raise _fail(op, f"{where}: process id {min(ids) if min(ids) < 0 else max(ids)} in {shown}: "
                        "process ids are from 0 to int64's largest")
    if len(set(ids)) != len(ids):
        dup = _first_repeat(ids)
        raise _fail(op, f"{where}: process id {dup} appears twice in {shown} (a rank is one place of a mesh)")


def _first_repeat(ids) -> int:
    seen: set[int] = set()
    for p in ids:
        if p in seen:
            return p
        seen.add(p)
    return -1


def _check_optimizer(op: Operation, sig) -> None:
    operands, roles = op._operands, sig.operands
    i = -1
    for _ in range(operands.count(None) if operands else 0):  # (the <<NULL VALUE>> operands, in order)
        i = operands.index(None, i + 1)
        if i >= len(roles):
            return
        role, name = roles[i]
        if role in REQUIRED and name not in OPTIONAL_STATES:
            raise _fail(op, f"operand {i} ({name}: {ROLE_NAMES[role]}) is <<NULL VALUE>>: the update "
                            "cannot do without it")


def _short(t) -> str:
    text = str(t)
    return text if len(text) <= 120 else text[:117] + "..."


def _verify_block(block: Block, visible: set[int], fits: set, long_uses: dict | None = None) -> None:
    """``long_uses``: id(value) -> its uses as a set of (id(op), index), for the values of many
    uses (a learning rate read by every optimizer update: a scan of its list per use would be
    quadratic); the values live as long as the walk, so their ids stay theirs."""
    seen = set(visible)
    for a in block.args:
        seen.add(id(a))
    add = seen.add
    if long_uses is None:
        long_uses = {}
    for op in block.ops:
        if op.parent is not block:
            raise _fail(op, "op's parent link does not point at its block")
        _check_operands(op, seen, long_uses)
        for r in op.results:
            for user, idx in r.uses:
                if user._operands[idx] is not r:
                    raise _fail(op, f"result {r.index} has a stale use in '{user.name}'")
        for region in op.regions:
            for b in region.blocks:
                _verify_block(b, seen, fits, long_uses)
        _verify_dist(op, fits)
        for r in op.results:
            add(id(r))


_LONG = 16  # use lists longer than this are looked up in a set (_in_uses)


def _check_operands(op: Operation, seen: set[int], long_uses: dict) -> None:
    """Each operand of ``op`` is defined before it (``seen``: ids of the values in scope) and
    holds ``op`` in its use list (``long_uses``: see :func:`_verify_block`)."""
    for i, v in enumerate(op._operands):
        if v is None:
            continue
        if id(v) not in seen:
            raise _fail(op, f"operand {i} is used before it is defined (or is not in scope)")
        if not _in_uses(v, op, i, long_uses):
            raise _fail(op, f"operand {i} is missing from its value's use list")


def _in_uses(v: Value, op: Operation, i: int, long_uses: dict) -> bool:
    """``(op, i)`` is in ``v``'s use list (ops compare by identity); a long list is looked up in
    a set of it made once (``long_uses``: id(value) -> set)."""
    uses = v.uses
    if len(uses) > _LONG:
        found = long_uses.get(id(v))
        if found is None:
            found = long_uses[id(v)] = {(id(u), k) for u, k in uses}
        return (id(op), i) in found
    return (op, i) in uses


def _verify_dist(op: Operation, fits: set) -> None:
    """``fits``: (entry, type) pairs already found to fit, by identity (entries and types are
    immutable and shared between ops: each pair is checked once)."""
    d = op.dist_attr
    if d is None:
        return
    # Paddle itself writes fewer entries than operands on some ops (the slice of r->s keeps only
    # operand(0); full on non-root ranks of r->p keeps a stale operand entry), so entry counts are
    # not checked; the entries that are there must fit their values.  Paddle's gradient-merge
    # add_ carries its gradient's producer's dist attr: not checked (asked only of an op with a
    # pair not found to fit yet: most ops have none)
    merge = None
    for kind, entries, values in (("operand", d.operands, op._operands), ("result", d.results, op.results)):
        for i, (e, v) in enumerate(zip(entries, values)):
            if v is None:
                continue
            key = (id(e), id(v._type))
            if key not in fits:
                if merge is None:
                    merge = op.has_attr("grad_merge_add")
                if merge:
                    return
                _check_entry(op, f"{kind}({i})", e, v)
                fits.add(key)


def _check_entry(op: Operation, where: str, e, v: Value | None) -> None:
    if v is None:
        return
    t = v.type
    if isinstance(e, VecDistAttr):
        if isinstance(t, VectorType) and len(t.elements) != len(e.items):
            raise _fail(op, f"{where} has {len(e.items)} dist entries for a vector of {len(t.elements)}")
        return
    if isinstance(e, TensorDistAttr) and not e.is_empty and isinstance(t, DistTensorType):
        if e.form != "maping" and len(e.dims_mapping) != t.rank:
            raise _fail(op, f"{where} dims_mapping {list(e.dims_mapping)} does not fit rank {t.rank}")
