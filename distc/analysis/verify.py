"""Checks of a program: use-def chains, dominance, dist-attribute shapes (:func:`verify`), and
the values a parseable program may still get wrong (:func:`verify_values`: shapes, meshes,
optimizer operands) — located errors, never a silent wrong output."""

from __future__ import annotations

from ..dialects.optimizers import BETA_POW, GRAD, LR, OPTIMIZERS, PARAM, STATE, optimizer_sig
from ..ir.core import Block, Operation, Program, Value
from ..ir.dist import OperationDistAttr, ProcessMesh, TensorDistAttr, VecDistAttr
from ..ir.types import DenseTensorType, DistTensorType, VectorType
from ..syntax.diagnostics import DiagnosticError

INT64_MAX = (1 << 63) - 1
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
    checking in full only the ops the passes created or changed.  ``--verify-each`` and ``distc
    verify`` keep the full :func:`verify`.

    Why that finds every error :func:`verify` finds.  An op is *clean* (``op.dirty`` false) only
    if it is as it was parsed: every change of an op's operands, attributes or result types goes
    through :mod:`distc.ir.core`, which marks it dirty, and retyping a value marks its owner and
    every user dirty (:class:`~distc.ir.values.Value`); a new op is dirty from birth.  So, op by op:

    * parent links and def-before-use are checked on every op (a set lookup an operand: an op
      moved or removed under a clean user is still found);
    * each operand of a dirty op must be in its value's use list; a clean op's operands are
      still in theirs, as the parser built them (use lists change only in ``ir.core``, together
      with the operand slot changed, whose op is then dirty);
    * stale uses (an entry whose op no longer reads the value there) anywhere: the uses of the
      program's values are counted against the operand slots that hold a value; with every slot
      in its value's list, equal counts leave no room for a stale entry; other counts (an op
      taken out of its block keeps its uses, which the full verify lets pass) get the full
      structural walk, which decides as :func:`verify` does;
    * dist entries are checked against their values' types on every op (each (entry, type) pair
      once: cheap; the input never had this check);
    * the value checks (dims, meshes, optimizer operands) on dirty ops: a clean op's types and
      attributes are those :func:`verify_values` accepted in the input.

    A program with regions (control flow) gets the full :func:`verify`."""
    block = prog.block
    seen: set[int] = {id(a) for a in block.args}
    add = seen.add
    fits: set = set()
    checked: set[int] = set()  # types and meshes already value-checked (by identity)
    long_uses: dict = {}
    sigs = OPTIMIZER_KEYS
    slots = uses = 0
    for a in block.args:
        uses += len(a.uses)
    for op in block.ops:
        if op.regions:
            return verify(prog)
        if op.parent is not block:
            raise _fail(op, "op's parent link does not point at its block")
        operands = op._operands
        if op.dirty:
            _check_operands(op, seen, long_uses)
            _values_of(op, checked, sigs)
        else:
            for i, v in enumerate(operands):
                if v is not None and id(v) not in seen:
                    raise _fail(op, f"operand {i} is used before it is defined (or is not in scope)")
        slots += len(operands) - (operands.count(None) if operands else 0)
        _verify_dist(op, fits)
        for r in op.results:
            add(id(r))
            uses += len(r.uses)
    if uses != slots:  # uses of ops no longer in the program, or a stale one: the full walk decides
        _verify_block(block, set(), set())


def _values_of(op: Operation, seen: set[int], sigs) -> None:
    """:func:`verify_values` on one op (``seen``: types and meshes checked already)."""
    for v in op.results:
        if id(v._type) not in seen:
            _new_types(op, seen)
            break
    else:
        for v in op._operands:
            if v is not None and id(v._type) not in seen:
                _new_types(op, seen)
                break
    d = op.attr("op_dist_attr")
    if d is not None and id(d) not in seen and isinstance(d, OperationDistAttr):
        seen.add(id(d))
        _check_mesh(op, "op_dist_attr", d.mesh, seen)
        for kind, entries in (("operand", d.operands), ("result", d.results)):
            for i, e in enumerate(entries):
                for t in (e.items if isinstance(e, VecDistAttr) else (e,)):
                    if isinstance(t, TensorDistAttr):
                        _check_mesh(op, f"op_dist_attr {kind}({i})", t.mesh, seen)
    if op.name in sigs:
        sig = optimizer_sig(op)
        if sig is not None:
            _check_optimizer(op, sig)


def verify_values(prog: Program) -> None:
    """What parses but no program can hold, as a located error: a dim below -1 (-1 is Paddle's
    unknown dim) or beyond int64, or a tensor of more than int64 elements; a mesh of no ranks, a
    dim of 0 ranks, negative or repeated process ids; an optimizer update missing its parameter,
    gradient, learning rate or a state (``<<NULL VALUE>>``).  Types and meshes are shared
    objects: each is checked once."""
    seen: set[int] = set()
    sigs = OPTIMIZER_KEYS
    for op in prog.walk():
        _values_of(op, seen, sigs)


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
    for i, (role, name) in enumerate(sig.operands):
        if role in REQUIRED and name not in OPTIONAL_STATES and i < len(op._operands) and op._operands[i] is None:
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


_LONG = 16  # use lists longer than this are looked up in a set (_verify_block)


def _check_operands(op: Operation, seen: set[int], long_uses: dict) -> None:
    """Each operand of ``op`` is defined before it (``seen``: ids of the values in scope) and
    holds ``op`` in its use list (``long_uses``: see :func:`_verify_block`)."""
    for i, v in enumerate(op._operands):
        if v is None:
            continue
        if id(v) not in seen:
            raise _fail(op, f"operand {i} is used before it is defined (or is not in scope)")
        uses = v.uses
        if len(uses) > _LONG:
            found = long_uses.get(id(v))
            if found is None:
                found = long_uses[id(v)] = {(id(u), k) for u, k in uses}
            ok = (id(op), i) in found
        else:
            ok = _has_use(uses, op, i)
        if not ok:
            raise _fail(op, f"operand {i} is missing from its value's use list")


def _has_use(uses: list, op: Operation, i: int) -> bool:
    """``(op, i) in uses``, the last uses first (a value's use list grows in program order, so
    the walk finds each op's use near its end) and by identity."""
    for k in range(len(uses) - 1, -1, -1):
        u = uses[k]
        if u[0] is op and u[1] == i:
            return True
    return False


def _verify_dist(op: Operation, fits: set) -> None:
    """``fits``: (entry, type) pairs already found to fit, by identity (entries and types are
    immutable and shared between ops: each pair is checked once)."""
    d = op.attr("op_dist_attr")
    if d is None or not isinstance(d, OperationDistAttr) or op.has_attr("grad_merge_add"):
        return  # (Paddle's gradient-merge add_ carries its gradient's producer's dist attr)
    # Paddle itself writes fewer entries than operands on some ops (the slice of r->s keeps only
    # operand(0); full on non-root ranks of r->p keeps a stale operand entry), so entry counts are
    # not checked; the entries that are there must fit their values.
    for kind, entries, values in (("operand", d.operands, op._operands), ("result", d.results, op.results)):
        for i, (e, v) in enumerate(zip(entries, values)):
            if v is None:
                continue
            key = (id(e), id(v._type))
            if key not in fits:
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
