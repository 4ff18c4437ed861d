"""The ops of a program by name, from one walk: what the input checks and the first passes of a
shard run look up (the optimizer updates, whether a name occurs, the ops of one name) without
each walking and inspecting every op of the program again.

A snapshot: it describes the program as it was when built.  :meth:`OpIndex.fresh` tells whether
the program is still so: no op of any of its blocks was inserted, removed or moved since (each
block's ``ops`` list is the same object until the block changes; the checks run before any pass
changes anything, and the shard pipeline drops the index once its first pass has run).
"""

from __future__ import annotations

from ..dialects.optimizers import OPTIMIZER_BASES, OPTIMIZERS, optimizer_sig
from ..ir.core import Operation, Program

_OPT_NAMES = frozenset(name for name, _ in OPTIMIZERS)  # the names optimizer_sig may know


def optimizer_like(name: str) -> bool:
    """:func:`distc.dialects.optimizers.looks_like_optimizer` by the name alone."""
    return name.split(".")[-1].rstrip("_") in OPTIMIZER_BASES


class OpIndex:
    """``by_name``: op name -> its ops in program order (regions included, as
    :meth:`~distc.ir.core.Program.walk` visits them); ``optimizers``: (op, its
    :func:`~distc.dialects.optimizers.optimizer_sig` or None) of every op that is an optimizer
    update by the table or by its name, in program order."""

    __slots__ = ("by_name", "optimizers", "_blocks")

    def __init__(self, prog: Program) -> None:
        by_name: dict[str, list[Operation]] = {}
        top = prog.block
        blocks = {id(top): top}
        for op in prog.walk():
            name = op.name
            ops = by_name.get(name)
            if ops is None:
                by_name[name] = [op]
            else:
                ops.append(op)
            if op.parent is not top:
                blocks.setdefault(id(op.parent), op.parent)
        # (a program has a few dozen names; its updates are mostly of one: their list is in order)
        like = [name for name in by_name if name in _OPT_NAMES or optimizer_like(name)]
        if len(like) > 1:
            names = set(like)
            found = [op for op in prog.walk() if op.name in names]
        else:
            found = by_name[like[0]] if like else []
        self.by_name = by_name
        self.optimizers = [(op, optimizer_sig(op)) for op in found]
        self._blocks = [(b, b.ops) for b in blocks.values()]

    def fresh(self, prog: Program) -> bool:
        """Whether no block of ``prog`` had an op inserted, removed or moved since the index was built
        (a block's ``ops`` snapshot is one list object until the block changes)."""
        return self._blocks[0][0] is prog.block and all(b.ops is ops for b, ops in self._blocks)

    @property
    def names(self):
        return self.by_name.keys()

    def named(self, name: str) -> list[Operation]:
        return self.by_name.get(name, [])

    def updates(self) -> list:
        """(op, signature) of the optimizer updates of the table, in program order."""
        return [(op, sig) for op, sig in self.optimizers if sig is not None]
