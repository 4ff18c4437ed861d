"""Structural copy of a program: new ops, blocks, regions and values that print exactly as the
originals do (source lines, clean/dirty state, names, comments and style are carried over).
Types and attributes are immutable and shared.

Each object is made by the class of the one it copies (``type(op)(...)``), so this module imports
nothing of :mod:`distc.ir.program` (whose ``Program.clone`` calls it: no import circle)."""

from __future__ import annotations

from typing import Callable

from .records import replace


def clone_program(prog: Program, keep: Callable[[Operation], bool] | None = None,
                  prepare: Callable[[Block, dict], None] | None = None) -> Program:
    """A copy of ``prog``; with ``keep``, of the top-level ops it accepts only (each whole, with
    its regions).  ``prepare(block, vmap)`` runs once the top block's arguments are cloned, before
    any op: it may add arguments and map (in ``vmap``: old value -> new) the values of ops left out
    that kept ops use."""
    vmap: dict[Value, Value] = {}
    pending: list[tuple[Operation, Operation]] = []  # operands are set once every value exists
    new = type(prog)(_clone_block(prog.block, vmap, pending, keep, prepare), replace(prog.style), prog.filename)
    new.head = prog.head
    new.tail = prog.tail
    for old_op, op in pending:
        op._take_operands([None if v is None else vmap[v] for v in old_op._operands])
    return new


def _clone_block(block: Block, vmap: dict, pending: list, keep=None, prepare=None) -> Block:
    nb = type(block)()
    for a in block.args:
        na = nb.add_argument(a._type, a.name, a.keyword, a.attrs)
        na.attrs_shown = a.attrs_shown
        vmap[a] = na
    nb.post = list(block.post)
    nb.arg_src = block.arg_src
    nb.indent = block.indent
    nb.dirty = block.dirty
    if prepare is not None:
        prepare(nb, vmap)
    for old in block.ops:
        if keep is not None and not keep(old):
            continue
        op = type(old)(old.name, (), [r._type for r in old.results], old._attrs or {},
                       [_clone_region(r, vmap, pending) for r in old.regions],
                       op_id=old.op_id, result_names=[r.name for r in old.results],
                       operand_keywords=old.operand_keywords, sig=old.sig)
        for r, nr in zip(old.results, op.results):
            vmap[r] = nr
        op._attrs, op._as_read, op._reader, op._dist = old._attrs, old._as_read, old._reader, old._dist  # (read or not)
        if old._edits is not None:
            op._edits = dict(old._edits)
        op.loc = old.loc
        op.src = old.src
        op.indent = old.indent
        if old.pre:
            op.pre = list(old.pre)
        op.dirty = old.dirty
        nb.append(op)
        pending.append((old, op))
    return nb


def _clone_region(region, vmap: dict, pending: list):
    nr = type(region)([_clone_block(b, vmap, pending) for b in region.blocks])
    nr.close_src = region.close_src
    nr.open_src = region.open_src
    return nr
