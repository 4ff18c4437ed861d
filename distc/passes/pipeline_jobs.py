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

from typing import Callable, ClassVar

from ..dialects import ops
from ..dialects.pir_kwargs import UnorderedMapOrder, as_cloned, inserted
from ..ir import attrs as A
from ..ir.builder import InsertPoint
from ..ir.clone import clone_program
from ..ir.core import BlockArgument, Operation, Program, Value
from ..ir.records import field, record
from ..syntax.diagnostics import DiagnosticError
from .base import ModulePass, PassContext
from .sharding_util import persistable

SEND, RECV = "pd_op.send_v2", "pd_op.recv_v2"


@record
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


@record
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
        """Paddle's split, as if each job program were a clone of the whole program from which,
        walking it backwards, the ops of other types are erased (a value a later job uses becoming
        its kwarg); each job program is cloned from the ops of its type only."""
        complete = self.dense.ops
        n = len(complete)
        kinds = [""] * n
        for idx in range(n - 1, -1, -1):  # (an assigner may keep state: backwards, as Paddle walks)
            kinds[idx] = self.assign(idx, complete[idx])
        top = {}
        for i, op in enumerate(complete):
            for inner in (op.walk() if op.regions else (op,)):
                top[id(inner)] = i
        crossing: dict[str, list[tuple[Value, str]]] = {t: [] for t in self.types}  # in the order Paddle adds them
        edits: list[tuple] = []  # ("save", idx, ri, name) / ("attr", type, idx, key, value, only if absent)
        for idx in range(n - 1, -1, -1):
            cur, op = kinds[idx], complete[idx]
            later = self.later(cur) if self.later else self.types[self.types.index(cur) + 1:]
            for ri, res in enumerate(op.results):
                by_type: dict[str, list[int]] = {}
                for user, _ in res.uses:
                    j = top[id(user)]
                    by_type.setdefault(kinds[j], []).append(j if complete[j] is user else -1)
                left = [t for t in by_type if t != cur and t not in later]
                if left:  # (a clone of the whole program could not erase the op there: Paddle fails too)
                    raise DiagnosticError(f"pipeline: '{op.name}' ({cur}) makes a value the earlier job "
                                          f"'{left[0]}' uses")
                users = [u for u in later if u in by_type]
                if not users:
                    continue
                name = self._name(edits, cur, idx, ri, complete)
                for u in users:
                    if self.events:
                        self._dependency(edits, cur, u, idx, [j for j in by_type[u] if j >= 0], name)
                    crossing[u].append((res, name))
        kw: dict[str, UnorderedMapOrder] = {}
        progs: dict[str, Program] = {}
        made: dict[str, dict[int, Operation]] = {}
        for t in self.types:
            kw[t] = UnorderedMapOrder(a.keyword for a in self.dense.block.args if a.keyword is not None)
            args: list[BlockArgument] = []

            def prepare(block, vmap, t=t, args=args) -> None:
                as_cloned(block)
                for old, name in crossing[t]:
                    arg = block.add_argument(old.type, keyword=name)
                    vals = {"place": A.PlaceAttr("Place(cpu)", False), "persistable": A.BoolAttr(persistable(old))}
                    arg.attrs = {k: vals[k] for k in inserted(["place", "persistable"])}
                    kw[t].insert(name)
                    vmap[old] = arg
                    args.append(arg)

            kept = [i for i in range(n) if kinds[i] == t]
            ids = {id(complete[i]) for i in kept}
            p = progs[t] = clone_program(self.dense, lambda o: id(o) in ids, prepare)
            made[t] = dict(zip(kept, p.block.ops))
            for arg in args:  # (their uses were set: Paddle's replace_all_uses_with marks the users)
                for user in arg.users:
                    user.dirty = True
        for e in edits:
            if e[0] == "save":
                _, t, idx, ri, name = e
                save_value(made[t][idx], ri, name)
            else:
                _, t, idx, key, value, if_absent = e
                o = made[t][idx]
                if not (if_absent and key in o.attrs):
                    o.set_attr(key, value)
        for t, p in progs.items():
            by_key = {a.keyword: a for a in p.block.args if a.keyword is not None}
            p.block.args = [a for a in p.block.args if a.keyword is None] + [by_key[k] for k in kw[t] if k in by_key]
            for i, a in enumerate(p.block.args):
                a.index = i
            p.block.dirty = True
        return progs

    def _name(self, edits: list, cur: str, idx: int, ri: int, complete) -> str:
        op = complete[idx]
        name = None
        if not self.plain_names(cur):
            name = _value_name(op, ri) if op.name in (ops.DATA, ops.PARAMETER) else _shadow_name(op.results[ri])
        if name is None:
            name = f"var_{idx}_{op.name}_{ri}"
            if self.save_if is None:
                edits.append(("save", cur, idx, ri, name))
        if self.save_if is not None and self.save_if(name):
            edits.append(("save", cur, idx, ri, name))
        return name

    @staticmethod
    def _dependency(edits: list, cur: str, nxt: str, idx: int, users: list[int], name: str) -> None:
        """Paddle's events: the producer records one, the first op of the later job to use the
        value waits for it."""
        if not (("backward" in cur and "send_backward" in nxt) or ("recv_forward" in cur and "forward" in nxt)):
            return
        if not users:
            return
        edits.append(("attr", cur, idx, "force_record_event", A.BoolAttr(True), True))
        edits.append(("attr", cur, idx, "event_to_record", A.StrAttr.of(name), False))
        edits.append(("attr", nxt, min(users), "events_to_wait", A.ArrayAttr((A.StrAttr.of(name),)), False))


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


@record
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
