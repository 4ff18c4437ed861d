"""``pipeline-zbh1{micro_batches=N,pp_degree=P,pp_stage=S}`` and ``pipeline-eager-1f1b{...}``:
the schedules Paddle 3.3.1 has job lists for but refuses to run (``pipeline scheduler only
support FThenB, 1F1B and VPP now``; neither pass can split a PIR program), built on a rank's dense
program in Paddle's job-program format.

ZBH1 (zero bubble, Qi et al. 2023; Paddle's ``pipeline_zero_bubble.py`` job list): the backward
is split into ``backward_b`` (input gradients: what the previous stage waits for) and
``backward_w`` (weight gradients: what only the optimizer needs), the W jobs of the first
micro-batches filling the cool-down bubble.  To give W something to do, every ``matmul_grad`` whose
weight gradient feeds a gradient-merge ``add_`` is split as Paddle's ``split_matmul_grad_to_matmul``
splits it: ``dx = matmul(dout, w^T)`` stays in B, ``dw = reshape(matmul(reshape(x)^T,
reshape(dout)))`` goes to W.  A backward op is in W when all it makes feeds W (the accumulation
``add_`` is W).  Job programs: ``forward``, ``backward_b``, ``backward_w``, ``backward`` (B and W
of one micro-batch together, the steady phase) and ``optimizer``.

Eager1F1B (Paddle's ``pipeline_eager_1f1b.py`` job list): 1F1B with ``2 (P - S) - 1`` warm-up
forwards, on the ``forward``/``backward``/``optimizer`` programs of FThenB."""

from __future__ import annotations


from ..dialects import ops
from ..ir import attrs as A
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Program, Value
from ..ir.records import record
from ..ir.types import DenseTensorType
from ..syntax.diagnostics import DiagnosticError
from .base import register
from .pipeline_fthenb import split_three
from .pipeline_jobs import Splitter, StagedScheduler, forward_complete_op_role, overlap_send_recv, role, \
    send_stream_of_ring

FORWARD, BACKWARD, B, W, OPT = "forward", "backward", "backward_b", "backward_w", "optimizer"


def _merge_add(op: Operation) -> bool:
    return "grad_merge_add" in op.attrs


def _attr_int(op: Operation, key: str, default: int = -1) -> int:
    a = op.attr(key)
    return a.value if isinstance(a, A.IntAttr) else default


def split_matmul_grads(prog: Program) -> int:
    """``matmul_grad(x, w, dout)`` whose ``dw`` is accumulated: ``dx`` by a matmul, ``dw`` by
    reshape / matmul / reshape (the first two axes of x and dout folded)."""
    mk = Maker(prog.style)
    n = 0
    for op in list(prog.block.ops):
        if op.name != "pd_op.matmul_grad" or op.num_results != 2 or role(op) != 1:
            continue
        if any(isinstance(op.attr(k), A.BoolAttr) and op.attr(k).value for k in ("transpose_x", "transpose_y")):
            continue
        x, w, dout = op.operand(0), op.operand(1), op.operand(2)
        dx, dw = op.results
        if not dw.uses or not all(_merge_add(u) for u in dw.users):
            continue
        xt, dt, wt = x.type, dout.type, dw.type  # type: ignore[union-attr]
        if not all(isinstance(t, DenseTensorType) for t in (xt, dt, wt)) or len(xt.shape) < 2:
            continue
        common = {"chunk_id": mk.i32(_attr_int(op, "chunk_id")), "op_role": A.IntAttr(1)}
        at = InsertPoint.after(op)

        def new(name, operands, types, attrs) -> Operation:
            return at.insert(Operation(name, list(operands), list(types), {**attrs, **common,
                                                                             "stop_gradient": mk.bools([False] * len(types))}))

        def reshape(v: Value, shape) -> Value:
            s = at.insert(Operation(ops.FULL_INT_ARRAY, [], [mk.dense_type([len(shape)], "i64")], {
                **common, "dtype": mk.dtype("int64"), "place": mk.place("Place(cpu)"),
                "stop_gradient": mk.bools([True]), "value": mk.i64s(shape)}))
            return new(ops.RESHAPE, [v, s.result], [mk.dense_type(shape, v.type.dtype)], {}).result  # type: ignore[union-attr]

        new_dx = new("pd_op.matmul", [dout, w], [dx.type], {"transpose_x": A.BoolAttr(False),
                                                              "transpose_y": A.BoolAttr(True)}).result
        rows = 1
        for d in xt.shape[:-1]:
            rows *= d
        x2 = reshape(x, [rows, xt.shape[-1]])
        d2 = reshape(dout, [rows, dt.shape[-1]])
        g = new("pd_op.matmul", [x2, d2], [mk.dense_type([xt.shape[-1], dt.shape[-1]], wt.dtype)],
                {"transpose_x": A.BoolAttr(True), "transpose_y": A.BoolAttr(False)}).result
        new_dw = reshape(g, list(wt.shape))
        dx.replace_all_uses_with(new_dx)
        dw.replace_all_uses_with(new_dw)
        op.erase()
        n += 1
    return n


def weight_ops(prog: Program) -> set[int]:
    """ids of the backward ops in W: the accumulation adds, and ops all of whose results feed W."""
    w: set[int] = set()
    for op in reversed(prog.block.ops):
        if role(op) != 1:
            continue
        if _merge_add(op) or (op.results and all(r.uses for r in op.results)
                              and all(id(u) in w for r in op.results for u in r.users)):
            w.add(id(op))
    return w


def split_zbh1(prog: Program) -> tuple[dict[str, Program], int]:
    overlap_send_recv(prog, send_stream_of_ring, "recv_stream")
    forward_complete_op_role(prog)
    n = split_matmul_grads(prog)
    w = weight_ops(prog)
    names = {0: FORWARD, 1: B, 2: OPT}
    state = {"region": OPT}

    def assign(idx: int, op: Operation) -> str:
        r = role(op)
        if r in names:
            state["region"] = names[r]
        if state["region"] == B and id(op) in w:
            return W
        return state["region"]

    progs = Splitter(prog, [FORWARD, B, W, OPT], assign, plain_names=lambda t: t in (B, W)).run()
    whole = split_three(prog.clone(), (FORWARD, BACKWARD, OPT))
    if str(whole[FORWARD]) != str(progs[FORWARD]):
        raise DiagnosticError("internal error: ZBH1's forward job program differs between its two splits")
    return {FORWARD: progs[FORWARD], BACKWARD: whole[BACKWARD], B: progs[B], W: progs[W], OPT: progs[OPT]}, n


def jobs_zbh1(n: int, pp_degree: int, pp_stage: int) -> list[tuple[str, int]]:
    """Paddle 3.3.1's ``PipelineZeroBubblePipelinePass._create_job_list``."""
    if pp_degree > n:
        raise DiagnosticError(f"ZBH1 needs at least as many micro-batches as pipeline stages ({n} < {pp_degree})")
    warmup = pp_degree - pp_stage
    jobs: list[tuple[str, int]] = []
    f = b = 0
    for _ in range(warmup):
        jobs.append((FORWARD, f))
        f += 1
    for _ in range(pp_stage):
        jobs += [(B, b), (FORWARD, f)]
        b += 1
        f += 1
    for _ in range(n - pp_degree):
        jobs += [(BACKWARD, b), (FORWARD, f)]
        f += 1
        b += 1
    for _ in range(warmup - 1):
        jobs.append((BACKWARD, b))
        b += 1
    jobs += [(B, b), (W, b)] if pp_stage > 0 else [(BACKWARD, b)]
    jobs += [(W, i) for i in range(pp_stage)]
    return jobs + [(OPT, 0)]


def jobs_eager_1f1b(n: int, pp_degree: int, pp_stage: int) -> list[tuple[str, int]]:
    """Paddle 3.3.1's ``PipelineEager1F1BPass._create_job_list``."""
    warmup = 2 * (pp_degree - pp_stage) - 1
    if warmup > n:
        raise DiagnosticError(f"Eager1F1B needs at least 2 (P - S) - 1 = {warmup} micro-batches on stage "
                              f"{pp_stage} (Paddle asserts the same); {n} given")
    jobs = [(FORWARD, i) for i in range(warmup)]
    f, b = warmup, 0
    for _ in range(n - warmup):
        jobs += [(BACKWARD, b), (FORWARD, f)]
        b += 1
        f += 1
    jobs += [(BACKWARD, b + i) for i in range(warmup)]
    return jobs + [(OPT, 0)]


@register
@record
class PipelineZBH1Pass(StagedScheduler):
    name = "pipeline-zbh1"
    description = "ZBH1 zero-bubble schedule: backward split into input- and weight-gradient jobs (Paddle refuses it)"
    schedule = "ZBH1"

    def job_list(self) -> list[tuple[str, int]]:
        return jobs_zbh1(self.micro_batches, self.pp_degree, self.pp_stage)

    def split(self, prog: Program) -> dict[str, Program]:
        return split_zbh1(prog)[0]


@register
@record
class PipelineEager1F1BPass(StagedScheduler):
    name = "pipeline-eager-1f1b"
    description = "Eager1F1B schedule: 1F1B with 2(P-S)-1 warm-up forwards (Paddle refuses it)"
    schedule = "Eager1F1B"

    def job_list(self) -> list[tuple[str, int]]:
        return jobs_eager_1f1b(self.micro_batches, self.pp_degree, self.pp_stage)

    def split(self, prog: Program) -> dict[str, Program]:
        return split_three(prog, (FORWARD, BACKWARD, OPT))
