"""``pipeline-vpp{micro_batches=N,pp_degree=P,pp_stage=S,vpp_degree=V}``: Paddle 3.3.1's virtual
pipeline (interleaved 1F1B, ``pipeline_vpp.py``) on a rank's dense program.  Each op belongs to a
chunk (its ``chunk_id``; one without takes its neighbours', as ``infer_chunk_id``); job programs
``recv_forward<c>``, ``forward<c>`` for c = 0..V-1, ``backward<c>``, ``send_backward<c>`` for c =
V-1..0, and ``optimizer``; send/recv on ``send_stream_<ring>``/``recv_stream``.  The job list
interleaves the chunks: ``(P - S - 1) * 2 + (V - 1) * P + 1`` warm-up forwards (all N * V when N ==
P), then backward, recv_forward, send_backward, forward steps, then the remaining backwards."""

from __future__ import annotations


from ..ir.core import Operation, Program
from ..ir.records import record
from ..syntax.diagnostics import DiagnosticError
from .base import register
from .check_chunk_id import chunk_of, infer_chunk_id
from .pipeline_jobs import RECV, SEND, Splitter, StagedScheduler, overlap_send_recv, role, send_stream_of_ring
from .sharding_util import fail


def vpp_types(v: int) -> list[str]:
    types = [t + str(c) for c in range(v) for t in ("recv_forward", "forward")]
    types += [t + str(c) for c in reversed(range(v)) for t in ("backward", "send_backward")]
    return types + ["optimizer"]


def split_vpp(prog: Program, v: int) -> dict[str, Program]:
    overlap_send_recv(prog, send_stream_of_ring, "recv_stream")
    all_ops = prog.block.ops

    def assign(idx: int, op: Operation) -> str:
        r = role(op)
        if r == 2:
            return "optimizer"
        c = chunk_of(op, False)
        if c == -1:
            c = infer_chunk_id(idx, all_ops, False)
            if c == -1:
                raise fail(op, f"cannot infer the chunk_id of '{op.name}' (Paddle: the same)")
        if r == 1:
            return ("send_backward" if op.name == SEND else "backward") + str(c)
        if r == 0:
            return ("recv_forward" if op.name == RECV else "forward") + str(c)
        raise fail(op, f"'{op.name}' has op_role {r}: not forward, backward or optimizer")

    return Splitter(prog, vpp_types(v), assign, events=True, save_if=lambda name: "var_" in name).run()


def jobs_vpp(n: int, pp_degree: int, pp_stage: int, v: int) -> list[tuple[str, int]]:
    """Paddle's ``_pir_create_job_list`` (split_backward off)."""
    if n < pp_degree:
        raise DiagnosticError(f"VPP needs at least as many micro-batches as pipeline stages ({n} < {pp_degree}); "
                              "Paddle asserts the same")
    remainder = n % pp_degree
    fwd = {c: 0 for c in range(v)}
    bwd = {c: 0 for c in range(v)}

    def chunk(step: int, forward: bool) -> int:
        s = step % (pp_degree * v)
        s = s // pp_degree if step <= (n // pp_degree) * (pp_degree * v) else s // remainder
        return s if forward else v - s - 1

    total = n * v
    if n == pp_degree:
        warmup = total
    else:
        warmup = min((pp_degree - pp_stage - 1) * 2 + (v - 1) * pp_degree, total)
    warmup = min(total, warmup + 1)
    jobs: list[tuple[str, int]] = []
    for step in range(warmup):
        c = chunk(step, True)
        jobs += [(f"recv_forward{c}", fwd[c]), (f"forward{c}", fwd[c])]
        fwd[c] += 1
    for step in range(total - warmup):
        fc, bc = chunk(step + warmup, True), chunk(step, False)
        fm, bm = fwd[fc], bwd[bc]
        fwd[fc] += 1
        bwd[bc] += 1
        jobs += [(f"backward{bc}", bm), (f"recv_forward{fc}", fm), (f"send_backward{bc}", bm), (f"forward{fc}", fm)]
    for step in range(total - warmup, total):
        c = chunk(step, False)
        jobs += [(f"backward{c}", bwd[c]), (f"send_backward{c}", bwd[c])]
        bwd[c] += 1
    return jobs + [("optimizer", 0)]


@register
@record
class PipelineVPPPass(StagedScheduler):
    name = "pipeline-vpp"
    description = "VPP (interleaved 1F1B) schedule: job programs per chunk (Paddle's pipeline_scheduler_VPP)"
    schedule = "VPP"

    vpp_degree: int = 2

    def job_list(self) -> list[tuple[str, int]]:
        return jobs_vpp(self.micro_batches, self.pp_degree, self.pp_stage, self.vpp_degree)

    def split(self, prog: Program) -> dict[str, Program]:
        return split_vpp(prog, self.vpp_degree)
