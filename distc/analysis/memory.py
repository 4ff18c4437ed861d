"""Per-rank memory of what an optimizer update touches: parameters, gradients, optimizer states.

:func:`optimizer_memory` reads the optimizer ops of a distributed program (the table in
:mod:`distc.dialects.optimizers`) and sizes every value by the piece one rank holds
(Paddle's split: ``ceil(n/p)`` elements a rank, the last ones hold less; partial values are
full size).  Running it before and after ``shard-optimizer`` gives the ZeRO saving.

Gradients are sized as the backward pass produces them (ZeRO-1 shards them only transiently,
right before the update, so their resident size does not change in stage 1).
"""

from __future__ import annotations

from math import prod

from ..dialects import ops
from ..dialects.collectives import C_REDUCESCATTER, PD_REDUCE_SCATTER
from ..dialects.optimizers import BETA_POW, GRAD, MASTER, PARAM, STATE, optimizer_sig, param_name
from ..ir.core import Program, Value
from ..ir.records import field, record
from ..ir.types import DTYPE_BYTES, DistTensorType, DenseTensorType


def value_bytes(v: Value | None, rank: int) -> int:
    """Bytes ``rank`` holds of value ``v`` (0 when the rank is outside its mesh)."""
    return 0 if v is None else type_bytes(v.type, rank)


def type_bytes(t: object, rank: int) -> int:
    """Bytes ``rank`` holds of a value of type ``t``."""
    if isinstance(t, DistTensorType):
        if t.dist.mesh.process_ids and rank not in t.dist.mesh.process_ids:
            return 0
        shape = t.local_shape(rank)
        if any(d < 0 for d in shape):
            return 0
        return prod(shape) * DTYPE_BYTES.get(t.dtype, 4)
    if isinstance(t, DenseTensorType):
        return t.nbytes()
    return 0


@record
class ParamMemory:
    name: str
    op: str
    param: int = 0
    grad: int = 0
    states: dict[str, int] = field(default_factory=dict)  # state name -> bytes

    @property
    def state_total(self) -> int:
        return sum(self.states.values())


@record
class MemoryReport:
    rank: int
    rows: list[ParamMemory] = field(default_factory=list)

    @property
    def params(self) -> int:
        return sum(r.param for r in self.rows)

    @property
    def grads(self) -> int:
        return sum(r.grad for r in self.rows)

    @property
    def states(self) -> int:
        return sum(r.state_total for r in self.rows)

    @property
    def total(self) -> int:
        return self.params + self.grads + self.states

    def by_name(self) -> dict[str, ParamMemory]:
        return {r.name: r for r in self.rows}


# what a reshard in front of the update becomes once lowered: the value resident on the rank is
# the one before them (a lowered ZeRO-1 program slices the parameter, reduce-scatters the gradient)
_RESHARD_STEPS = frozenset({ops.RESHARD, ops.SLICE, ops.TRANSPOSE, PD_REDUCE_SCATTER, C_REDUCESCATTER})


def _source(v: Value | None) -> Value | None:
    """Look through the reshards (lowered or not) the partition pass put in front of the update."""
    seen = 0
    while v is not None and v.owner is not None and v.owner.name in _RESHARD_STEPS and seen < 8:
        v = v.owner.operand(0)
        seen += 1
    return v


def optimizer_memory(prog: Program, rank: int) -> MemoryReport:
    return memory_of(optimizer_operands(prog), rank)


# (parameter name, optimizer op name, [(role, operand name, operand type or None)])
OptimizerOperands = list[tuple[str, str, list[tuple[str, str, object]]]]


def optimizer_operands(prog: Program, updates: list | None = None) -> OptimizerOperands:
    """What :func:`optimizer_memory` sizes, as (immutable) types: a snapshot that stays valid
    while passes retype the values, so one walk serves every rank.  ``updates``: the program's
    (op, optimizer signature) pairs in program order, if known (an index's)."""
    out: OptimizerOperands = []
    if updates is None:
        updates = [(op, sig) for op in prog.walk() if (sig := optimizer_sig(op)) is not None]
    for op, sig in updates:
        p = _source(op.operand(0))
        ents = []
        for i, (role, name) in enumerate(sig.operands):
            v = op.operand(i)
            if role in (PARAM, GRAD):
                v = _source(v)
            elif role not in (STATE, MASTER, BETA_POW) or v is None:
                continue
            ents.append((role, name, v.type if v is not None else None))
        out.append((param_name(p) if p is not None else "?", op.name, ents))
    return out


def memory_of(ops: OptimizerOperands | None, rank: int) -> MemoryReport | None:
    """What ``rank`` holds of the operands ``ops`` (None: none taken, None)."""
    if ops is None:
        return None
    rep = MemoryReport(rank)
    sizes: dict[int, int] = {}  # id(type) -> bytes: a program shares a few type objects among its values
    for pname, opname, ents in ops:
        row = ParamMemory(pname, opname)
        for role, name, t in ents:
            b = sizes.get(id(t))
            if b is None:
                b = sizes[id(t)] = type_bytes(t, rank)
            if role == PARAM:
                row.param = b
            elif role == GRAD:
                row.grad = b
            else:
                row.states[name] = b
        rep.rows.append(row)
    return rep


FORWARD, BACKWARD = 0, 1  # Paddle's op_role of forward and backward ops


def _role(op) -> int | None:
    return getattr(op.attrs.get("op_role"), "value", None)


def _persistable(op, i: int) -> bool:
    flags = getattr(op.attrs.get("persistable"), "value", None)
    if not isinstance(flags, (list, tuple)) or i >= len(flags):
        return False
    return bool(getattr(flags[i], "value", flags[i]))


def saved_activations(prog: Program) -> list[object]:
    """The types of the activations the backward pass reads: results of forward ops (``op_role``
    0) used by a backward op (``op_role`` 1), persistable values (parameters, counted as such) left
    out.  A model of what stays resident between the forward and the backward pass of one step:
    values the forward frees before its end and the framework's workspace are not counted, nor are
    values of unknown size (a ``-1`` dim).  A snapshot of types, sized per rank by
    :func:`activations_of`."""
    out: list[object] = []
    for op in prog.walk():
        if _role(op) != FORWARD:
            continue
        for i, v in enumerate(op.results):
            if _persistable(op, i):
                continue
            if any(_role(u) == BACKWARD for u in v.users):
                out.append(v.type)
    return out


def activations_of(types: list[object], rank: int) -> int:
    """Bytes ``rank`` holds of the saved activations (:func:`saved_activations`)."""
    sizes: dict[int, int] = {}
    for t in types:
        if id(t) not in sizes:
            sizes[id(t)] = type_bytes(t, rank)
    return sum(sizes[id(t)] for t in types)
