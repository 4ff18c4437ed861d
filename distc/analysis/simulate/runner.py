"""One rank's interpreter: runs its program op by op as a generator, dispatching each op to its
kernel (:mod:`.registry`); communication kernels suspend it until the scheduler replies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Mapping

import numpy as np

from . import kernels  # noqa: F401  (fills the kernel table)
from .layout import expected_piece
from .registry import lookup
from .values import ABSENT, NoKernel, RankValues, SimulationError, local_shape, np_dtype
from ...ir.core import Operation, Program
from ...ir.types import DistTensorType
from ...dialects import ops

if TYPE_CHECKING:
    from .scheduler import Simulator


class RankRunner:
    def __init__(self, sim: "Simulator", rank: int, prog: Program) -> None:
        self.sim = sim
        self.rank = rank
        self.prog = prog
        self.env = RankValues(rank, prog)
        self.shard_count = 0
        self.serial = sim.serial  # the global view: every op runs, values are global

    def local_shape(self, t) -> tuple[int, ...] | None:
        """The shape a value of type ``t`` has here (the global shape in the serial view)."""
        if self.serial:
            return tuple(t.shape) if hasattr(t, "shape") and t.shape is not None else None
        return local_shape(t, self.rank)

    def err(self, op: Operation, msg: str) -> SimulationError:
        return SimulationError(msg, self.rank, op)

    def set(self, op: Operation, outs) -> None:
        for r, x in zip(op.results, outs):
            if x is ABSENT:  # values that do not exist on this rank are left out
                continue
            dict.__setitem__(self.env, r, x)
            if r.name is not None:
                dict.__setitem__(self.env, "%" + r.name, x)
            if isinstance(x, np.ndarray) and self.sim.check_types:
                want = self.local_shape(r.type)
                if want is not None and all(d >= 0 for d in want) and tuple(want) != x.shape:
                    self.env.notes.append(
                        f"{op.name}{' line %d' % op.loc[0] if op.loc else ''}: result {r.index} holds "
                        f"{list(x.shape)} but its type says local {list(want)}")

    def runs_here(self, op: Operation) -> bool:
        d = op.dist_attr
        if self.serial or d is None or not d.mesh.process_ids:
            return True
        if op.name == ops.RESHARD:
            return True
        return self.rank in d.mesh.process_ids

    def run(self) -> Iterator:
        progress = self.sim.progress
        for op in self.prog.ops:
            if progress is not None:
                progress(1)
            if op.regions:
                raise self.err(op, "ops with regions are not supported by the simulator")
            if not self.runs_here(op):
                self.set(op, [ABSENT] * op.num_results)
                continue
            env = self.env
            vals = [None if v is None else dict.get(env, v, ABSENT) for v in op.operands]
            if any(x is ABSENT for x in vals):
                if op.dist_attr is not None and op.name != ops.RESHARD:
                    bad = [i for i, x in enumerate(vals) if x is ABSENT]
                    raise self.err(op, f"operand(s) {bad} are not computed on this rank "
                                       f"(their producers do not run here)")
                self.set(op, [ABSENT] * op.num_results)
                continue
            k = lookup(op.name)
            if k is None:
                raise NoKernel("the simulator does not know this op", self.rank, op)
            outs = (yield from k.fn(self, op, vals)) if k.comm else k.fn(self, op, vals)
            self.env.executed.append(op)
            self.set(op, outs)

    def input(self, op: Operation, key) -> np.ndarray:
        """The rank's value of a ``pd_op.data`` (by ``name``) or ``builtin.parameter`` (by
        ``parameter_name``): a global array is cut to the rank's piece of the result type (a
        partial type gets random pieces that reduce to it, fixed by ``seed``); a mapping
        ``rank -> array`` gives every rank's local value as it is."""
        if key not in self.sim.inputs:
            raise self.err(op, f"no input named {key!r}")
        x = self.sim.inputs[key]
        t = op.results[0].type
        if isinstance(x, Mapping):
            if self.rank not in x:
                raise self.err(op, f"input {key!r} is given per rank, but not for rank {self.rank}")
            x = np.asarray(x[self.rank])
        else:
            x = np.asarray(x)
            if self.serial:
                pass
            elif isinstance(t, DistTensorType) and x.shape == tuple(t.shape):
                if t.dist.partial:
                    x = self.sim.input_pieces(str(key), x, t.dist)[self.rank]
                elif not t.dist.is_replicated():
                    x = expected_piece(x, t.dist, self.rank)
        return x.astype(np_dtype(t.dtype)) if hasattr(t, "dtype") else x
