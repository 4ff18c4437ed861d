"""Lower each distinct reshard once and replay it.

A training program lowers the same few reshards hundreds of times (every layer's gradient
``Partial -> Shard``, every parameter's ``Shard -> Replicate`` ...).  Lowering one is matching
the functions of the registry, planning, building ops through :class:`~distc.passes.paddle_api.PaddleAPI`; its
result depends only on what the function can see: the two layouts, the input's and the result's
types, the attributes copied from the reshard and from the input's producer (``op_role``,
``stop_gradient``, ``chunk_id``), whether the input has other users, and ring ids, which the
allocator hands out once per group (so a later lowering of the same key gets the same ids).

:class:`Replayer` wraps the one-by-one lowering (``lower_reshard``): the first reshard of a key is
lowered for real and recorded as a template (op names, attributes, result types, operand wiring,
the collective records, the step); every later one rebuilds those ops in front of its reshard.
A lowering that reaches outside its own ops (retypes the input or changes its producer, uses a
value other than the input, leaves notes) is never recorded: such reshards are always lowered one
by one.  ``tests/test_reshard_replay.py`` holds the replayed programs to one-by-one lowering byte
for byte.
"""

from __future__ import annotations

from ...ir.builder import InsertPoint, become
from ...ir.core import Operation, new_op
from ..sharding_util import chunk_id_of, stop_gradient
from .context import retire

_X = -1  # operand reference: the reshard's input
_XS = (_X,)


class _Template:
    __slots__ = ("ops", "out", "records", "step")

    def __init__(self, ops, out, records, step) -> None:
        self.ops = ops  # [(name, operand refs, result types, attrs)]
        self.out = out  # None, _X or (op index, result index)
        self.records = records
        self.step = step


class _Key(tuple):
    """A replay key (a tuple, equal to and hashing as :meth:`Replayer.key`'s) that hashes once."""

    def __hash__(self) -> int:
        h = self.__dict__.get("h")
        if h is None:
            h = self.__dict__["h"] = tuple.__hash__(self)
        return h


class Replayer:
    """``lower_reshard`` with memory: same signature, same effect on the program.

    ``log``: a list that gets ``(key, ops, line)`` for each reshard, in lowering order (``ops``:
    those inserted for it; ``line``: the reshard's); with it, ``recipes`` keeps for the first
    reshard of each key what its lowering reads (:func:`alone`): ``distc shard --all-ranks``
    derives other ranks' texts from one rank's so (:mod:`distc.pipeline.derive`)."""

    def __init__(self, lower_one, *, log: list | None = None) -> None:
        self.lower_one = lower_one
        self.templates: dict = {}
        self.replayed = 0
        self.log = log
        self.recipes: dict = {}  # key -> alone(its first reshard)
        # the key by the identity of its dist attr, op_role and types (one object a kind:
        # DistTensorType.with_dist, PaddleAPI.op_attr and insert) and the value of the rest -> (those
        # objects, kept alive so that their ids stay theirs; one :class:`_Key` a kind, which hashes once)
        self._keys: dict = {}

    @staticmethod
    def key(op: Operation, x, paddle_only: bool, enable, disable=()) -> tuple | None:
        if x is None or op.num_results != 1:
            return None
        owner = x.owner
        try:
            k = (op.dist_attr, x.type, op.results[0].type, op.attr("op_role"),
                 stop_gradient(x), chunk_id_of(owner) if owner is not None else -1, owner is None,
                 min(len(x.uses), 2), paddle_only, tuple(enable), tuple(disable))
            hash(k)
        except TypeError:
            return None
        return k

    def _key(self, op: Operation, x, paddle_only: bool, enable, disable) -> tuple | None:
        """:meth:`key`, each kind's one :class:`_Key` (what :meth:`key` gives, by value), found by
        the identity of the reshard's attribute dict (or dist attr and op_role) and types and of
        its input producer's ``stop_gradient`` list and op_dist_attr (what ``stop_gradient(x)`` and
        the chunk id are read from; the entry keeps them all alive)."""
        if x is None or len(op.results) != 1:
            return None
        owner = x.owner
        a = op._attrs
        if a is not None:  # (a reshard partition made: its attribute dict, shared by its kind and
            od, role = a, -1  # never changed in place, holds its op_dist_attr and op_role)
        else:
            od, role = op.dist_attr, op.attr("op_role")
        xt, rt = x._type, op.results[0]._type
        if owner is not None:
            sg, cd, i = owner.attr("stop_gradient"), owner.dist_attr, x.index
        else:
            sg, cd, i = stop_gradient(x), None, -1
        try:
            ik = (id(od), id(role), id(xt), id(rt), id(sg), id(cd), i, min(len(x.uses), 2), paddle_only,
                  tuple(enable), tuple(disable))
            hit = self._keys.get(ik)
        except TypeError:
            return None
        if hit is None:
            k = self.key(op, x, paddle_only, enable, disable)
            hit = self._keys[ik] = (od, role, xt, rt, sg, cd, None if k is None else _Key(k))
        return hit[6]

    def __call__(self, prog, op: Operation, rank: int, *, rings=None, result=None, paddle_only: bool = False,
                 enable=(), disable=()):
        if self.log is None:
            x = op.operand(0)
            k = self._key(op, x, paddle_only, enable, disable)
            t = self.templates.get(k) if k is not None else None
            if t is not None:  # (most reshards: a kind lowered before)
                self.replayed += 1
                return _replay_into(t, op, x, result)
            return self._lower(prog, op, rank, rings, result, paddle_only, enable, disable, k)
        x = op.operand(0)
        k = self._key(op, x, paddle_only, enable, disable)
        loc = op.loc
        line = loc[0] if loc else None
        if k is not None and k not in self.templates:
            self.recipes[k] = alone(op, x)
        block, before, after = op.parent, op.prev, op.next
        out = self._lower(prog, op, rank, rings, result, paddle_only, enable, disable, k)
        self.log.append((k, _between(block, before, after, op), line))
        return out

    def _lower(self, prog, op: Operation, rank: int, rings, result, paddle_only: bool, enable, disable,
               k: tuple | None | bool = False):
        x = op.operand(0)
        if k is False:
            k = self._key(op, x, paddle_only, enable, disable)
        t = self.templates.get(k) if k is not None else None
        if t is not None:
            self.replayed += 1
            return self._replay(t, op, x, result)
        if k is None or result is None:
            return self.lower_one(prog, op, rank, rings=rings, result=result, paddle_only=paddle_only,
                                  enable=enable, disable=disable)
        block, before, after = op.parent, op.prev, op.next
        xtype, owner = x.type, x.owner
        odist = owner.dist_attr if owner is not None else None
        nrec, nnotes, nsteps = len(result.records), len(result.notes), len(result.steps)
        out = self.lower_one(prog, op, rank, rings=rings, result=result, paddle_only=paddle_only, enable=enable,
                             disable=disable)
        if (x.type is not xtype or (owner is not None and owner.dist_attr is not odist)
                or len(result.notes) != nnotes or len(result.steps) != nsteps + 1):
            self.templates[k] = None  # reaches outside its own ops: never replayed
            return out
        tpl = self._record(_between(block, before, after, op), x, out)
        if tpl is not None:
            tpl.records = result.records[nrec:]
            tpl.step = result.steps[-1]
        self.templates[k] = tpl
        return out

    @staticmethod
    def _record(created: list[Operation], x, out) -> _Template | None:
        index = {}
        ops = []
        for i, o in enumerate(created):
            if o.regions or o.operand_keywords or o.pre:
                return None
            refs = []
            for v in o.operands:
                if v is None:
                    refs.append(None)
                elif v is x:
                    refs.append(_X)
                elif id(v) in index:
                    refs.append(index[id(v)])
                else:
                    return None  # some other value of the program
            ops.append((o.name, tuple(refs), tuple(r.type for r in o.results), dict(o.attrs), o.sig))
            for j, r in enumerate(o.results):
                index[id(r)] = (i, j)
        if out is None:
            ref = None
        elif out is x:
            ref = _X
        elif id(out) in index:
            ref = index[id(out)]
        else:
            return None
        return _Template(ops, ref, [], None)

    @staticmethod
    def _replay(t: _Template, op: Operation, x, result):
        made = _made(t.ops, x, op.indent)  # (InsertPoint.before(op): new ops take op's indentation)
        op.parent.insert_before(op, *made)
        ref = t.out
        out = None if ref is None else x if ref == _X else made[ref[0]].results[ref[1]]
        _account(t, op.loc, result)
        return retire(op, out)


def _made(ops, x, indent) -> list[Operation]:
    """New ops from a template's ``ops`` on the input ``x``, with ``indent``."""
    made: list[Operation] = []
    for name, refs, types, attrs, sig in ops:
        # (the template's dict itself: attribute dicts are never changed in place)
        made.append(new_op(name, _operands(refs, x, made), types, attrs, sig, indent))
    return made


def _operands(refs, x, made) -> list | tuple:
    if refs == _XS:  # (most ops: the input alone, or nothing)
        return [x]
    if not refs:
        return ()
    return [x if r == _X else None if r is None else made[r[0]].results[r[1]] for r in refs]


def _account(t: _Template, loc, result) -> None:
    """The template's collective records and step, for a reshard at ``loc``, to ``result``."""
    if result is not None:
        line = loc[0] if loc else None
        if t.records:
            result.records.extend([with_value(r, "line", line) for r in t.records])
        result.steps.append(with_value(t.step, "loc", loc))


def _replay_into(t: _Template, op: Operation, x, result):
    """:meth:`Replayer._replay`, the reshard ``op`` itself made the template's last op (where that
    op gives the value that replaces the reshard's: every template so far): the program is the
    same -- the ops before it inserted in front of it, it then holds that op's name, operands,
    attributes and result type as a new op would, its result the value its users read -- without
    building one op and moving the reshard's uses to it and erasing the reshard (a few us each,
    thousands a program)."""
    ops = t.ops
    if t.out != (len(ops) - 1, 0) or len(ops[-1][2]) != 1 or op.regions or op.pre:
        return Replayer._replay(t, op, x, result)
    loc = op.loc
    made = _made(ops[:-1], x, op.indent)
    if made:
        op.parent.insert_before(op, *made)
    name, refs, types, attrs, sig = ops[-1]
    r = become(op, name, types[0], attrs, None if refs == _XS else _operands(refs, x, made), sig)
    _account(t, loc, result)
    return r


def alone(op: Operation, x) -> tuple | None:
    """What lowering the reshard ``op`` of ``x`` reads besides the program around it (the key's
    fields: its attributes and types, the producer's attributes, whether ``x`` has other users),
    to lower it again alone for another rank (:func:`distc.pipeline.derive.lower_alone`); None
    when ``x`` is no op's result."""
    owner = x.owner if x is not None else None
    if owner is None or op.regions or owner.regions or op.operand_keywords:
        return None
    return (op.name, dict(op.attrs), tuple(r.type for r in op.results), op.loc, op.sig,
            owner.name, dict(owner.attrs), tuple(r.type for r in owner.results), owner.sig, x.index,
            min(len(x.uses), 2))


def _between(block, before, after, op: Operation) -> list[Operation]:
    """The ops lowering ``op`` inserted: those now between its old neighbours (``op`` itself, if still there, aside)."""
    made = []
    o = before.next if before is not None else block.first
    while o is not None and o is not after:
        if o is not op:
            made.append(o)
        o = o.next
    return made


def template_text(t: _Template | None, xtype, style):
    """A template as text: ``(shape, tails, out_type, records)`` -- its ops' names, operand wiring,
    result counts and signatures with the result that replaces the reshard's (``shape``), each
    op's printed line after its operand list (``tails``: attributes and types, as a program of
    ``style`` prints them), the printed type of that result and the collectives it inserts; None
    if it cannot be printed alone or fails the verifier (``xtype``: the reshard input's type)."""
    from ...analysis.verify import verify
    from ...ir.core import Block, Program
    from ...syntax.diagnostics import DiagnosticError

    if t is None:
        return None
    block = Block()
    x = block.append(Operation("pd_op.data", (), (xtype,), {})).results[0]  # the input, made by a stand-in
    made: list[Operation] = []
    for name, refs, types, attrs, sig in t.ops:
        operands = [None if r is None else x if r == _X else made[r[0]].results[r[1]] for r in refs]
        made.append(block.append(Operation(name, operands, types, dict(attrs), sig=sig)))
    prog = Program(block, style=style)
    try:
        verify(prog)
    except DiagnosticError:
        return None
    lines = [ln for ln in str(prog).split("\n") if ') = "' in ln][1:]
    if len(lines) != len(made):
        return None
    tails = []
    for ln in lines:
        q = ln.find('" (', ln.find(') = "') + 5)
        r = ln.find(")", q + 3) if q >= 0 else -1
        if r < 0:
            return None
        tails.append(ln[r + 1:])
    ref = t.out
    shape = (tuple((name, refs, len(types), sig) for name, refs, types, _, sig in t.ops), ref)
    out_type = None if ref is None else "x" if ref == _X else str(t.ops[ref[0]][2][ref[1]])
    return shape, tuple(tails), out_type, list(t.records)


def with_value(record, name: str, value):
    """``replace(record, name=value)`` (distc.ir.records) for the plain (not frozen, no ``__post_init__``)
    records replayed here, without ``replace``'s field-by-field rebuild (thousands a program): a
    record with a ``__dict__`` copied through it (a quarter of ``copy.copy``'s time), any other by ``copy``."""
    d = getattr(record, "__dict__", None)
    if d is None:
        from copy import copy  # (here: the module and its imports cost every run's start-up ~1.5 ms)

        new = copy(record)
        setattr(new, name, value)
        return new
    new = object.__new__(record.__class__)
    nd = new.__dict__
    nd.update(d)
    nd[name] = value
    return new
