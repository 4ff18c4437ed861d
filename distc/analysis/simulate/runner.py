"""One rank's interpreter: runs its program op by op as a generator, dispatching each op to its
kernel (:mod:`.registry`); communication kernels suspend it until the scheduler replies."""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

from . import kernels  # noqa: F401  (fills the kernel table)
from .layout import expected_piece
from .registry import lookup
from .values import ABSENT, NoKernel, RankValues, SimulationError, local_shape, np_dtype
from ...ir.core import Operation, Program
from ...ir.types import DistTensorType
from ...dialects import ops
from ...dialects.optimizers import inplace_map

YIELD = "cf.yield"


class RankRunner:
    def __init__(self, sim, rank: int, prog: Program) -> None:
        """``sim``: the :class:`~.scheduler.Simulator` running every rank (it imports this module)."""
        self.sim = sim
        self.rank = rank
        self.prog = prog
        self.env = RankValues(rank, prog)
        self.shard_count = 0
        self.serial = sim.serial  # the global view: every op runs, values are global
        self._ordinals: dict[Operation, int] | None = None
        self._wants: dict[int, tuple] = {}  # id(type) -> (type, its local shape here or None)
        # buffer views (tensor fusion): ids of arrays that share memory with a buffer, kept alive
        self.views: set[int] = set()
        self.keep: list = []
        self._fused: dict | None = None
        self._misfits: dict = {}  # result -> (order, op, note): values whose shape is not their type's

    def local_shape(self, t) -> tuple[int, ...] | None:
        """The shape a value of type ``t`` has here (the global shape in the serial view)."""
        if self.serial:
            return tuple(t.shape) if hasattr(t, "shape") and t.shape is not None else None
        return local_shape(t, self.rank)

    def ordinal(self, op: Operation) -> int:
        """The op's position among the ops of its name in this rank's program (the k-th dropout):
        what identifies one random stream in the serial and in every rank program."""
        if self._ordinals is None:
            seen: dict[str, int] = {}
            self._ordinals = {}
            for o in self.prog.walk():
                base = o.name[:-1] if o.name.endswith("_") and not o.name.endswith("__") else o.name
                self._ordinals[o] = seen.get(base, 0)
                seen[base] = self._ordinals[o] + 1
        return self._ordinals[op]

    def err(self, op: Operation, msg: str) -> SimulationError:
        """A failure at ``op``; if an operand descends from a value whose shape was not the one its
        type declares (a wrong slice, say), the failure is filed at the earliest such producer."""
        src = self._misfit_source(op) if self._misfits else None
        if src is None:
            return SimulationError(msg, self.rank, op)
        at = f" line {op.loc[0]}" if op.loc else ""
        return SimulationError(f"{src[2]} (then {op.name}{at} fails: {msg})", self.rank, src[1])

    def _misfit_source(self, op: Operation, limit: int = 50_000):
        """The earliest recorded misfit among the values ``op`` reads, directly or not."""
        best, seen, todo = None, set(), [v for v in op.operands if v is not None]
        while todo and len(seen) < limit:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            hit = self._misfits.get(v)
            if hit is not None and (best is None or hit[0] < best[0]):
                best = hit
            owner = v.owner
            if owner is not None:
                todo.extend(u for u in owner.operands if u is not None and u not in seen)
        return best

    def set(self, op: Operation, outs) -> None:
        for r, x in zip(op.results, outs):
            if x is ABSENT:  # values that do not exist on this rank are left out
                continue
            dict.__setitem__(self.env, r, x)
            if r.name is not None:
                dict.__setitem__(self.env, "%" + r.name, x)
            if self.sim.check_types and isinstance(x, np.ndarray):
                t = r.type
                hit = self._wants.get(id(t))
                if hit is None or hit[0] is not t:  # types are shared and immutable: one local shape each
                    want = self.local_shape(t)
                    hit = (t, tuple(want) if want is not None and all(d >= 0 for d in want) else None)
                    self._wants[id(t)] = hit
                want = hit[1]
                if want is not None and want != x.shape:
                    note = (f"{op.name}{' line %d' % op.loc[0] if op.loc else ''}: result {r.index} holds "
                            f"{list(x.shape)} but its type says local {list(want)}")
                    self.env.notes.append(note)
                    self._misfits[r] = (len(self._misfits), op, note)

    def runs_here(self, op: Operation) -> bool:
        d = op.dist_attr
        if self.serial or d is None or not d.mesh.process_ids:
            return True
        if op.name == ops.RESHARD:
            return True
        return self.rank in d.mesh.process_ids

    def run(self) -> Iterator:
        fused = self.fused()
        for a in self.prog.block.args:  # a fused program's buffers (keyword arguments)
            if a.keyword is not None and a.keyword in fused:
                dict.__setitem__(self.env, a, fused[a.keyword])
        yield from self.run_ops(self.prog.ops, self.sim.progress)

    def fused(self) -> dict:
        """A fused ZeRO program's buffers and the views of them (:mod:`.fused_inputs`), by name."""
        if self._fused is None:
            from .fused_inputs import fused_inputs, is_fused

            self._fused = {}
            if not self.serial and is_fused(self.prog):
                self._fused = fused_inputs(self.prog, self.rank, self.sim.inputs, self._piece, self.local_shape)
                for v in self._fused.values():
                    self.views.add(id(v))
                    self.keep.append(v)
        return self._fused

    def _piece(self, name: str, t) -> np.ndarray:
        """This rank's piece of the serial input ``name`` as a value of type ``t``."""
        x = np.asarray(self.sim.inputs[name])
        if isinstance(t, DistTensorType) and x.shape == tuple(t.shape) and not t.dist.partial \
                and not t.dist.is_replicated():
            return expected_piece(x, t.dist, self.rank)
        return x

    def run_block(self, block, args: list) -> Iterator:
        """Run a region's block with its arguments bound to ``args`` (a generator, since nested ops
        may communicate); returns the operand values of its closing ``cf.yield``."""
        for a, x in zip(block.args, args):
            dict.__setitem__(self.env, a, x)
            if a.name is not None:
                dict.__setitem__(self.env, "%" + a.name, x)
        body = block.ops
        end = body[-1] if body and body[-1].name == YIELD else None
        yield from self.run_ops(body[:-1] if end is not None else body, None)
        if end is None:
            return []
        return [None if v is None else dict.get(self.env, v, ABSENT) for v in end.operands]

    def run_ops(self, ops_: list[Operation], progress) -> Iterator:
        for op in ops_:
            if progress is not None:
                progress(1)
            if not self.runs_here(op):
                self.set(op, [ABSENT] * op.num_results)
                continue
            env = self.env
            vals = [None if v is None else dict.get(env, v, ABSENT) for v in op.operands]
            k = lookup(op.name)
            if any(x is ABSENT for x in vals) and not (k is not None and k.absent_ok):
                if op.dist_attr is not None and op.name != ops.RESHARD:
                    bad = [i for i, x in enumerate(vals) if x is ABSENT]
                    raise self.err(op, f"operand(s) {bad} are not computed on this rank "
                                       f"(their producers do not run here)")
                self.set(op, [ABSENT] * op.num_results)
                continue
            if k is None:
                raise NoKernel("the simulator does not know this op", self.rank, op)
            outs = (yield from k.fn(self, op, vals)) if k.comm else k.fn(self, op, vals)
            if self.views:  # an in-place update of a buffer view writes into the buffer
                outs = list(outs)
                for ri, oi in inplace_map(op).items():
                    a = vals[oi] if oi < len(vals) else None
                    if isinstance(a, np.ndarray) and id(a) in self.views and ri < len(outs) and \
                            isinstance(outs[ri], np.ndarray) and outs[ri].shape == a.shape:
                        np.copyto(a, outs[ri])
                        outs[ri] = a
            self.env.executed.append(op)
            self.set(op, outs)

    def input(self, op: Operation, key) -> np.ndarray:
        """The rank's value of a ``pd_op.data`` (by ``name``) or ``builtin.parameter`` (by
        ``parameter_name``): a global array is cut to the rank's piece of the result type (a
        partial type gets random pieces that reduce to it, fixed by ``seed``); a mapping
        ``rank -> array`` gives every rank's local value as it is."""
        fused = self.fused()
        if key in fused:
            return fused[key]
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
