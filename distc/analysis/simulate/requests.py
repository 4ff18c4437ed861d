"""What a rank asks the scheduler for: a collective over a group, a send, a receive."""

from __future__ import annotations


import numpy as np

from ...ir.core import Operation
from ...ir.records import record


@record
class Coll:
    kind: str  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast
    op: Operation
    rank: int
    group: tuple[int, ...]
    ring: int | None
    data: np.ndarray
    attrs: dict


@record
class Send:
    op: Operation
    rank: int
    ring: int | None
    peer: int
    data: np.ndarray
    to: int | None  # resolved partner, when known

    @property
    def pos(self) -> int | None:
        return mesh_pos(self.op, self.rank)


@record
class Recv:
    op: Operation
    rank: int
    ring: int | None
    peer: int
    src: int | None

    @property
    def pos(self) -> int | None:
        return mesh_pos(self.op, self.rank)


def mesh_pos(op: Operation, rank: int) -> int | None:
    d = op.dist_attr
    if d is None or rank not in d.mesh.process_ids:
        return None
    return d.mesh.process_ids.index(rank)


