"""Control flow (to_static programs): ``pd_op.if`` runs the block of the branch its condition
picks, ``pd_op.while`` runs its body while the condition the body yields holds (block arguments
bound to the loop-carried values), ``pd_op.pylayer`` runs its forward block; each returns what
the block's ``cf.yield`` yields.  The stacks the backward of a loop or branch reads
(``cf.stack_create`` -> stack, inlet, outlet; ``cf.tuple_push``/``cf.tuple_pop``, last in first
out; ``cf.has_elements``) are Python lists.  Nested ops run like any other (a collective inside
a loop too)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel

MAX_TRIPS = 100000


def _truth(rt, op, c) -> bool:
    a = np.asarray(c)
    if a.size != 1:
        raise rt.err(op, f"the condition holds {a.size} values, not one")
    return bool(a.reshape(-1)[0])


@kernel("pd_op.if")
def if_(rt, op, vals):  # (cond) -> the taken branch's yield
    branch = 0 if _truth(rt, op, vals[0]) else 1
    if branch >= len(op.regions) or not op.regions[branch].blocks:
        return [None] * op.num_results
    out = yield from rt.run_block(op.regions[branch].blocks[0], [])
    return out


@kernel("pd_op.while")
def while_(rt, op, vals):  # (cond, inputs...) -> the loop-carried values
    cond, carried = vals[0], list(vals[1:])
    block = op.regions[0].blocks[0]
    trips = 0
    while _truth(rt, op, cond):
        trips += 1
        if trips > MAX_TRIPS:
            raise rt.err(op, f"more than {MAX_TRIPS} iterations")
        out = yield from rt.run_block(block, carried)
        cond, carried = out[0], list(out[1:])
    return carried


@kernel("pd_op.pylayer")
def pylayer(rt, op, vals):
    out = yield from rt.run_block(op.regions[0].blocks[0], list(vals))
    return out


@kernel("cf.stack_create")
def stack_create(rt, op, vals):
    stack: list = []
    return [stack, stack, stack]


@kernel("cf.tuple_push")
def tuple_push(rt, op, vals):
    vals[0].append([None if v is None else np.array(v, copy=True) for v in vals[1:]])
    return []


@kernel("cf.tuple_pop")
def tuple_pop(rt, op, vals):
    if not vals[0]:
        raise rt.err(op, "pops an empty stack")
    return vals[0].pop()


@kernel("cf.has_elements")
def has_elements(rt, op, vals):
    return [np.array([bool(vals[0])])]


@kernel("cf.yield")
def yield_(rt, op, vals):  # a block's end: its operands are read by the op owning the block
    return []
