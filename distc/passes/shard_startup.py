"""``shard-startup{main=PATH,rank=R}``: make the startup program initialise every sharded
optimizer state at its global shape and keep only rank R's piece, as Paddle 3.3.1's
``Engine._initialize`` does (PIR mode, ``engine.py``):

1. for each ``builtin.shadow_output`` / ``builtin.set_parameter`` whose name is a
   ``pd_op.data`` of the (distributed) main program whose local shape differs from its global
   shape: the initializer's value (made a replicated dist value on that mesh if it was dense) is
   resharded, right after its defining op, to the main program's layout, and the sink takes the
   resharded value.  The initializer stops being persistable (the piece becomes it later);
2. every op without an ``op_role`` gets ``op_role`` 0 (Forward);
3. the ``reshard`` pass lowers the reshards for rank R (a slice: no communication);
4. ``dist-to-dense`` (with the removal of one-rank collectives), then the resharded values are
   made persistable again.

``stop`` ends early: ``insert`` after step 2, ``reshard`` after step 3 (Paddle's
``startup_after_reshard`` snapshot); ``final`` (default) is what Paddle hands the executor.
Parameters (``builtin.parameter`` in main) are resharded only where their layout differs from
the startup value's (ZeRO stage 3 on a startup program built without it); a value the startup
program already gives the main program's layout is left alone (Paddle's own stage-3 startup).
"""

from __future__ import annotations


from ..dialects import ops
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Program
from ..ir.dist import TensorDistAttr
from ..ir.records import field, record
from ..ir.types import DenseTensorType, DistTensorType
from ..syntax.diagnostics import DiagnosticError
from .base import INTERNAL, ModulePass, PassContext, register
from .paddle_api import PaddleAPI, set_result_dist
from .reshard_pass import ReshardPass
from .sharding_util import fail, persistable, set_persistable
from .zero3 import like_int_array

SINKS = {ops.SHADOW_OUTPUT: "output_name", ops.SET_PARAMETER: "parameter_name"}


def persistable_layouts(main: Program, params: bool = False, named=None) -> dict[str, DistTensorType]:
    """name -> type of every ``pd_op.data`` of the main program (Paddle's ``name_map_value``);
    with ``params``, of every ``builtin.parameter`` instead.  ``named``: name -> the program's
    top-level ops of that name in order, if known (an index's)."""
    out: dict[str, DistTensorType] = {}
    want, key = (ops.PARAMETER, "parameter_name") if params else (ops.DATA, "name")
    for op in (main.block.ops if named is None else named(want)):
        if op.name == want:
            a = op.attr(key)
            t = op.results[0].type if op.results else None
            if a is not None and isinstance(t, DistTensorType):
                out[str(a.value)] = t  # type: ignore[union-attr]
    return out


def insert_startup_reshards(startup: Program, layouts: dict[str, DistTensorType],
                            notes: list[str] | None = None,
                            params: dict[str, DistTensorType] | None = None) -> list[Operation]:
    """Step 1 and 2.  Returns the sink ops whose input was resharded.  ``params``: parameter
    layouts, resharded only where the startup value has another layout."""
    mk = Maker(startup.style)
    changed: list[Operation] = []
    zero3 = False  # a stage-0 startup program for a stage-3 main program: shards created as shards
    sinks = [op for op in startup.block.ops if op.name == ops.SET_PARAMETER]
    for op in sinks + [op for op in startup.block.ops if op.name in SINKS and op.name != ops.SET_PARAMETER]:
        key = SINKS[op.name]
        a = op.attr(key)
        name = str(getattr(a, "value", "")) if a is not None else ""
        t = layouts.get(name)
        is_param = t is None and params is not None and name in params
        if is_param:
            t = params[name]  # type: ignore[index]
        if t is None:
            continue
        local = t.local_shape(None)
        if tuple(local) == tuple(t.shape):
            continue
        src = op.operand(0)
        if src is None:
            continue
        st = src.type
        if is_param and isinstance(st, DistTensorType) and st.dist == t.dist:
            continue  # already initialised in the main program's layout
        if (is_param or zero3) and _create_as_shard(src, t, mk, local_shape=not is_param):
            zero3 = True
            if notes is not None:
                notes.append(f"shard-startup: '{name}' created as its shard {list(local)} "
                             f"({''.join(p.short() for p in t.dist.placements)}), never whole (stage 3)")
            continue
        if not isinstance(st, (DistTensorType, DenseTensorType)) or tuple(st.shape) != tuple(t.shape):
            raise fail(op, f"startup value '{name}' has type {st}, but the main program reads it as "
                           f"{t} (global shapes must agree)")
        dst: TensorDistAttr = t.dist
        if not isinstance(st, DistTensorType):
            rep = mk.tensor_dist(dst.mesh, [-1] * len(st.shape))
            src.type = mk.dist_type(st.shape, st.dtype, rep)
        owner = src.owner
        cur = InsertPoint.after(owner) if owner is not None else InsertPoint.at_start(startup.block)
        r = PaddleAPI(startup.style, cur).reshard(src, dst)
        if persistable(src) and owner is not None:
            set_persistable(src, False)  # type: ignore[arg-type]
            changed.append(op)
        op.set_operand(0, r)
        if notes is not None:
            notes.append(f"shard-startup: '{name}' initialised at {list(t.shape)}, kept as "
                         f"{list(local)} ({''.join(p.short() for p in dst.placements)})")
    role = mk.i32(0)
    for op in startup.walk():
        if op.attr("op_role") is None:
            op.set_attr("op_role", role)
    return changed


def _create_as_shard(v, t: DistTensorType, mk: Maker, local_shape: bool = False) -> bool:
    """ZeRO-3 from a stage-0 startup program: a parameter created by an initializer op (``full``,
    ``uniform``, ``gaussian`` ...: operands, if any, only constants) used by nothing but its
    ``set_parameter`` is retyped to the parameter's sharded layout, as Paddle's stage-3 startup
    program has it: each rank then creates only its shard (the op keeps its attributes, the
    global ``shape`` among them), never the whole parameter and a slice of it.  An optimizer
    state (``local_shape``) is created the same way, its ``full`` given the local ``shape`` (as
    its ``pd_op.data`` in the stage-3 main program)."""
    op = v.owner
    if op is None or len(op.results) != 1 or len(v.uses) != 1 or tuple(v.type.shape) != tuple(t.shape):
        return False
    if len({t.local_shape(r) for r in t.dist.mesh.process_ids}) != 1:
        return False  # uneven pieces (Paddle fails there): created whole and sliced
    if any(x is None or x.owner is None or x.owner.name not in (ops.FULL, ops.FULL_INT_ARRAY)
           for x in op.operands):
        return False
    if op.name in (ops.FULL, ops.FULL_INT_ARRAY) or op.name in INITIALIZERS:
        if local_shape:
            if op.name != ops.FULL or op.attr("shape") is None:
                return False
            op.set_attr("shape", like_int_array(op.attr("shape"), t.local_shape(None)))
        set_result_dist(v, t.dist, mk, retype=True)
        if not isinstance(v.type, DistTensorType):
            v.type = mk.dist_type(t.shape, v.type.dtype, t.dist)
        return True
    return False


# random initializers of parameters (their operands: shape, min/max ... constants)
INITIALIZERS = frozenset({"pd_op.uniform", "pd_op.gaussian", "pd_op.truncated_gaussian_random"})


def persistable_ranks(main: Program, named=None) -> dict[str, frozenset[int]]:
    """name -> the ranks of every mesh the main program's ``pd_op.data`` / ``builtin.parameter``
    of that name lives on (a name can be on several: each pipeline stage has its learning rate).
    ``named``: as for :func:`persistable_layouts`."""
    out: dict[str, frozenset[int]] = {}
    for op in (main.block.ops if named is None else _in_order(named(ops.DATA), named(ops.PARAMETER))):
        key = "name" if op.name == ops.DATA else "parameter_name" if op.name == ops.PARAMETER else None
        t = op.results[0].type if key and op.results else None
        if key and isinstance(t, DistTensorType) and op.attr(key) is not None:
            name = str(op.attr(key).value)  # type: ignore[union-attr]
            out[name] = out.get(name, frozenset()) | frozenset(t.dist.mesh.process_ids)
    return out


def prune_other_ranks(startup: Program, rank: int, owners: dict[str, frozenset[int]] | None = None) -> list[str]:
    """Drop what the startup program initialises on meshes without ``rank`` (with the ops only it
    used), as Paddle's RemovePasses prunes the startup program for the rank: a startup program
    dumped before that pruning (several pipeline stages) then gives each rank its own part.  A
    dense value goes by its name (``owners``: ``persistable_ranks`` of the main program).
    Paddle's own per-rank ``startup_after_remove`` has nothing to drop.  Returns the names dropped."""
    dropped: list[str] = []
    for op in list(startup.block.ops):
        key = SINKS.get(op.name)
        src = op.operand(0) if key is not None and op.num_operands else None
        if src is None:
            continue
        name = str(getattr(op.attr(key), "value", ""))
        if isinstance(src.type, DistTensorType):
            ids = frozenset(src.type.dist.mesh.process_ids)
        else:
            ids = (owners or {}).get(name, frozenset())
        if not ids or rank in ids:
            continue
        dropped.append(name)
        op.erase()
        todo = [src.owner] if src.owner is not None else []
        while todo:
            o = todo.pop()
            if o.parent is None or any(r.uses for r in o.results):
                continue
            todo += [v.owner for v in o.operands if v is not None and v.owner is not None]
            o.erase()
    return dropped


def restore_persistable(changed: list[Operation]) -> None:
    for op in changed:
        v = op.operand(0)
        if v is not None and v.owner is not None:
            set_persistable(v, True)  # type: ignore[arg-type]


@record(frozen=True)
class MainLayouts:
    """What a startup program needs of the (sharded) main program, taken once for every rank:
    the layouts of its ``pd_op.data`` values (optimizer states ...), of its parameters, and the
    ranks holding each name."""

    states: dict[str, DistTensorType]
    params: dict[str, DistTensorType]
    owners: dict[str, frozenset[int]]

    @classmethod
    def of(cls, main: Program, named=None) -> "MainLayouts":
        """``named``: name -> the main program's top-level ops of that name in program order
        (e.g. from an :class:`~distc.analysis.op_index.OpIndex` of its input checks: the passes
        before add no ``pd_op.data`` nor parameter), else the block is walked."""
        return cls(persistable_layouts(main, named=named), persistable_layouts(main, params=True, named=named),
                   persistable_ranks(main, named))


def _in_order(a: list, b: list) -> list:
    """Two lists of ops of one block, each in program order, merged in program order (by source
    line: both are parsed ops; else by walking the block)."""
    if not a or not b:
        return a or b
    if all(op.loc is not None for op in a) and all(op.loc is not None for op in b):
        return sorted(a + b, key=lambda op: op.loc)
    keep = {id(op) for op in a + b}
    return [op for op in a[0].parent.ops if id(op) in keep]


def shard_startup(startup: Program, main: Program | dict[str, DistTensorType], rank: int,
                  ctx: PassContext, stop: str = "final",
                  params: dict[str, DistTensorType] | None = None,
                  owners: dict[str, frozenset[int]] | None = None) -> None:
    layouts = main if isinstance(main, dict) else persistable_layouts(main)
    if params is None and not isinstance(main, dict):
        params = persistable_layouts(main, params=True)
    if owners is None and not isinstance(main, dict):
        owners = persistable_ranks(main)
    dropped = prune_other_ranks(startup, rank, owners)
    if dropped:
        more = f" and {len(dropped) - 3} more" if len(dropped) > 3 else ""
        ctx.notes.append(f"shard-startup: rank {rank}: {len(dropped)} value(s) of other ranks' meshes not "
                         f"initialised here ({', '.join(repr(n) for n in dropped[:3])}{more})")
    changed = insert_startup_reshards(startup, layouts, ctx.notes, params)
    ctx.stats.startup_resharded = len(changed)
    if stop == "insert":
        return
    ReshardPass(rank=rank).apply(startup, ctx)
    if stop == "reshard":
        return
    from .dist_to_dense import DistToDensePass

    DistToDensePass(rank=rank).apply(startup, ctx)
    restore_persistable(changed)


@register
@record
class ShardStartupPass(ModulePass):
    name = "shard-startup"
    description = "initialise sharded optimizer states at global shape and keep rank R's piece (startup program)"

    inputs = {"main": "main_program"}  # the driver loads main=PATH into .main_program

    main: str = ""  # the distributed main program (path); or set .main_program
    rank: int = 0
    stop: str = "final"  # insert | reshard | final
    # what the pass needs of the main program, if not main=PATH (the pipeline takes it once)
    main_layouts: MainLayouts | None = field(default=None, repr=False, compare=False, metadata=INTERNAL)

    def apply(self, prog: Program, ctx: PassContext) -> None:
        lay = self.main_layouts
        if lay is None:
            main = getattr(self, "main_program", None)
            if main is None:
                raise DiagnosticError("shard-startup needs the sharded main program (main=PATH)")
            lay = MainLayouts.of(main)
        if self.stop not in ("insert", "reshard", "final"):
            raise DiagnosticError(f"shard-startup: stop must be insert, reshard or final, not '{self.stop}'")
        shard_startup(prog, lay.states, self.rank, ctx, self.stop, params=lay.params, owners=lay.owners)
