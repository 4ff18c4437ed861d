"""What a shard pipeline gives back: per rank a :class:`RankResult` (its programs, the collectives
its passes inserted, bytes sent, memory before and after, the decisions and warnings), and for a
run over several ranks a :class:`ShardResult` (a mapping rank -> RankResult, plus what the shared
passes decided).  Plain data: a result detached from its programs (:meth:`RankResult.detached`)
crosses process boundaries (pickle) as the forked workers of ``distc shard --all-ranks`` send it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..analysis.cost import totals
from ..ir.core import Program
from ..ir.records import field, record, replace
from ..syntax.printer import joined

TYPE_CHECKING = False
if TYPE_CHECKING:  # names in annotations only: typing is ~4 ms of every run's start-up
    from typing import Any

    from ..analysis.memory import MemoryReport


@record
class RankResult:
    """One rank's part of a shard run.

    ``program`` is the rank's main program (after ``reshard``, and the dense passes with
    ``dense``), ``startup`` its startup program (if one was given); ``text``/``startup_text``
    print them (once).  ``collectives`` are the records the ``reshard`` pass made of the
    communication it inserted into the main program (``None`` with ``annotate_only``: nothing
    lowered; :func:`distc.pipeline.reshard` keeps those of groups without this rank too, ``runs``
    false); ``memory_before``/``memory_after`` the parameters, gradients and optimizer states this
    rank holds before and after sharding.  ``notes`` are the decisions of this rank's passes
    (``--explain``), ``steps`` how each ``dist_op.reshard`` was lowered (``ReshardStep``: layouts,
    function, what was tried), ``rings`` the ring ids handed out (ring id -> group, as this rank's
    programs number them), ``ran`` the passes' specs, ``warnings`` what they warned about.

    With a pipeline schedule or gradient merge (``pp_schedule``/``acc_steps``), ``program`` is
    the rank's final dist program (Paddle's ``dist_final``: after gradient merge), or with
    ``dense`` its dense program; ``dense`` is the dense program as the scheduler leaves it,
    ``plan`` the job plan (``plan.programs``: job type -> program; ``plan.jobs``: (type,
    micro-batch) in schedule order; ``plan.job_list_text()`` as Paddle's job list), and
    ``layouts`` what a whole-step proof needs (:mod:`distc.pipeline.schedule`)."""

    rank: int
    program: Program | None = None
    startup: Program | None = None
    collectives: list | None = None
    memory_before: MemoryReport | None = None
    memory_after: MemoryReport | None = None
    notes: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    plan: Any = None  # pp_schedule / acc_steps: the JobPlan (job programs, jobs in schedule order)
    fusion: dict | None = None  # tensor fusion: the rank's buffers and who updates what (plan_summary)
    dense: Program | None = None  # and: the dense program as the scheduler leaves it (= program with dense)
    layouts: dict | None = None  # and: name -> layout of each data/parameter of the rank's dist program
    rings: dict | None = None  # and: ring id -> group (ranks), as this rank's programs number them
    fused_dist: Program | None = None  # and tensor fusion: the dist program (its buffers, for the proof)
    steps: list = field(default_factory=list)  # reshard: a ReshardStep per dist_op.reshard
    # --all-ranks: the rank whose text this one's was derived from (its main program is not built),
    # and the ranks derived in this rank's worker (distc.pipeline.derive)
    derived_from: int | None = None
    derived: dict | None = field(default=None, repr=False)
    _text: str | None = field(default=None, repr=False)
    _startup_text: str | None = field(default=None, repr=False)
    _pieces: list | None = field(default=None, repr=False, compare=False)  # see text_pieces

    @property
    def text(self) -> str | None:
        """The main program's text (printed once)."""
        if self._text is None:
            if self._pieces is not None:
                self._text, self._pieces = joined(self._pieces), None
            elif self.program is not None:
                self._text = str(self.program)
        return self._text

    def text_pieces(self) -> str | list[str] | None:
        """``text`` as a file is written from it: the text once printed, else the printer's pieces
        (:func:`distc.syntax.printer.print_pieces`: no string of the whole text is made; kept, so
        that ``text`` asked later only joins them), or a derived rank's pieces of UTF-8 (bytes and
        views of the base rank's encoded text: :func:`distc.pipeline.derive.derive`)."""
        if self._text is None and self._pieces is None and self.program is not None:
            from ..syntax.printer import print_pieces

            self._pieces = print_pieces(self.program)
        return self._text if self._text is not None else self._pieces

    def __getstate__(self) -> dict:
        """Pickled and deep-copied with its text joined from pieces (a derived rank's are views of
        the base rank's encoded text: memoryviews neither pickle nor copy)."""
        d = dict(self.__dict__)
        if d.get("_pieces") is not None and d.get("_text") is None:
            d["_text"], d["_pieces"] = joined(d["_pieces"]), None
        return d

    @property
    def startup_text(self) -> str | None:
        if self._startup_text is None and self.startup is not None:
            self._startup_text = str(self.startup)
        return self._startup_text

    @property
    def bytes_sent(self) -> int | None:
        """Bytes this rank sends (``None``: nothing lowered)."""
        return None if self.collectives is None else sum(c.moved for c in self.collectives if c.runs)

    @property
    def num_collectives(self) -> int | None:
        """How many collectives this rank runs (``None``: nothing lowered)."""
        return None if self.collectives is None else sum(1 for c in self.collectives if c.runs)

    @property
    def saved(self) -> int:
        """Bytes of parameters, gradients and optimizer states sharding saves on this rank."""
        return self.memory_before.total - self.memory_after.total if self.memory_before and self.memory_after else 0

    def totals(self, by_group: bool = True) -> dict:
        """Count and bytes sent per (kind, group) (or per kind) (:func:`distc.analysis.cost.totals`)."""
        return totals(self.collectives or [], by_group=by_group)

    def detached(self, texts: bool = False) -> "RankResult":
        """A copy without the programs (and their texts unless ``texts``), records without their
        layouts, a job plan without its programs (their types kept, each None): small, plain data
        a worker process sends back."""
        colls = None if self.collectives is None else [replace(c, layouts=None) for c in self.collectives]
        plan = None if self.plan is None else replace(self.plan, programs=dict.fromkeys(self.plan.programs))
        derived = None if self.derived is None else {r: x.detached(texts) for r, x in self.derived.items()}
        return replace(self, program=None, startup=None, dense=None, collectives=colls, plan=plan, steps=[],
                                   layouts=None, fused_dist=None, derived=derived,
                                   _text=self.text if texts else None, _pieces=None,
                                   _startup_text=self._startup_text if texts else None)


@record
class ShardResult(Mapping):
    """A run over several ranks: ``result[rank]`` is that rank's :class:`RankResult`; besides,
    what the shared passes did: the sharding mesh dim, the passes run once (``pipeline``), their
    decisions and the warnings."""

    ranks: dict[int, RankResult]
    sharding_axis: int | None = None
    pipeline: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, rank: int) -> RankResult:
        return self.ranks[rank]

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.ranks))

    def __len__(self) -> int:
        return len(self.ranks)


def rank_memory(ops, rank: int):
    """:func:`distc.analysis.memory.memory_of` (None: no figures taken, None), its module imported
    only when there are figures (a ``-q`` run takes none)."""
    if ops is None:
        return None
    from ..analysis.memory import memory_of

    return memory_of(ops, rank)


def fused_result(res: RankResult, fusion) -> None:
    """The rank's buffers and who updates what (``res.fusion``); its memory: parameters and
    gradients are held whole (the fused buffers), states only for the pieces it updates."""
    from ..analysis.memory import MemoryReport, ParamMemory
    from ..passes.fusion_layout import local_shape, numel, plan_summary

    res.fusion = plan_summary(fusion.buffers, fusion.group, res.rank)
    before = res.memory_before
    if before is None:
        return
    mine = {u.name: pc for u, _, _, pc in fusion.todo}
    rows = []
    for r in before.rows:
        st = dict(r.states)
        pc = mine.get(r.name, False)
        if pc is False:
            st = {k: 0 for k in st}
        elif pc is not None:  # the piece's moments (beta pows stay scalars)
            n, whole = pc.end - pc.begin, max(numel(local_shape(pc.update.param)), 1)
            st = {k: (v if "pow_acc" in k else v // whole * n) for k, v in st.items()}
        param = r.param
        if fusion.o.stage3 and pc not in (None, False):  # stage 3: the parameter kept as the piece only
            param = r.param // max(numel(local_shape(pc.update.param)), 1) * (pc.end - pc.begin)
        elif fusion.o.stage3 and pc is False and any(u.name == r.name for b in fusion.buffers for u in b.updates):
            param = 0
        rows.append(ParamMemory(r.name, r.op, param, r.grad, st))
    res.memory_after = MemoryReport(res.rank, rows)
