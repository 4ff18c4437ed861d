"""What every pipeline scheduler pass shares: the job plan, and splitting a rank's dense program
into job programs as Paddle 3.3.1's ``pipeline_scheduler_pass`` does (``pass_utils.py``,
``pipeline_1f1b.py``, ``pipeline_vpp.py``).

Each op of the rank's dense program belongs to one job type (by its ``op_role``: 0 forward,
1 backward, 2 optimizer; ops without a role take their neighbours'). Every job program is a clone
of the whole program with the ops of other types erased; a value made in one job and used by a
later one crosses as a persistable kwarg named after what made it (a ``pd_op.data``'s or
parameter's own name, the name a ``builtin.shadow_output`` gives it, or ``var_<index>_<op>_<k>``,
which the producing job then saves with a ``builtin.shadow_output``). Jobs run in the plan's order,
(type, micro-batch id) each, on the values those kwargs carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar

from ..dialects import ops
from ..dialects.pir_kwargs import UnorderedMapOrder, as_cloned, inserted
from ..ir import attrs as A
from ..ir.builder import InsertPoint
from ..ir.core import Operation, Program, Value
from ..syntax.diagnostics import DiagnosticError
from .base import ModulePass, PassContext
from .sharding_util import persistable

SEND, RECV = "pd_op.send_v2", "pd_op.recv_v2"


@dataclass
class JobPlan:
    """Job programs by type (in Paddle's ``job_types()`` order) and the jobs in schedule order."""

    schedule: str
    programs: dict[str, Program] = field(default_factory=dict)
    jobs: list[tuple[str, int]] = field(default_factory=list)

    def job_list_text(self) -> str:
        return "".join(f"{t} {m}\n" for t, m in self.jobs)


def role(op: Operation) -> int:
    a = op.attr("op_role")
    return a.value if isinstance(a, A.IntAttr) else -1


def set_role(op: Operation, r: int) -> None:
    op.set_attr("op_role", A.IntAttr(r))


def overlap_send_recv(prog: Program, send_stream: Callable[[Operation], str], recv_stream: str) -> None:
    """Paddle's ``_pir_overlap_send_recv`` (FThenB, VPP: ``send_stream_<ring>``, ``recv_stream``) and
    1F1B's ``_overlap_send_recv`` (``send_recv_stream`` both)."""
    for op in prog.walk():
        if op.name in (SEND, RECV):
            op.set_attr("dynamic_shape", A.BoolAttr(False))
            op.set_attr("use_calc_stream", A.BoolAttr(True))
            op.set_attr("execution_stream", A.StrAttr.of(send_stream(op) if op.name == SEND else recv_stream))
            op.set_attr("scheduling_priority", A.IntAttr(0))


def send_stream_of_ring(op: Operation) -> str:
    ring = op.attr("ring_id")
    return f"send_stream_{ring.value if isinstance(ring, A.IntAttr) else ring}"


def forward_complete_op_role(prog: Program) -> None:
    """Paddle's ``forward_complete_op_role``, quirks included: a run of ops without a role takes
    the role of the op after it (of the op before it at the end of the block)."""
    all_ops = prog.block.ops
    n = len(all_ops)
    if n == 0:
        return
    i = 0
    left = right = None
    while i < n:
        if role(all_ops[i]) != -1:
            left = role(all_ops[i])
            i += 1
            continue
        j = i + 1
        while j < n and role(all_ops[j]) == -1:
            j += 1
        if j >= n:
            for k in range(i, j):
                set_role(all_ops[k], left if left is not None else -1)
            break
        right = role(all_ops[j])
        for k in range(i, j):
            set_role(all_ops[k], right)
            i = j + 1
    if left == -1 and right == -1:
        raise DiagnosticError("pipeline: no op of the program has an op_role")


def _value_name(op: Operation, i: int) -> str | None:
    """The name Paddle's ``value.name`` gives a ``pd_op.data`` / ``builtin.parameter`` result."""
    key = "name" if op.name == ops.DATA else "parameter_name" if op.name == ops.PARAMETER else None
    a = op.attr(key) if key else None
    return a.value if isinstance(a, A.StrAttr) else None


def _shadow_name(v: Value) -> str | None:
    name = None
    for u in v.users:
        if u.name == ops.SHADOW_OUTPUT:
            a = u.attr("output_name")
            name = a.value if isinstance(a, A.StrAttr) else name
    return name


def save_value(prog_op: Operation, result: int, name: str) -> None:
    """``paddle._C_ops.set_persistable_value(value, name)`` right after the op."""
    v = prog_op.results[result]
    so = Operation(ops.SHADOW_OUTPUT, [v], [], {"output_name": A.StrAttr.of(name)})
    InsertPoint.after(prog_op).insert(so)


@dataclass
class Splitter:
    """One split: ``types`` in program order; ``assign(index, op)`` gives an op's job type; a value
    may cross from a job to any later type in ``types``."""

    dense: Program
    types: list[str]
    assign: Callable[[int, Operation], str]
    events: bool = False  # 1F1B/VPP: record/wait events backward -> send_backward, recv_forward -> forward
    plain_names: Callable[[str], bool] = lambda t: False  # types whose crossing values are always var_*
    later: Callable[[str], list[str]] | None = None
    save_if: Callable[[str], bool] | None = None  # VPP: save a named value only if its name has "var_"

    def run(self) -> dict[str, Program]:
        complete = self.dense.ops
        progs = {t: self.dense.clone() for t in self.types}
        kw: dict[str, UnorderedMapOrder] = {}
        for t, p in progs.items():  # each clone's kwargs: the dense program's re-inserted in order
            kw[t] = UnorderedMapOrder(a.keyword for a in p.block.args if a.keyword is not None)
            as_cloned(p.block)
        opsd = {t: p.block.ops for t, p in progs.items()}
        for idx in range(len(complete) - 1, -1, -1):
            cur = self.assign(idx, complete[idx])
            later = self.later(cur) if self.later else self.types[self.types.index(cur) + 1:]
            for ri in range(complete[idx].num_results):
                users = [u for u in later if opsd[u][idx].results[ri].uses]
                if not users:
                    continue
                name = self._name(progs, opsd, cur, idx, ri, complete)
                for u in users:
                    if self.events:
                        self._dependency(opsd, cur, u, idx, ri, name)
                    old = opsd[u][idx].results[ri]
                    arg = progs[u].block.add_argument(old.type, keyword=name)
                    keys = ["place", "persistable"]
                    vals = {"place": A.PlaceAttr("Place(cpu)", False), "persistable": A.BoolAttr(persistable(old))}
                    arg.attrs = {k: vals[k] for k in inserted(keys)}
                    kw[u].insert(name)
                    old.replace_all_uses_with(arg)
            for u in self.types:
                if u != cur:
                    opsd[u][idx].erase()
        for t, p in progs.items():
            by_key = {a.keyword: a for a in p.block.args if a.keyword is not None}
            p.block.args = [a for a in p.block.args if a.keyword is None] + [by_key[k] for k in kw[t] if k in by_key]
            for i, a in enumerate(p.block.args):
                a.index = i
            p.block.dirty = True
        return progs

    def _name(self, progs, opsd, cur: str, idx: int, ri: int, complete) -> str:
        op = opsd[cur][idx]
        name = None
        if not self.plain_names(cur):
            name = _value_name(op, ri) if op.name in (ops.DATA, ops.PARAMETER) else _shadow_name(complete[idx].results[ri])
        if name is None:
            name = f"var_{idx}_{complete[idx].name}_{ri}"
            if self.save_if is None:
                save_value(op, ri, name)
        if self.save_if is not None and self.save_if(name):
            save_value(op, ri, name)
        return name

    @staticmethod
    def _dependency(opsd, cur: str, nxt: str, idx: int, ri: int, name: str) -> None:
        if not (("backward" in cur and "send_backward" in nxt) or ("recv_forward" in cur and "forward" in nxt)):
            return
        nops = opsd[nxt]
        pos = {id(o): i for i, o in enumerate(nops)}
        users = [u for u in nops[idx].results[ri].users if id(u) in pos]
        if not users:
            return
        first = min(users, key=lambda u: pos[id(u)])
        rec = opsd[cur][idx]
        if "force_record_event" not in rec.attrs:
            rec.set_attr("force_record_event", A.BoolAttr(True))
        rec.set_attr("event_to_record", A.StrAttr.of(name))
        first.set_attr("events_to_wait", A.ArrayAttr((A.StrAttr.of(name),)))


def region_assigner(names: dict[int, str]) -> Callable[[int, Operation], str]:
    """Job types by op role, walking the block backwards as Paddle does: an op without a role is
    in the region of the op after it. ``names``: role -> type."""
    state = {"region": names[2]}

    def assign(idx: int, op: Operation) -> str:
        r = role(op)
        if r in names:
            state["region"] = names[r]
        return state["region"]

    return assign


@dataclass
class StagedScheduler(ModulePass):
    """A scheduler whose job list depends on the rank's stage: ``job_list()`` and ``split(prog)``
    make the plan (``ctx.stats.job_plan``)."""

    schedule: ClassVar[str] = ""

    micro_batches: int = 1
    pp_degree: int = 1
    pp_stage: int = 0

    def job_list(self) -> list[tuple[str, int]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def split(self, prog: Program) -> dict[str, Program]:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, prog: Program, ctx: PassContext) -> None:
        jobs = self.job_list()
        ctx.stats.job_plan = JobPlan(self.schedule, self.split(prog), jobs)
        ctx.notes.append(f"{self.name}: stage {self.pp_stage} of {self.pp_degree}: {len(jobs)} jobs of "
                         f"{len(ctx.stats.job_plan.programs)} job programs")
