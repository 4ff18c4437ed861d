"""The shard pipeline: ZeRO (stages 0-3) of a distributed training program and its startup
program, end to end, for one rank or many -- what ``distc shard`` runs, as a library.

Shared work is done once, rank by rank work from that state::

    shard-optimizer{stage,axis,mesh_dims,amp}   (stage >= 1)  retype optimizer states, update op dist attrs
    [annotate_only stops here]
    partition                                                 dist_op.reshard where layouts differ
    --- per rank -----------------------------------------------------------------------------------
    reshard{rank}                                             reshards -> collectives for one rank
    [dense:] remove-other-rank{rank}, dist-to-dense{rank}
    --- per rank, on the startup program (if given) ----------------------------------------------
    [tensor fusion:] fuse-startup, shard-startup{rank}, [gradient merge:] zero-accumulators

One :class:`~distc.passes.base.PassContext` carries a run: the shared passes' one, and for each rank
a fork of it (:meth:`~distc.passes.base.PassContext.fork`: its own notes, collective records and
ring ids, as each rank is a process of its own).  Nothing is kept in module state: two pipelines,
in one thread or in several, do not see each other.

* :func:`shard` -- one rank: a :class:`~distc.pipeline.results.RankResult`;
* :func:`shard_ranks` -- several ranks: a :class:`~distc.pipeline.results.ShardResult`;
* :class:`ShardPipeline` -- the steps, for callers that fork workers per rank (``distc shard
  --all-ranks``: :meth:`ShardPipeline.lower` in place in each worker, from the shared state).

With a pipeline schedule or gradient merge (``pp_schedule``, ``acc_steps``) each rank goes on
after reshard: remove-other-rank, gradient-merge[, check-chunk-id] (Paddle's ``dist_final``),
dist-to-dense and the scheduler pass (the job plan); the startup program gets the accumulators.

New stages (tensor fusion ...) are a field of :class:`ShardOptions` and a pass in
:meth:`ShardPipeline.shared_passes` or :meth:`ShardPipeline.rank_passes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..analysis.cost import has_rank, program_ranks, require_rank
from ..analysis.op_index import OpIndex
from ..analysis.verify import verify, verify_changed, verify_values
from ..dialects.known_ops import unknown_op_warnings
from ..ir.core import Program
from ..ir.records import field, record
from ..passes.base import ModulePass, PassContext, PassManager
from ..passes.partition import PartitionPass
from ..passes.reshard_pass import ReshardPass
from ..passes.shard_optimizer import ShardOptimizerPass
from ..syntax.diagnostics import DiagnosticError, Diagnostics
from .inputs import check_main, check_sharding_degree, check_startups
from .options import ShardOptions
from .results import RankResult, ShardResult, fused_result, rank_memory

TYPE_CHECKING = False
if TYPE_CHECKING:  # names in annotations only (typing costs every run's start-up)
    from ..analysis.memory import OptimizerOperands
    from ..passes.shard_startup import MainLayouts


@record
class Prepared:
    """The rank-independent state every rank starts from (after :meth:`ShardPipeline.prepare`)."""

    program: Program  # after the shared passes
    ctx: PassContext  # theirs
    before: OptimizerOperands | None  # what the optimizer updates touch, before sharding (None: memory not asked)
    after: OptimizerOperands | None  # and after
    layouts: MainLayouts | None  # what the startup programs need of the main program (None: no startup program)
    ran: list[str] = field(default_factory=list)  # the shared passes' specs
    notes: list[str] = field(default_factory=list)  # their decisions
    stages: list[tuple[int, ...]] | None = None  # with a schedule: the ranks of each pipeline stage's mesh


class ShardPipeline:
    """One shard run over ``program`` (changed in place: clone it first to keep it).

    ``startup``: the startup program of every rank, or rank -> its own (a pipeline stage's);
    ``sources``: file name -> text, for errors located in the inputs; ``diagnostics`` collects
    the warnings (its sink prints them as they come); ``memory``: results carry the memory before
    and after sharding (``shard -q``: None).  ``startup`` is given before :meth:`prepare`."""

    def __init__(self, program: Program, options: ShardOptions | None = None, *,
                 startup: Program | Mapping[int, Program] | None = None, sources: Mapping[str, str] | None = None,
                 diagnostics: Diagnostics | None = None, values_checked: bool = False, memory: bool = True) -> None:
        self.program = program
        self.memory = memory
        # MAIN passed verify_values (the command's load; else check_main): the final verify is verify_changed
        self.values_checked = values_checked
        self._index: OpIndex | None = None  # MAIN's ops by name (warn_unknown_ops, check_main) until the first pass
        self.options = options or ShardOptions()
        self.ctx = PassContext(diagnostics=diagnostics if diagnostics is not None else Diagnostics(),
                               sources=dict(sources or {}))
        self.startup = startup
        self.prepared: Prepared | None = None
        self._consumed = False

    @property
    def diagnostics(self) -> Diagnostics:
        return self.ctx.diagnostics

    def startup_of(self, rank: int) -> Program | None:
        if self.startup is None or isinstance(self.startup, Program):
            return self.startup
        return self.startup.get(rank)

    # -- checks -----------------------------------------------------------------------------------
    def ranks(self) -> list[int]:
        """Every rank of the program's meshes."""
        return program_ranks(self.program)

    def require_rank(self, rank: int) -> None:  # (else a diagnostic naming the program's ranks)
        if not has_rank(self.program, rank):
            require_rank(self.program, rank)

    def warn_unknown_ops(self) -> None:
        """A warning for each op name of the main program Paddle 3.3.1 does not have."""
        self._index = OpIndex(self.program)  # (check_main's too, while MAIN is as indexed)
        for w in unknown_op_warnings(self.program, by_name=self._index.by_name):
            self.ctx.warn(w)

    def check_inputs(self, ranks: Iterable[int]) -> None:
        """Wrong input is an error or a warning, never silent: :meth:`check_main`, :meth:`check_startups`."""
        self.check_main()
        self.check_startups(ranks)

    def check_main(self) -> None:
        """The main program is dist-typed and holds an optimizer update (else an error, or at
        stage 0 a warning); it is no startup program."""
        prog, o = self.program, self.options
        if not self.values_checked:
            try:
                verify_values(prog)
            except DiagnosticError as e:
                raise self.ctx.located(e, prog.filename) from None
            self.values_checked = True
        if self._index is None or not self._index.fresh(prog):
            self._index = OpIndex(prog)
        check_main(prog, prog.filename or "<input>", o.stage, self.ctx.warn, asked="--tensor-fusion"
                   if o.tensor_fusion else None, axis=o.axis, mesh_dims=o.mesh_dims, index=self._index)

    def check_startups(self, ranks: Iterable[int]) -> None:
        """Each rank's startup program initialises the optimizer states the rank reads (none:
        an error; some: a warning) and holds no optimizer update; op names Paddle lacks in them."""
        prog, warn = self.program, self.ctx.warn
        if self.startup is None:
            return
        ranks = list(ranks)
        per_rank = not isinstance(self.startup, Program)
        startups = {r: self.startup_of(r) for r in ranks}
        if any(s is None for s in startups.values()):
            missing = [r for r, s in startups.items() if s is None]
            raise DiagnosticError(f"no startup program for rank{'s' * (len(missing) > 1)} "
                                  f"{', '.join(map(str, missing))}", filename=prog.filename)
        for sprog in ({id(s): s for s in startups.values()}.values() if per_rank else [self.startup]):
            for w in unknown_op_warnings(sprog):  # type: ignore[arg-type]
                warn(w)
        check_startups(prog, startups, warn, self.ctx.located)  # type: ignore[arg-type]

    # -- the passes -------------------------------------------------------------------------------
    def shared_passes(self) -> list[ModulePass]:
        """The rank-independent passes (``annotate_only``: shard-optimizer alone; tensor fusion:
        none, its passes are each rank's)."""
        o = self.options
        out: list[ModulePass] = []
        if o.tensor_fusion:
            return out
        if o.stage >= 1:
            out.append(ShardOptimizerPass(stage=o.stage, axis="" if o.axis is None else str(o.axis),
                                          mesh_dims=o.mesh_dims, amp=o.amp))
        if not o.annotate_only:
            out.append(PartitionPass())
        return out

    def fusion_passes(self, rank: int) -> list[ModulePass]:
        """Tensor fusion: the rank's passes before reshard (``tensor-fusion``, ``partition``)."""
        o = self.options
        if not o.tensor_fusion:
            return []
        from ..passes.tensor_fusion import TensorFusionPass

        out: list[ModulePass] = [TensorFusionPass(rank=rank, axis=self.fusion_axis(), buffer_mb=o.comm_buffer_mb,
                                                  overlap=o.overlap, release_grads=o.release_gradients,
                                                  stage3=o.stage == 3, pipeline=o.pp_schedule is not None)]
        return out if o.annotate_only else out + [PartitionPass()]

    def fusion_axis(self) -> int:
        """The sharding mesh dim of tensor fusion: ``axis`` (an index or a name of ``mesh_dims``),
        else 0 (Paddle's ``dp``)."""
        a = self.options.axis
        if a in (None, ""):
            return 0
        if isinstance(a, int) or str(a).isdigit():
            return int(a)
        if a in self.options.mesh_dims:
            return self.options.mesh_dims.index(a)
        raise DiagnosticError(f"axis '{a}' is neither a mesh dim index nor one of the mesh dim names "
                              f"{list(self.options.mesh_dims)}")

    def rank_passes(self, rank: int) -> list[ModulePass]:
        """One rank's passes on the main program."""
        return [p for part in self._rank_parts(rank) for p in part]

    def pp_stage(self, rank: int) -> tuple[int, int]:
        """(the rank's pipeline stage, the number of stages), from the shared program."""
        from ..passes.pipeline_schedule import stage_of

        sh = self.prepare()
        for i, ids in enumerate(sh.stages or ()):
            if rank in ids:
                return i, len(sh.stages)
        return stage_of(sh.program, rank)  # (the located error)

    def _rank_parts(self, rank: int, replayer=None) -> tuple[list[ModulePass], list[ModulePass], list[ModulePass]]:
        """(reshard, the passes on the rank's dist program after it, those after dist-to-dense)."""
        o = self.options
        if o.annotate_only:
            return [], [], []
        first: list[ModulePass] = [ReshardPass(rank=rank, moe_all_to_all=o.moe_all_to_all, replayer=replayer)]
        if o.scheduled:
            from ..passes.pipeline_schedule import schedule_passes
            from ..passes.remove_other_rank import RemoveOtherRankPass

            stage, degree = self.pp_stage(rank)
            dist, dense = schedule_passes(o.pp_schedule or "GM", o.acc_steps, rank, stage, degree, o.vpp_degree,
                                          o.paddle_merge)
            return first, [RemoveOtherRankPass(rank=rank)] + dist, dense
        if o.dense:
            from ..passes.dist_to_dense import DistToDensePass  # (here: a plain run's start-up stays short)
            from ..passes.remove_other_rank import RemoveOtherRankPass

            return first, [RemoveOtherRankPass(rank=rank), DistToDensePass(rank=rank)], []
        return first, [], []

    def startup_passes(self, rank: int, layouts: MainLayouts) -> list[ModulePass]:
        """One rank's passes on its startup program (``layouts``: what they need of the main
        program): tensor fusion's ``fuse-startup``, ``shard-startup``, and with gradient merge
        ``zero-accumulators`` (each follows what the main program's passes of the rank recorded in
        the pass context)."""
        o = self.options
        out: list[ModulePass] = []
        if o.tensor_fusion:
            from ..passes.fusion_startup import FuseStartupPass

            out.append(FuseStartupPass())
        from ..passes.shard_startup import ShardStartupPass  # (only with a startup program)
        out.append(ShardStartupPass(rank=rank, main_layouts=layouts))
        if o.scheduled:
            from ..passes.gradient_merge import ZeroAccumulatorsPass

            out.append(ZeroAccumulatorsPass())
        return out

    def _run(self, passes: list[ModulePass], prog: Program, ctx: PassContext, final_verify: bool = False) -> None:
        if not passes and not final_verify:
            return
        verify_each = self.options.verify_each
        try:
            PassManager(passes, verify_each=verify_each).run(prog, ctx)
            if final_verify and not verify_each:
                (verify_changed if self.values_checked else verify)(prog)
        except DiagnosticError as e:
            raise ctx.located(e, prog.filename) from None

    # -- shared work, once ------------------------------------------------------------------------
    def prepare(self) -> Prepared:
        """Shard-optimizer and partition: the work every rank shares (once)."""
        if self.prepared is not None:
            return self.prepared
        prog, ctx, o = self.program, self.ctx, self.options
        # MAIN's index (check_main's) while MAIN is as it was: the updates, data and parameter ops
        idx, self._index = (self._index if self._index is not None and self._index.fresh(prog) else None), None
        updates = idx.updates() if idx is not None else None
        if self.memory:  # (the memory module only then: a -q run shows no figures)
            from ..analysis.memory import optimizer_operands
        before = optimizer_operands(prog, updates) if self.memory else None
        ran: list[str] = []
        passes = self.shared_passes()
        opt = [p for p in passes if isinstance(p, ShardOptimizerPass)]
        ctx.op_index = idx
        try:
            self._run(opt, prog, ctx, final_verify=bool(opt) and o.annotate_only)
        finally:
            ctx.op_index = None
        ran += [p.spec() for p in opt]
        after = optimizer_operands(prog, updates) if self.memory else None
        top = prog.block
        if self.startup is not None:  # (its module only then)
            from ..passes.shard_startup import MainLayouts
        layouts = None if self.startup is None else MainLayouts.of(
            prog, None if idx is None else lambda name: [op for op in idx.named(name) if op.parent is top])
        rest = [p for p in passes if not isinstance(p, ShardOptimizerPass)]
        if o.scheduled:  # (before the partition: which gradients the input reshards in the backward)
            from ..dialects.grads import resharded_in_backward
            from ..passes.gradient_merge import clip_warning

            ctx.stats.resharded_grads = resharded_in_backward(prog)
            w = clip_warning(prog, o.acc_steps, o.paddle_merge)  # distc's default and Paddle's differ
            if w is not None:
                ctx.warn(w)
        self._run(rest, prog, ctx)
        ran += [p.spec() for p in rest]
        if o.stage >= 1:
            check_sharding_degree(prog, ctx.stats.sharding_axis, o.mesh_dims, prog.filename or "<input>", ctx.warn,
                                  None if idx is None else [op for op, _ in idx.optimizers])
        self.prepared = Prepared(prog, ctx, before, after, layouts, ran, list(ctx.notes))
        if o.scheduled:
            from ..passes.pipeline_schedule import stage_ranks  # (too few micro-batches: its located error)

            self.prepared.stages = stage_ranks(prog, o.pp_schedule, o.acc_steps, ctx, o.vpp_degree)
        return self.prepared

    # -- one rank ---------------------------------------------------------------------------------
    def lower(self, rank: int, *, copy: bool = True) -> RankResult:
        """Rank ``rank``'s programs from the shared state: on a copy of it (``copy``), or in place
        (once: what a forked worker, or a run for one rank, does)."""
        res, ctx, layouts = self.lower_main(rank, copy=copy)
        self.lower_startup(res, ctx, layouts)
        return res

    def lower_main(self, rank: int, *, copy: bool = True, replayer=None) -> tuple[RankResult, PassContext, MainLayouts | None]:
        """:meth:`lower` but the startup program (:meth:`lower_startup` takes the rest); ``replayer``: reshard's."""
        sh = self.prepare()
        if not copy:
            if self._consumed:
                raise RuntimeError("the shared state was lowered in place already: lower(copy=True)")
            self._consumed = True
        o = self.options
        prog = sh.program.clone() if copy else sh.program
        sprog = self.startup_of(rank)
        if sprog is not None and copy:
            sprog = sprog.clone()
        ctx = sh.ctx.fork()
        res = RankResult(rank, prog, sprog, memory_before=rank_memory(sh.before, rank),
                         memory_after=rank_memory(sh.after, rank))
        layouts = sh.layouts
        pre = self.fusion_passes(rank)
        if pre:
            self._run(pre, prog, ctx, final_verify=o.annotate_only)
            res.ran += [p.spec() for p in pre]
            from ..passes.shard_startup import MainLayouts

            layouts = MainLayouts.of(prog)
            fused_result(res, ctx.stats.fusion)
        first, dist, dense = self._rank_parts(rank, replayer)
        if first:
            self._run(first, prog, ctx, final_verify=not dist)
            res.collectives = [c for c in ctx.collectives if c.runs]
            res.steps = list(ctx.stats.reshard_steps)
            if dense:  # a schedule: the job programs are split from the dense program
                from ..passes.pipeline_schedule import input_layouts

                self._run(dist, prog, ctx, final_verify=not self.options.dense)
                res.layouts = input_layouts(prog)
                dist_final = None if self.options.dense else prog.clone()
                if o.tensor_fusion:  # (the buffers' layout: what the whole-step proof starts from)
                    res.fused_dist = dist_final or prog.clone()
                self._run(dense, prog, ctx, final_verify=self.options.dense)
                res.plan, res.dense = ctx.stats.job_plan, prog
                res.rings = {ring: group for group, ring in ctx.rings.groups.items()}
                if dist_final is not None:
                    res.program = dist_final
            else:
                self._run(dist, prog, ctx, final_verify=bool(dist))
            res.ran += [p.spec() for p in first + dist + dense]
            if res.rings is None:
                res.rings = {ring: group for group, ring in ctx.rings.groups.items()}
        return res, ctx, layouts

    def lower_startup(self, res: RankResult, ctx: PassContext, layouts: MainLayouts | None) -> None:
        """The rank's startup program (``res.startup``, in place) after its main program's passes (``ctx``)."""
        sprog, rank = res.startup, res.rank
        if sprog is not None:
            if layouts is None:
                raise RuntimeError("the startup program was given after prepare(): give it before")
            try:
                PassManager(self.startup_passes(rank, layouts), verify_each=False).run(sprog, ctx)
            except DiagnosticError as e:
                raise ctx.located(e, sprog.filename) from None
            res.ran.append(f"shard-startup{{rank={rank}}} (on {sprog.filename or '<startup>'})")
        res.notes = ctx.notes

    # -- several ranks ----------------------------------------------------------------------------
    def run(self, ranks: Iterable[int] | None = None, *,
            each: Callable[[list[int], Callable[[int], RankResult]], Mapping[int, RankResult]] | None = None,
            records: bool = True) -> ShardResult:
        """Every rank of ``ranks`` (default: all), each from the shared state.  ``each(ranks,
        work)`` maps ``work`` over the ranks (``distc shard`` forks workers, which lower in place:
        :mod:`distc.pipeline.derive`; ``records``: False when the caller drops the collective
        records, which derived ranks then do not make); by default one after the other, each on a
        copy but the last."""
        rs = self.ranks() if ranks is None else list(ranks)
        sh = self.prepare()
        if not self.options.annotate_only:
            from ..passes import reshard  # noqa: F401  (once here, not in each forked worker)
        if each is None:
            out = {r: self.lower(r, copy=k < len(rs) - 1) for k, r in enumerate(rs)}
        else:  # (ranks derived from the first where they can be: distc.pipeline.derive)
            from .derive import run_derived

            out = run_derived(self, rs, each, records)
        return ShardResult(out, sh.ctx.stats.sharding_axis, list(sh.ran), list(sh.notes),
                           self.diagnostics.warnings)


def _pipeline(program: Program, rank_list: list[int] | None, options: ShardOptions | None, startup, copy: bool,
              diagnostics: Diagnostics | None, kw: dict) -> tuple[ShardPipeline, list[int]]:
    if options is None:
        options = ShardOptions(**kw)
    elif kw:
        raise TypeError(f"give options= or {', '.join(kw)}, not both")
    if copy:
        program = program.clone()
        if isinstance(startup, Program):
            startup = startup.clone()
        elif startup is not None:
            startup = {r: p.clone() for r, p in startup.items()}
    pipe = ShardPipeline(program, options, startup=startup, diagnostics=diagnostics)
    pipe.warn_unknown_ops()
    if rank_list is None:
        rank_list = pipe.ranks()
        if not rank_list:
            raise DiagnosticError("the program has no process mesh: there are no ranks to lower for",
                                  filename=program.filename)
    for r in rank_list:
        pipe.require_rank(r)
    pipe.check_inputs(rank_list)
    return pipe, rank_list


def shard(program: Program, rank: int = 0, *, startup: Program | Mapping[int, Program] | None = None,
          options: ShardOptions | None = None, copy: bool = True, diagnostics: Diagnostics | None = None,
          **kw) -> RankResult:
    """ZeRO-shard ``program`` (Paddle's dist-typed program before ``apply_partition_pass``, its
    optimizer ops included) for one rank, as ``distc shard --rank RANK`` does.

    Keyword options are :class:`ShardOptions`' (``stage``, ``axis``, ``mesh_dims``, ``amp``,
    ``annotate_only``, ``dense``, ``verify_each``, ``moe_all_to_all``; a schedule: ``pp_schedule``,
    ``acc_steps``, ``vpp_degree``, ``paddle_merge``), or give ``options=``.  ``startup``: the
    startup program (``startup_after_remove``) to shard as well.  ``program`` and ``startup``
    are left as they are unless ``copy=False``.  Raises :class:`~distc.DiagnosticError` on wrong
    input; warnings are in the result's ``warnings`` (and ``diagnostics``, if given)."""
    pipe, _ = _pipeline(program, [rank], options, startup, copy, diagnostics, kw)
    res = pipe.lower(rank, copy=False)
    res.warnings = pipe.diagnostics.warnings
    return res


def shard_ranks(program: Program, ranks: Iterable[int] | None = None, *,
                startup: Program | Mapping[int, Program] | None = None, options: ShardOptions | None = None,
                copy: bool = True, diagnostics: Diagnostics | None = None, **kw) -> ShardResult:
    """:func:`shard` for several ranks (default: every rank of the program's meshes), the shared
    passes run once: ``result[rank]`` is each rank's :class:`RankResult`."""
    pipe, rank_list = _pipeline(program, None if ranks is None else list(ranks), options, startup, copy,
                                diagnostics, kw)
    return pipe.run(rank_list)
