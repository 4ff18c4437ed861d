"""Passes, their registry, pipeline strings (``pass{opt=v,opt2=w},pass2``) and the pass manager."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..dialects.rings import RingAllocator
from ..ir.core import Program
from ..ir.records import MISSING, Field, field, fields, record, replace
from ..syntax.diagnostics import DiagnosticError, Diagnostics

TYPE_CHECKING = False
if TYPE_CHECKING:  # names in annotations only: typing is ~4 ms of every run's start-up
    from typing import Any, ClassVar

# name -> pass class, filled as each pass module is imported (``@register``; ``load_passes()``
# imports them all): complete and read-only once they are imported
REGISTRY: dict[str, type["ModulePass"]] = {}


def register(cls: type["ModulePass"]) -> type["ModulePass"]:
    """Class decorator: the pass's name, for pipeline strings (``distc opt -p``), where it is defined."""
    old = REGISTRY.get(cls.name)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"two passes named '{cls.name}': {old.__module__}.{old.__qualname__} and "
                         f"{cls.__module__}.{cls.__qualname__}")
    REGISTRY[cls.name] = cls
    return cls


@record
class PassStats:
    """What the passes of one pipeline run found and did, one typed field a fact."""

    sharding_axis: int | None = None  # shard-optimizer: the mesh dim ZeRO shards over
    sharded_states: list = field(default_factory=list)  # shard-optimizer: ShardingDecision per update
    amp: bool = False  # shard-optimizer: Paddle's AMP optimizer path taken
    zero3_params: list = field(default_factory=list)  # shard-optimizer stage 3: parameters retyped
    reshards_inserted: int = 0  # partition
    startup_resharded: int = 0  # shard-startup: sharded states initialised at global shape
    rank: int | None = None  # reshard: the rank lowered for
    reshard_steps: list = field(default_factory=list)  # reshard: a ReshardStep per dist_op.reshard
    merged_grads: list = field(default_factory=list)  # gradient-merge: (accumulator name, type)
    resharded_grads: set = field(default_factory=set)  # parameters whose gradient the input reshards in the backward
    job_plan: Any = None  # pipeline schedulers: the JobPlan (job programs, jobs in schedule order)
    fusion: Any = None  # tensor-fusion: this rank's Fusion (buffers, pieces, the updates in order)


@record
class PassContext:
    """What the passes of one run share, and nothing else does (two runs, in one thread or in
    two, each have their own): notes for ``--explain`` (the decisions), warnings with their
    locations (:class:`~distc.syntax.diagnostics.Diagnostics`), typed statistics, the collectives
    the passes inserted (:class:`distc.dialects.collectives.Collective` records: the summaries'
    one source), the ring ids handed out (one :class:`~distc.dialects.rings.RingAllocator` per
    process simulated) and the source texts errors are located in (file name -> text)."""

    notes: list[str] = field(default_factory=list)
    stats: PassStats = field(default_factory=PassStats)
    collectives: list = field(default_factory=list)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    rings: RingAllocator = field(default_factory=RingAllocator)
    sources: dict[str, str] = field(default_factory=dict)
    # the program's OpIndex (distc.analysis.op_index) while it is fresh: set by the shard pipeline
    # for its first pass, which looks the optimizer updates up there instead of walking the program
    op_index: object = None

    def warn(self, w: DiagnosticError | str) -> None:
        """A warning (a located ``DiagnosticError`` of severity warning, or a rendered text)."""
        self.diagnostics.warn(w)

    def located(self, e: DiagnosticError, filename: str | None) -> DiagnosticError:
        """``e`` placed in ``filename`` (if it names no file yet) with that file's text."""
        name = e.filename or filename
        return e.located(filename, self.sources.get(name) if name else None)

    def fork(self) -> "PassContext":
        """A context for one rank's passes after the shared ones: its own notes, statistics,
        records and rings; the same warnings and sources."""
        return PassContext(stats=replace(self.stats, reshard_steps=[]), diagnostics=self.diagnostics,
                           sources=self.sources)


# metadata of a pass field that is not an option (set from Python, e.g. by the pipeline; not in
# ``spec()``, ``distc passes`` or ``-p``)
INTERNAL = {"internal": True}


def option_fields(cls) -> list[Field]:
    """A pass's options: its record fields but the internal ones."""
    return [f for f in fields(cls) if not f.metadata.get("internal")]


@record
class ModulePass:
    """A pass over a whole program.  Options are the record fields."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # options that name another program's file -> the attribute its Program goes in.  Passes read
    # no files: the driver loads them (:func:`distc.driver.load_inputs`) before the pipeline runs.
    inputs: ClassVar[dict[str, str]] = {}

    def apply(self, prog: Program, ctx: PassContext) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def spec(self) -> str:
        opts = []
        for f in option_fields(self):
            v = getattr(self, f.name)
            if v != f.default:
                opts.append(f"{f.name}={_fmt_opt(v)}")
        return self.name + ("{" + ",".join(opts) + "}" if opts else "")


def _fmt_opt(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _load_all() -> None:
    from . import load_passes

    load_passes()


def parse_pipeline(text: str) -> list[ModulePass]:
    """Parse ``a{x=1,y=2},b`` (an optional ``builtin.module(...)`` wrapper is accepted)."""
    _load_all()
    t = text.strip()
    if t.startswith("builtin.module(") and t.endswith(")"):
        t = t[len("builtin.module("):-1]
    out: list[ModulePass] = []
    i = 0
    n = len(t)
    while i < n:
        while i < n and t[i] in " ,":
            i += 1
        if i >= n:
            break
        j = i
        while j < n and (t[j].isalnum() or t[j] in "-_."):
            j += 1
        name = t[i:j]
        if not name:
            raise DiagnosticError(f"pipeline: expected a pass name at column {i + 1} of {text!r}")
        opts: dict[str, str] = {}
        if j < n and t[j] == "{":
            k = t.find("}", j)
            if k < 0:
                raise DiagnosticError(f"pipeline: unclosed '{{' after pass '{name}'")
            body = t[j + 1:k]
            key = None
            for part in _split_opts(body):
                if "=" in part:
                    key, val = part.split("=", 1)
                    if key.strip() in opts:
                        raise DiagnosticError(f"pipeline: option '{key.strip()}' of pass '{name}' given twice")
                    opts[key.strip()] = val.strip()
                elif key is not None:  # a list value: axis=0,1
                    opts[key] += "," + part.strip()
                elif part.strip():
                    opts[part.strip()] = "true"
            j = k + 1
        if name not in REGISTRY:
            known = ", ".join(sorted(REGISTRY))
            raise DiagnosticError(f"pipeline: unknown pass '{name}' (known passes: {known})")
        out.append(_instantiate(REGISTRY[name], opts))
        i = j
    return out


def _split_opts(body: str) -> list[str]:
    return [p for p in body.split(",")] if body.strip() else []


def _instantiate(cls: type[ModulePass], opts: dict[str, str]) -> ModulePass:
    fields = {f.name: f for f in option_fields(cls)}
    kwargs: dict[str, object] = {}
    for k, v in opts.items():
        kk = k.replace("-", "_")
        if kk not in fields:
            known = ", ".join(fields) or "none"
            raise DiagnosticError(f"pipeline: pass '{cls.name}' has no option '{k}' (options: {known})")
        f = fields[kk]
        default = f.default if f.default is not MISSING else None
        try:
            kwargs[kk] = _convert(v, default, f.type)
        except ValueError:
            raise DiagnosticError(f"pipeline: bad value {v!r} for option '{k}' of pass '{cls.name}'") from None
    return cls(**kwargs)  # type: ignore[arg-type]


def _convert(v: str, default: object, typ: object) -> object:
    t = str(typ)
    if isinstance(default, bool) or "bool" in t:
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(v)
    if isinstance(default, int) or t in ("int", "int | None"):
        return int(v)
    if "tuple" in t or "list" in t:
        return tuple(x for x in v.split(",") if x)
    return v


@record
class PassTiming:
    name: str
    seconds: float


class PassManager:
    def __init__(self, passes: list[ModulePass], *, verify_each: bool = True,
                 callback: Callable[[ModulePass, Program], None] | None = None) -> None:
        self.passes = passes
        self.verify_each = verify_each
        self.callback = callback
        self.timings: list[PassTiming] = []

    def run(self, prog: Program, ctx: PassContext | None = None) -> PassContext:
        from ..analysis.verify import verify

        ctx = ctx or PassContext()
        done: list[str] = []
        for p in self.passes:
            t0 = time.perf_counter()
            try:
                p.apply(prog, ctx)
            except DiagnosticError as e:
                if done:
                    e.notes.append(f"in pass '{p.name}' (after: {', '.join(done)})")
                else:
                    e.notes.append(f"in pass '{p.name}'")
                raise
            self.timings.append(PassTiming(p.spec(), time.perf_counter() - t0))
            done.append(p.name)
            if self.verify_each and p.name != "verify":
                t0 = time.perf_counter()
                verify(prog)
                self.timings.append(PassTiming("(verify)", time.perf_counter() - t0))
            if self.callback is not None:
                self.callback(p, prog)
        return ctx
