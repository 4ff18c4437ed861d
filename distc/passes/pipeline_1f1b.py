"""``pipeline-1f1b{micro_batches=N,pp_degree=P,pp_stage=S}``: Paddle 3.3.1's 1F1B schedule
(``pipeline_1f1b.py``) on a rank's dense program.  Five job programs: ``recv_forward`` (the
forward's ``recv_v2``), ``forward``, ``backward``, ``send_backward`` (the backward's ``send_v2``),
``optimizer``; send/recv on ``send_recv_stream``; events recorded where a backward value is sent
and where a received value is first used.  Jobs: P - S warm-up forwards, then backward, forward
pairs (``backward``, ``recv_forward``, ``send_backward``, ``forward``), the remaining backwards,
``optimizer 0``."""

from __future__ import annotations


from ..ir.core import Operation, Program
from ..ir.records import record
from ..syntax.diagnostics import DiagnosticError
from .base import register
from .pipeline_jobs import RECV, SEND, Splitter, StagedScheduler, forward_complete_op_role, overlap_send_recv, role

RECV_FORWARD, FORWARD, BACKWARD, SEND_BACKWARD, OPT = "recv_forward", "forward", "backward", "send_backward", \
    "optimizer"
TYPES = [RECV_FORWARD, FORWARD, BACKWARD, SEND_BACKWARD, OPT]


def split_1f1b(prog: Program) -> dict[str, Program]:
    overlap_send_recv(prog, lambda op: "send_recv_stream", "send_recv_stream")
    forward_complete_op_role(prog)
    state = {"region": 2}

    def assign(idx: int, op: Operation) -> str:
        if role(op) != -1:
            state["region"] = role(op)
        r = state["region"]
        if r == 2:
            return OPT
        if r == 1:
            return SEND_BACKWARD if op.name == SEND else BACKWARD
        return RECV_FORWARD if op.name == RECV else FORWARD

    return Splitter(prog, TYPES, assign, events=True).run()


def jobs_1f1b(n: int, pp_degree: int, pp_stage: int) -> list[tuple[str, int]]:
    if pp_degree > n:
        raise DiagnosticError(f"1F1B needs at least as many micro-batches as pipeline stages ({n} < {pp_degree}); "
                              "Paddle asserts the same")
    warmup = pp_degree - pp_stage
    jobs: list[tuple[str, int]] = []
    f = b = 0
    for _ in range(warmup):
        jobs += [(RECV_FORWARD, f), (FORWARD, f)]
        f += 1
    for _ in range(n - warmup):
        jobs += [(BACKWARD, b), (RECV_FORWARD, f), (SEND_BACKWARD, b), (FORWARD, f)]
        f += 1
        b += 1
    for _ in range(warmup):
        jobs += [(BACKWARD, b), (SEND_BACKWARD, b)]
        b += 1
    return jobs + [(OPT, 0)]


@register
@record
class Pipeline1F1BPass(StagedScheduler):
    name = "pipeline-1f1b"
    description = "1F1B schedule: recv_forward, forward, backward, send_backward, optimizer job programs"
    schedule = "1F1B"

    def job_list(self) -> list[tuple[str, int]]:
        return jobs_1f1b(self.micro_batches, self.pp_degree, self.pp_stage)

    def split(self, prog: Program) -> dict[str, Program]:
        return split_1f1b(prog)
