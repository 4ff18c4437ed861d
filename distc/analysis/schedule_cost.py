"""What a pipeline schedule costs: every rank's jobs on a modelled timeline, and the bubble.

A job's time is its ops' time: compute from FLOPs (``matmul``: 2·M·N·K, its gradient twice that,
other ops one FLOP an element of what they make) at ``flops`` per second, collectives from the
bytes one rank moves (:func:`distc.dialects.collectives.bytes_moved`) at ``bandwidth``, plus
``latency`` each.  A ``recv_v2`` waits for the matching ``send_v2`` (the n-th send on the same
pair of ranks, as the simulator pairs them) and the transfer; a rank runs its jobs in its
schedule order, one at a time.  Collectives are costed, not synchronised (the ranks of a
data-parallel group run the same jobs at the same times).  The bubble of a rank is the share of
the step (first start to last end over all ranks) it spends idle."""

from __future__ import annotations

from typing import Mapping

from ..dialects.collectives import COLLECTIVE_OPS, RECV, SEND
from ..ir import attrs as A
from ..ir.core import Operation, Program
from ..ir.records import field, record
from ..ir.types import DenseTensorType, DistTensorType, VectorType

_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "b": 1, "bool": 1, "i8": 1, "u8": 1}


@record
class CostModel:
    flops: float = 100e12  # per second (a modelled accelerator)
    bandwidth: float = 25e9  # bytes per second, between any two ranks
    latency: float = 5e-6  # seconds a communication op


@record
class TimedJob:
    job: str
    micro_batch: int
    start: float
    end: float
    idle: float = 0.0  # waiting inside the job (a receive whose send comes later)


@record
class Timeline:
    schedule: str
    ranks: dict[int, list[TimedJob]] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        return max((j.end for js in self.ranks.values() for j in js), default=0.0)

    def busy(self, rank: int) -> float:
        return sum(j.end - j.start - j.idle for j in self.ranks[rank])

    def bubble(self, rank: int | None = None) -> float:
        span = self.makespan
        if span <= 0:
            return 0.0
        ranks = [rank] if rank is not None else list(self.ranks)
        return 1.0 - sum(self.busy(r) for r in ranks) / (span * len(ranks))

    def as_json(self) -> dict:
        """``{rank: [[job, micro_batch, start, end, idle], ...]}`` (seconds; idle: the wait inside
        the job) — what ``distc report --schedule`` draws — with the bubble."""
        return {"timeline": {str(r): [[j.job, j.micro_batch, j.start, j.end, j.idle] for j in js]
                             for r, js in sorted(self.ranks.items())},
                "makespan": self.makespan, "bubble": self.bubble(),
                "bubble_per_rank": {str(r): self.bubble(r) for r in sorted(self.ranks)}}


def _numel(t) -> int:
    n = 1
    for d in getattr(t, "shape", ()) or ():
        n *= max(int(d), 1)
    return n


def _nbytes(t) -> int:
    if isinstance(t, VectorType):
        return sum(_nbytes(e) for e in t.elements)
    if isinstance(t, (DenseTensorType, DistTensorType)):
        return _numel(t) * _BYTES.get(t.dtype, 4)
    return 0


_FREE = {"pd_op.data", "builtin.parameter", "pd_op.full", "pd_op.full_int_array", "builtin.shadow_output",
         "builtin.combine", "builtin.split", "builtin.slice", "pd_op.reshape", "pd_op.assign"}


def op_flops(op: Operation) -> float:
    if op.name in _FREE:
        return 0.0
    if op.name in ("pd_op.matmul", "pd_op.matmul_grad") and op.num_operands >= 2:
        x, y = op.operand(0), op.operand(1)
        tx = op.attr("transpose_x")
        xs = list(getattr(x.type, "shape", ()) or ()) if x is not None else []
        k = xs[-2] if isinstance(tx, A.BoolAttr) and tx.value and len(xs) > 1 else (xs[-1] if xs else 1)
        out = _numel(op.results[0].type) if op.name == "pd_op.matmul" else _numel(op.operand(2).type)  # type: ignore[union-attr]
        return 2.0 * out * max(int(k), 1) * (2 if op.name == "pd_op.matmul_grad" else 1)
    return float(sum(_numel(r.type) for r in op.results if not isinstance(r.type, VectorType)))


@record
class _Step:
    kind: str  # "compute", "send", "recv"
    seconds: float
    peer: int | None = None


def _job_steps(prog: Program, rank: int, rings: Mapping[int, tuple[int, ...]], model: CostModel) -> list[_Step]:
    steps: list[_Step] = []
    acc = 0.0
    for op in prog.block.ops:
        kind = COLLECTIVE_OPS.get(op.name)
        if kind in (SEND, RECV):
            ring = op.attr("ring_id")
            peer_i = op.attr("peer")
            group = rings.get(ring.value) if isinstance(ring, A.IntAttr) else None
            peer = group[peer_i.value] if group and isinstance(peer_i, A.IntAttr) and peer_i.value < len(group) else None
            v = op.operand(0) if kind == SEND else op.results[0]
            steps.append(_Step("compute", acc))
            acc = 0.0
            steps.append(_Step(kind, model.latency + _nbytes(v.type) / model.bandwidth, peer))  # type: ignore[union-attr]
        elif kind is not None:
            v = op.operand(0)
            n = len(rings.get(op.attr("ring_id").value, ())) if isinstance(op.attr("ring_id"), A.IntAttr) else 1
            moved = _nbytes(v.type) * (2 * (n - 1) / n if n > 1 else 0)  # type: ignore[union-attr]
            acc += model.latency + moved / model.bandwidth
        else:
            acc += op_flops(op) / model.flops
    steps.append(_Step("compute", acc))
    return steps


def timeline(schedule: str, jobs: Mapping[int, list[tuple[str, int]]], programs: Mapping[int, Mapping[str, Program]],
             rings: Mapping[int, Mapping[int, tuple[int, ...]]], model: CostModel | None = None) -> Timeline:
    """Every rank's jobs on the modelled clock.  Raises ValueError naming the waiting ranks and
    jobs when the schedule cannot finish (a receive no send will ever match)."""
    model = model or CostModel()
    cache: dict[tuple[int, str], list[_Step]] = {}
    sends: dict[tuple[int, int], list[float]] = {}  # (src, dst) -> arrival times, in order
    taken: dict[tuple[int, int], int] = {}
    job_i = {r: 0 for r in jobs}  # the job each rank is in
    step_i = {r: 0 for r in jobs}  # the step of that job it is at
    clock = {r: 0.0 for r in jobs}
    start = {r: 0.0 for r in jobs}
    idle = {r: 0.0 for r in jobs}
    worked = {r: False for r in jobs}
    out = Timeline(schedule, {r: [] for r in jobs})

    def steps_of(r: int) -> list[_Step]:
        job = jobs[r][job_i[r]][0]
        st = cache.get((r, job))
        if st is None:
            st = cache[(r, job)] = _job_steps(programs[r][job], r, rings[r], model)
        return st

    while any(job_i[r] < len(jobs[r]) for r in jobs):
        moved = False
        for r in sorted(jobs):
            while job_i[r] < len(jobs[r]):
                st = steps_of(r)
                if step_i[r] == 0:
                    start[r], idle[r], worked[r] = clock[r], 0.0, False
                if step_i[r] == len(st):
                    job, mb = jobs[r][job_i[r]]
                    out.ranks[r].append(TimedJob(job, mb, start[r], clock[r], idle[r]))
                    job_i[r] += 1
                    step_i[r] = 0
                    moved = True
                    continue
                s = st[step_i[r]]
                if s.kind == RECV and s.peer is not None:
                    ch = (s.peer, r)
                    k = taken.get(ch, 0)
                    if k >= len(sends.get(ch, ())):
                        break
                    taken[ch] = k + 1
                    wait = max(0.0, sends[ch][k] - clock[r])
                    if worked[r]:
                        idle[r] += wait
                    else:  # nothing done yet: the job starts when its data is there
                        start[r] += wait
                    clock[r] += wait + s.seconds
                    worked[r] = True
                elif s.kind == SEND and s.peer is not None:
                    clock[r] += s.seconds
                    worked[r] = True
                    sends.setdefault((r, s.peer), []).append(clock[r])
                else:
                    clock[r] += s.seconds
                    worked[r] = worked[r] or s.seconds > 0
                step_i[r] += 1
                moved = True
        if not moved:
            waiting = [f"rank {r} in {jobs[r][job_i[r]][0]} {jobs[r][job_i[r]][1]}" for r in sorted(jobs)
                       if job_i[r] < len(jobs[r])]
            raise ValueError("the schedule cannot finish: " + "; ".join(waiting) + " wait for sends that never come")
    return out
