"""A numeric SPMD simulator for lowered (per-rank) PIR programs.

Every rank of a mesh gets its own lowered program (Paddle's reshard pass is rank specific: r->p
emits zeros on non-root ranks, cross-mesh copies emit ``send_v2`` on one side and ``recv_v2`` on
the other).  :func:`simulate_ranks` runs all of them in lockstep with numpy, one generator per
rank; collectives block until every rank of their group reaches them, ``send_v2`` is buffered
and ``recv_v2`` blocks until a matching send exists.  :func:`verify_reshard` builds a random
global tensor, runs a one-reshard program (``pd_op.data`` + ``dist_op.shard_tensor`` + lowered
ops) on every rank and checks the final value of every rank of the destination mesh against the
serial meaning of the destination layout.

Meaning of a distributed value (global shape G, :class:`TensorDistAttr` d) on rank r:

* a tensor axis mapped to mesh dim k is split Paddle's way over the ranks along k
  (``ceil(n/p)`` elements each, the last rank(s) hold less or nothing: :func:`split_bounds`);
* ``partial(k, OP)``: the ranks along mesh dim k hold full-size values that reduce with OP to
  the global one.  Several partial dims nest: the value is reduced over the lowest partial
  mesh dim first (the order of Paddle's nd_mesh reshard), which matters only when their reduce
  types differ and do not commute.

How ops are executed (the rules Paddle's own later passes and kernels apply):

* an op whose ``op_dist_attr`` mesh does not contain the rank is not run on it (Paddle's
  ``remove_other_rank_op_pass``); its results are *absent* there.  An op run on a rank that
  reads an absent value is an error (a dangling use);
* ops without ``op_dist_attr`` (``pd_op.full`` of an axis, ``builtin.combine``...) run where
  their operands exist;
* ``dist_op.reshard`` left in a lowered program passes its operand's local piece through (the
  fake reshard Paddle leaves next to ``send_v2``; later passes erase it and forward the value);
  every pass-through is logged in :attr:`RankValues.notes`;
* shape constants of reshape are in the global frame in a dist program (dist2dense patches
  them); the local target shape is taken from the result type.  Other constants (slice bounds,
  split sections, ``pd_op.full`` shapes) are used as written, as Paddle's kernels do;
* a collective's group is the sorted process ids of its op mesh (Paddle creates every group
  with ``new_process_group(sorted(ids))``); without an op mesh, from ``rings`` (ring_id -> ranks)
  or, failing that, from the ranks whose programs use the same ``ring_id``.  Members of one
  group should use the same ``ring_id``; Paddle's dumps do not (each process numbers its groups
  in creation order, 12, 13 ...), so a mismatch is only noted (``strict_rings=True`` makes it an
  error), while one ring id used by one rank for two different groups is an error.
  ``send_v2``/``recv_v2`` pair up by ``peer`` (the partner's index in the 2-rank group, which
  Paddle builds as ``[src, dst]``), the position of both ranks in their op meshes (Paddle pairs
  ``zip(src_mesh.process_ids, dst_mesh.process_ids)``) and ``ring_id``.

* inputs: ``pd_op.data`` by its ``name``, ``builtin.parameter`` by its ``parameter_name``
  (persistable parameters and optimizer states), as global arrays cut to the rank's piece of the
  result type; a partial result type gets random pieces that reduce to the global array; a
  mapping ``rank -> array`` instead gives every rank's local value as it is (e.g. each rank's own
  gradient contribution);
* optimizer updates (``adamw_``, ``adam_`` in their 13- and 12-operand signatures, ``momentum_``,
  ``sgd_``) compute Paddle's dense kernels elementwise on the local pieces, which must have the
  same shape; ``assign_out_(x, out)`` writes x into out (same local shape) and returns it.  The
  in-place writes are not replayed on the operand values: a later reader of a parameter sees its
  value before the step (the update is the result of ``assign_out_`` or of the update op).

Floating-point tensors are simulated in float64, integers in int64.

API: :func:`simulate_ranks` (programs by rank + global inputs -> each rank's values),
:func:`verify_reshard` (-> :class:`ReshardReport`), and the layout helpers :func:`distribute`,
:func:`expected_piece`, :func:`check_layout`, :func:`reduce_arrays`.  A co-sharded tensor axis
(placements ``[Shard(0), Shard(0)]``) is split over its mesh dims in turn, the lowest mesh dim
outermost.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from ..ir.attrs import attr_value
from ..ir.core import Operation, Program, Value
from ..ir.dist import REDUCE_TYPES, ProcessMesh, TensorDistAttr, split_bounds
from ..ir.types import DenseTensorType, DistTensorType

__all__ = [
    "SimulationError", "RankValues", "simulate_ranks", "distribute", "expected_piece",
    "check_layout", "verify_reshard", "ReshardReport", "reduce_arrays",
]


class SimulationError(Exception):
    """A lowered program cannot run (or would hang) on some rank."""

    def __init__(self, message: str, rank: int | None = None, op: Operation | None = None) -> None:
        where = ""
        if rank is not None:
            where += f"rank {rank}: "
        if op is not None:
            where += f"'{op.name}'"
            if op.loc:
                where += f" (line {op.loc[0]})"
            where += ": "
        super().__init__(where + message)
        self.rank = rank
        self.op = op
        self.message = message


_ABSENT = object()  # a value that does not exist on this rank


# ------------------------------------------------------------------------------------ dtypes
_FLOAT = ("f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2")
_INT = ("i8", "u8", "i16", "i32", "i64", "index")
_NAME_TO_SUFFIX = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "bool": "b",
    "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64",
    "complex64": "c64", "complex128": "c128",
}


def _np_dtype(dtype: str) -> np.dtype:
    d = _NAME_TO_SUFFIX.get(dtype, dtype)
    if d in _FLOAT:
        return np.dtype(np.float64)
    if d in _INT:
        return np.dtype(np.int64)
    if d == "b":
        return np.dtype(np.bool_)
    if d in ("c64", "c128"):
        return np.dtype(np.complex128)
    return np.dtype(np.float64)


# ------------------------------------------------------------------------------------ reductions
def reduce_arrays(arrays: list[np.ndarray], rtype: str | int) -> np.ndarray:
    """Reduce equally-shaped arrays with a Paddle ReduceType (name or enum value)."""
    if isinstance(rtype, int):
        rtype = REDUCE_TYPES[rtype]
    st = np.stack(arrays)
    if rtype == "SUM":
        return st.sum(0)
    if rtype == "AVG":
        return st.sum(0) / len(arrays)
    if rtype == "MAX":
        return st.max(0)
    if rtype == "MIN":
        return st.min(0)
    if rtype == "PRODUCT":
        return st.prod(0)
    if rtype == "ANY":
        return st.any(0)
    if rtype == "ALL":
        return st.all(0)
    raise ValueError(f"unknown reduce type {rtype!r}")


def _split_for_reduce(x: np.ndarray, p: int, rtype: str, rng: np.random.Generator) -> list[np.ndarray]:
    """``p`` random arrays that reduce with ``rtype`` to ``x``."""
    if p == 1:
        return [x.copy()]
    shape = (p - 1,) + x.shape
    if rtype in ("SUM", "AVG"):
        target = x * p if rtype == "AVG" else x
        if x.dtype.kind in "iu":
            r = rng.integers(-5, 6, size=shape).astype(x.dtype)
        else:
            r = rng.standard_normal(shape)
        return [*r, target - r.sum(0)]
    if rtype in ("MAX", "MIN", "ANY", "ALL"):
        owner = rng.integers(0, p, size=x.shape)
        out = []
        for i in range(p):
            if rtype == "ANY":
                other = np.zeros_like(x, dtype=bool)
            elif rtype == "ALL":
                other = np.ones_like(x, dtype=bool)
            else:
                delta = rng.uniform(0.25, 2.0, size=x.shape)
                if x.dtype.kind in "iu":
                    delta = np.ceil(delta).astype(x.dtype)
                other = x - delta if rtype == "MAX" else x + delta
            out.append(np.where(owner == i, x, other))
        return out
    if rtype == "PRODUCT":
        r = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        return [*r, x / r.prod(0)]
    raise ValueError(f"cannot build partial values for reduce type {rtype!r}")


# ------------------------------------------------------------------------------------ layouts
def _coords(mesh: ProcessMesh, rank: int) -> tuple[int, ...]:
    return mesh.coord(rank)


def _shard_index(dist: TensorDistAttr, shape: tuple[int, ...], rank: int) -> tuple[slice, ...]:
    """The rank's slice of every tensor axis.  A tensor axis sharded over several mesh dims
    (co-sharding, placements ``[Shard(0), Shard(0)]``) is split over them in mesh-dim order:
    first over the lower mesh dim, then each part over the next."""
    c = _coords(dist.mesh, rank)
    bounds = [(0, n) for n in shape]
    for md, pl in enumerate(dist.placements):
        if pl.kind != "S":
            continue
        lo, hi = bounds[pl.dim]
        a, b = split_bounds(hi - lo, dist.mesh.shape[md], c[md])
        bounds[pl.dim] = (lo + a, lo + b)
    return tuple(slice(lo, hi) for lo, hi in bounds)


def expected_piece(global_value: np.ndarray, dist: TensorDistAttr, rank: int) -> np.ndarray:
    """The rank's piece of a non-partial layout (partial dims are ignored: full-size piece)."""
    return global_value[_shard_index(dist, global_value.shape, rank)]


def distribute(global_value: np.ndarray, dist: TensorDistAttr, rng: np.random.Generator | int = 0) -> dict[int, np.ndarray]:
    """Every rank's local piece of ``global_value`` under ``dist``; partial dims get random
    values that reduce to the global value."""
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    mesh = dist.mesh
    pdims = sorted(dict(dist.partial).items())
    pieces: dict[tuple[int, ...], np.ndarray] = {(): global_value}
    # split over the highest partial dim first, so that reducing the lowest first undoes it
    for md, rtype in reversed(pdims):
        nxt = {}
        for key, arr in pieces.items():
            for i, a in enumerate(_split_for_reduce(arr, mesh.shape[md], rtype, rng)):
                nxt[key + (i,)] = a
        pieces = nxt
    out = {}
    for r in mesh.process_ids:
        c = _coords(mesh, r)
        arr = pieces[tuple(c[md] for md, _ in reversed(pdims))]
        out[r] = np.array(arr[_shard_index(dist, global_value.shape, r)], copy=True)
    return out


def check_layout(pieces: Mapping[int, Any], global_value: np.ndarray, dist: TensorDistAttr, *,
                 rtol: float = 1e-7, atol: float = 1e-7) -> list[str]:
    """Problems (empty if none) with ``pieces`` (rank -> local array) as the layout ``dist`` of
    ``global_value``: shard pieces must equal the rank's slice; partial pieces must reduce to it."""
    mesh = dist.mesh
    problems: list[str] = []
    missing = [r for r in mesh.process_ids if r not in pieces or pieces[r] is None]
    if missing:
        return [f"no value on ranks {missing}"]
    pdims = sorted(dict(dist.partial).items())
    groups: dict[tuple, list[tuple[tuple[int, ...], int]]] = {}
    for r in mesh.process_ids:
        c = _coords(mesh, r)
        key = tuple(ci for k, ci in enumerate(c) if k not in dict(pdims))
        groups.setdefault(key, []).append((tuple(c[md] for md, _ in pdims), r))
    for key, members in groups.items():
        r0 = members[0][1]
        want = global_value[_shard_index(dist, global_value.shape, r0)]
        arrays = {pc: np.asarray(pieces[r]) for pc, r in members}
        bad_shape = [(r, arrays[pc].shape) for pc, r in members if arrays[pc].shape != want.shape]
        if bad_shape:
            for r, s in bad_shape:
                problems.append(f"rank {r}: local shape {list(s)}, expected {list(want.shape)}")
            continue
        # reduce over the partial dims, lowest mesh dim first
        level = dict(arrays)
        for j in range(len(pdims)):
            rtype = pdims[j][1]
            nxt: dict[tuple, list] = {}
            for pc, a in sorted(level.items()):
                nxt.setdefault(pc[1:], []).append(a)
            level = {k: reduce_arrays(v, rtype) for k, v in nxt.items()}
        got = level[()]
        if not _close(got, want, rtol, atol):
            ranks = [r for _, r in members]
            what = "reduced value of ranks" if pdims else "value on rank"
            err = _max_err(got, want)
            problems.append(f"{what} {ranks if pdims else ranks[0]} differs from the expected piece "
                            f"(max abs error {err:.3g})")
    return problems


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype == bool or b.dtype == bool:
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=rtol, atol=atol))


def _max_err(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


# ------------------------------------------------------------------------------------ requests
@dataclass
class _Coll:
    kind: str  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast
    op: Operation
    rank: int
    group: tuple[int, ...]
    ring: int | None
    data: np.ndarray
    attrs: dict


@dataclass
class _Send:
    op: Operation
    rank: int
    ring: int | None
    peer: int
    data: np.ndarray
    to: int | None  # resolved partner, when known

    @property
    def pos(self) -> int | None:
        return _mesh_pos(self.op, self.rank)


@dataclass
class _Recv:
    op: Operation
    rank: int
    ring: int | None
    peer: int
    src: int | None

    @property
    def pos(self) -> int | None:
        return _mesh_pos(self.op, self.rank)


def _mesh_pos(op: Operation, rank: int) -> int | None:
    d = op.dist_attr
    if d is None or rank not in d.mesh.process_ids:
        return None
    return d.mesh.process_ids.index(rank)


# ------------------------------------------------------------------------------------ results
class RankValues(dict):
    """One rank's simulated values: ``Value -> ndarray`` (vectors are lists), and also the
    printed names (``"%3"``).  ``final`` is the rank's result value (see :func:`final_value`),
    ``notes`` what the simulator noticed (pass-throughs, type/shape disagreements)."""

    def __init__(self, rank: int, program: Program) -> None:
        super().__init__()
        self.rank = rank
        self.program = program
        self.notes: list[str] = []
        self.executed: list[Operation] = []

    def get_value(self, v: Value):
        x = dict.get(self, v, _ABSENT)
        return None if x is _ABSENT else x


# ------------------------------------------------------------------------------------ executor
def _int_list(x) -> list[int]:
    if isinstance(x, np.ndarray):
        return [int(v) for v in x.reshape(-1)]
    if isinstance(x, (list, tuple)):
        return [int(v) for v in x]
    return [int(x)]


def _scalar(x) -> float:
    if isinstance(x, np.ndarray):
        return x.reshape(-1)[0].item()
    return x


def _attr(op: Operation, key: str, default=None):
    a = op.attrs.get(key)
    return default if a is None else attr_value(a)


def _local_shape(t, rank: int) -> tuple[int, ...] | None:
    if isinstance(t, DistTensorType):
        if rank in t.dist.mesh.process_ids or not t.dist.dims_mapping:
            return t.local_shape(rank)
        return t.local_shape(None)
    if isinstance(t, DenseTensorType):
        return t.shape
    return None


def _norm_axis(a: int, nd: int) -> int:
    return a + nd if a < 0 else a


_BINARY: dict[str, Callable] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": None,
    "maximum": np.maximum, "minimum": np.minimum, "elementwise_pow": np.power,
}

_COLLECTIVES = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "c_allgather": "all_gather",
    "c_reducescatter": "reduce_scatter", "broadcast": "broadcast", "c_broadcast": "broadcast",
    "c_allreduce_sum": "all_reduce", "c_allreduce_max": "all_reduce", "c_allreduce_min": "all_reduce",
    "c_allreduce_prod": "all_reduce", "c_allreduce_avg": "all_reduce",
}
_C_REDUCE = {"c_allreduce_sum": 0, "c_allreduce_max": 1, "c_allreduce_min": 2, "c_allreduce_prod": 3,
             "c_allreduce_avg": 4}


class _RankRunner:
    def __init__(self, sim: "_Simulator", rank: int, prog: Program) -> None:
        self.sim = sim
        self.rank = rank
        self.prog = prog
        self.env = RankValues(rank, prog)
        self.shard_count = 0

    # -- helpers ---------------------------------------------------------------------------
    def err(self, op: Operation, msg: str) -> SimulationError:
        return SimulationError(msg, self.rank, op)

    def val(self, op: Operation, i: int):
        v = op.operand(i)
        if v is None:
            return None
        x = dict.get(self.env, v, _ABSENT)
        return x

    def set(self, op: Operation, outs) -> None:
        for r, x in zip(op.results, outs):
            if x is _ABSENT:  # values that do not exist on this rank are left out
                continue
            dict.__setitem__(self.env, r, x)
            if r.name is not None:
                dict.__setitem__(self.env, "%" + r.name, x)
            if x is not _ABSENT and isinstance(x, np.ndarray) and self.sim.check_types:
                want = _local_shape(r.type, self.rank)
                if want is not None and all(d >= 0 for d in want) and tuple(want) != x.shape:
                    self.env.notes.append(
                        f"{op.name}{' line %d' % op.loc[0] if op.loc else ''}: result {r.index} holds "
                        f"{list(x.shape)} but its type says local {list(want)}")

    def runs_here(self, op: Operation) -> bool:
        d = op.dist_attr
        if d is None or not d.mesh.process_ids:
            return True
        if op.name == "dist_op.reshard":
            return True
        return self.rank in d.mesh.process_ids

    # -- the generator ---------------------------------------------------------------------
    def run(self) -> Iterator:
        for op in self.prog.ops:
            if op.regions:
                raise self.err(op, "ops with regions are not supported by the simulator")
            if not self.runs_here(op):
                self.set(op, [_ABSENT] * op.num_results)
                continue
            vals = [self.val(op, i) for i in range(op.num_operands)]
            if any(x is _ABSENT for x in vals):
                if op.dist_attr is not None and op.name != "dist_op.reshard":
                    bad = [i for i, x in enumerate(vals) if x is _ABSENT]
                    raise self.err(op, f"operand(s) {bad} are not computed on this rank "
                                       f"(their producers do not run here)")
                self.set(op, [_ABSENT] * op.num_results)
                continue
            short = op.name.split(".", 1)[1] if "." in op.name else op.name
            base = short[:-1] if short.endswith("_") and short not in ("share_data_",) else short
            if base in _COLLECTIVES or base in ("send_v2", "recv_v2", "p_send", "p_recv"):
                outs = yield from self.comm(op, base, vals)
            else:
                outs = self.compute(op, base, vals)
            self.env.executed.append(op)
            self.set(op, outs)

    # -- communication ---------------------------------------------------------------------
    def comm(self, op: Operation, base: str, vals: list) -> Iterator:
        ring = _attr(op, "ring_id")
        if base in ("send_v2", "p_send"):
            x = np.asarray(vals[0])
            peer = int(_attr(op, "peer", 0))
            to = self.sim.p2p_partner(ring, peer, self.rank)
            yield _Send(op, self.rank, ring, peer, x.copy(), to)
            return []
        if base in ("recv_v2", "p_recv"):
            peer = int(_attr(op, "peer", 0))
            src = self.sim.p2p_partner(ring, peer, self.rank)
            data, sender = yield _Recv(op, self.rank, ring, peer, src)
            out_shape = _attr(op, "out_shape")
            if out_shape is not None and all(int(d) >= 0 for d in out_shape) and list(data.shape) != [int(d) for d in out_shape]:
                raise self.err(op, f"received {list(data.shape)} from rank {sender}, "
                               f"but out_shape is {list(out_shape)}")
            dt = _attr(op, "dtype")
            if dt is not None:
                data = data.astype(_np_dtype(str(dt)))
            return [data]
        kind = _COLLECTIVES[base]
        group = self.sim.group_of(op, self.rank, ring)
        nranks = _attr(op, "nranks")
        if nranks is not None and int(nranks) != len(group):
            raise self.err(op, f"nranks {nranks} but the group {list(group)} has {len(group)} ranks")
        attrs = {}
        if kind == "all_reduce":
            attrs["reduce_type"] = _C_REDUCE.get(base, _attr(op, "reduce_type", 0))
        if kind == "broadcast":
            attrs["root"] = int(_attr(op, "root", 0))
        data = yield _Coll(kind, op, self.rank, group, ring, np.asarray(vals[0]), attrs)
        return [data] + [None] * (op.num_results - 1)

    # -- local ops -------------------------------------------------------------------------
    def compute(self, op: Operation, base: str, vals: list) -> list:
        rank = self.rank
        name = op.name
        if name in ("pd_op.data", "builtin.parameter"):
            return [self._input(op, _attr(op, "name" if name == "pd_op.data" else "parameter_name"))]
        if name == "dist_op.shard_tensor":
            t = op.results[0].type
            if not isinstance(t, DistTensorType):
                raise self.err(op, "result is not a dist tensor")
            k = self.shard_count
            self.shard_count += 1
            if rank not in t.dist.mesh.process_ids:
                # Paddle's global-to-sub-mesh reshard retypes the producer in place: the value
                # lives on the sub-mesh only
                return [_ABSENT]
            pieces = self.sim.shard(k, vals[0], t.dist)
            return [pieces[rank]]
        if name == "builtin.combine":
            return [list(vals)]
        if name == "builtin.split":
            xs = list(vals[0])
            if len(xs) != op.num_results:
                raise self.err(op, f"vector of {len(xs)} split into {op.num_results} results")
            return xs
        if name == "builtin.slice":
            return [vals[0][int(_attr(op, "index"))]]
        if name == "dist_op.reshard":
            t = op.results[0].type
            if isinstance(t, DistTensorType) and rank in t.dist.mesh.process_ids:
                self.env.notes.append(f"dist_op.reshard{' line %d' % op.loc[0] if op.loc else ''} "
                                      f"passed through on rank {rank}, which is in its destination mesh")
            return [vals[0]]
        if base in ("full",):
            dtype = _np_dtype(str(_attr(op, "dtype", "float32")))
            # used as written: dist2dense patches data and reshape shapes only, not full's
            shape = tuple(int(s) for s in (_attr(op, "shape", []) or []))
            return [np.full(shape, _attr(op, "value", 0), dtype=dtype)]
        if base == "full_int_array":
            return [np.array(_int_list(_attr(op, "value", [])), dtype=np.int64)]
        if base in ("full_like",):
            dtype = str(_attr(op, "dtype", "Undefined"))
            x = np.asarray(vals[0])
            val = _scalar(vals[1]) if len(vals) > 1 and vals[1] is not None else _attr(op, "value", 0)
            return [np.full(x.shape, val, dtype=x.dtype if dtype in ("Undefined", "undefined") else _np_dtype(dtype))]
        if base in ("assign", "share_data", "share_data_", "memcpy", "identity"):
            return [np.array(vals[0], copy=True)]
        if base == "cast":
            return [np.asarray(vals[0]).astype(_np_dtype(str(_attr(op, "dtype"))))]
        if base == "transpose":
            perm = _int_list(_attr(op, "perm"))
            return [np.transpose(vals[0], perm)]
        if base == "slice":
            return [self._slice(op, vals)]
        if base == "split_with_num":
            x = np.asarray(vals[0])
            num = int(_attr(op, "num"))
            axis = _norm_axis(int(_scalar(vals[1])) if len(vals) > 1 and vals[1] is not None else int(_attr(op, "axis", 0)), x.ndim)
            if x.shape[axis] % num:
                raise self.err(op, f"cannot split extent {x.shape[axis]} of axis {axis} into {num} equal parts")
            return [list(np.split(x, num, axis=axis))]
        if base == "split":
            x = np.asarray(vals[0])
            sections = _int_list(vals[1]) if len(vals) > 1 and vals[1] is not None else _int_list(_attr(op, "sections"))
            axis = _norm_axis(int(_scalar(vals[2])) if len(vals) > 2 and vals[2] is not None else int(_attr(op, "axis", 0)), x.ndim)
            n = x.shape[axis]
            if sections.count(-1) == 1:
                sections[sections.index(-1)] = n - (sum(sections) + 1)
            if sum(sections) != n or any(s < 0 for s in sections):
                raise self.err(op, f"sections {sections} do not add up to extent {n} of axis {axis} "
                                   f"(local shape {list(x.shape)})")
            cuts = list(itertools.accumulate(sections))[:-1]
            return [list(np.split(x, cuts, axis=axis))]
        if base == "concat":
            xs = [np.asarray(a) for a in vals[0]]
            axis = int(_scalar(vals[1])) if len(vals) > 1 and vals[1] is not None else int(_attr(op, "axis", 0))
            axis = _norm_axis(axis, xs[0].ndim)
            shapes = [list(a.shape) for a in xs]
            for a in xs[1:]:
                if a.ndim != xs[0].ndim or any(a.shape[d] != xs[0].shape[d] for d in range(a.ndim) if d != axis):
                    raise self.err(op, f"cannot concatenate shapes {shapes} on axis {axis}")
            return [np.concatenate(xs, axis=axis)]
        if base == "reshape":
            return [self._reshape(op, vals)]
        if base == "scale":
            x = np.asarray(vals[0])
            s = _scalar(vals[1]) if len(vals) > 1 and vals[1] is not None else _attr(op, "scale", 1.0)
            b = _attr(op, "bias", 0.0)
            if _attr(op, "bias_after_scale", True):
                return [x * s + b]
            return [(x + b) * s]
        if base == "pad":
            x = np.asarray(vals[0])
            pads = _int_list(_attr(op, "paddings"))
            pv = _scalar(vals[1]) if len(vals) > 1 and vals[1] is not None else _attr(op, "pad_value", 0.0)
            if len(pads) != 2 * x.ndim:
                raise self.err(op, f"paddings {pads} do not fit rank {x.ndim}")
            return [np.pad(x, [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)], constant_values=pv)]
        if base in _BINARY:
            a, b = np.asarray(vals[0]), np.asarray(vals[1])
            try:
                if base == "divide":
                    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
                        return [np.floor_divide(a, b)]
                    return [a / b]
                return [_BINARY[base](a, b)]
            except ValueError as e:
                raise self.err(op, f"shapes {list(a.shape)} and {list(b.shape)}: {e}") from None
        if base in ("zeros_like", "ones_like"):
            x = np.asarray(vals[0])
            return [np.zeros_like(x) if base == "zeros_like" else np.ones_like(x)]
        if name == "pd_op.assign_out_":
            x, out = np.asarray(vals[0]), np.asarray(vals[1])
            if x.shape != out.shape:
                raise self.err(op, f"writes local {list(x.shape)} into a value of local {list(out.shape)}")
            return [np.array(x, dtype=out.dtype, copy=True)]
        if base in _OPTIMIZERS:
            return _OPTIMIZERS[base](self, op, vals)
        raise self.err(op, "the simulator does not know this op")

    def _input(self, op: Operation, key) -> np.ndarray:
        """The rank's value of a ``pd_op.data`` (by ``name``) or ``builtin.parameter`` (by
        ``parameter_name``): a global array is cut to the rank's piece of the result type (a
        partial type gets random pieces that reduce to it, fixed by ``seed``); a mapping
        ``rank -> array`` gives every rank's local value as it is."""
        if key not in self.sim.inputs:
            raise self.err(op, f"no input named {key!r}")
        x = self.sim.inputs[key]
        t = op.results[0].type
        if isinstance(x, Mapping):
            if self.rank not in x:
                raise self.err(op, f"input {key!r} is given per rank, but not for rank {self.rank}")
            x = np.asarray(x[self.rank])
        else:
            x = np.asarray(x)
            if isinstance(t, DistTensorType) and x.shape == tuple(t.shape):
                if t.dist.partial:
                    x = self.sim.input_pieces(str(key), x, t.dist)[self.rank]
                elif not t.dist.is_replicated():
                    x = expected_piece(x, t.dist, self.rank)
        return x.astype(_np_dtype(t.dtype)) if hasattr(t, "dtype") else x

    def _slice(self, op: Operation, vals: list) -> np.ndarray:
        x = np.asarray(vals[0])
        axes = _int_list(_attr(op, "axes"))
        starts = _int_list(vals[1]) if len(vals) > 1 and vals[1] is not None else _int_list(_attr(op, "starts"))
        ends = _int_list(vals[2]) if len(vals) > 2 and vals[2] is not None else _int_list(_attr(op, "ends"))
        if len(starts) == 1 and len(axes) > 1:
            starts = starts * len(axes)
        if len(ends) == 1 and len(axes) > 1:
            ends = ends * len(axes)
        idx = [slice(None)] * x.ndim
        for a, s, e in zip(axes, starts, ends):
            a = _norm_axis(a, x.ndim)
            n = x.shape[a]
            s = s + n if s < 0 else s
            e = e + n if e < 0 else e
            s = min(max(s, 0), n)
            e = min(max(e, 0), n)
            idx[a] = slice(s, max(s, e))
        out = x[tuple(idx)]
        dec = _int_list(_attr(op, "decrease_axis", []) or [])
        if dec:
            out = out.reshape([d for i, d in enumerate(out.shape) if i not in {_norm_axis(a, x.ndim) for a in dec}])
        return np.array(out, copy=True)

    def _reshape(self, op: Operation, vals: list) -> np.ndarray:
        x = np.asarray(vals[0])
        t = op.results[0].type
        if isinstance(t, DistTensorType):
            want = _local_shape(t, self.rank)
            if want is not None and int(np.prod(want)) == x.size and all(d >= 0 for d in want):
                return x.reshape(want)
        shape = _int_list(vals[1]) if len(vals) > 1 and vals[1] is not None else _int_list(_attr(op, "shape"))
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        try:
            return x.reshape(shape)
        except ValueError:
            raise self.err(op, f"cannot reshape local {list(x.shape)} to {shape}") from None


# ------------------------------------------------------------------------------------ optimizers
# The dense update kernels of Paddle's optimizer ops (phi's AdamDenseKernel/AdamWDenseKernel,
# MomentumDenseKernel, SGDDenseKernel; the formulas in paddle/optimizer/*.py and
# phi/kernels/funcs/adam_functors.h, impl/momentum_kernel_impl.h), elementwise on the rank's
# local pieces.  Results follow the op's in-place order; a result whose operand is absent
# (``<<NULL VALUE>>``: no master weight, no moment2_max) is None.  In float64 a master weight and
# the parameter are the same number: with a master weight the update reads it, and writes both.
def _opt_scalar(runner: "_RankRunner", op: Operation, x, key: str, default=None) -> float:
    """A scalar operand (``beta1``... tensors, the learning rate), else the attribute ``key``."""
    if x is not None:
        a = np.asarray(x)
        if a.size != 1:
            raise runner.err(op, f"{key} should hold one element, it has local shape {list(a.shape)}")
        return float(a.reshape(-1)[0])
    v = _attr(op, key, default)
    if v is None:
        raise runner.err(op, f"no {key} operand or attribute")
    return float(v)


def _elementwise(runner: "_RankRunner", op: Operation, named: dict[str, Any]) -> dict[str, np.ndarray]:
    """The elementwise operands of an update, which must have the same local shape (a kernel
    would not broadcast them)."""
    out = {k: np.asarray(v, dtype=np.float64) for k, v in named.items() if v is not None}
    shapes = {k: list(v.shape) for k, v in out.items()}
    if len({tuple(v) for v in shapes.values()}) > 1:
        desc = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise runner.err(op, f"update of pieces with different local shapes ({desc})")
    return out


def _skip(x) -> bool:
    return x is not None and bool(np.asarray(x).reshape(-1)[0])


def _copy(x):
    return None if x is None else np.array(x, copy=True)


def _adam_kernel(runner: "_RankRunner", op: Operation, vals: list) -> list:
    """``adam_``/``adamw_``: 13 operands (param, grad, learning_rate, moment1, moment2,
    moment2_max, beta1_pow, beta2_pow, master_param, skip_update, beta1, beta2, epsilon) or the
    2024 12 (no moment2_max).  With t the step of the beta powers::

        adamw only: lr = lr * lr_ratio; p = p - lr * coeff * p      (if with_decay)
        m1 = beta1 m1 + (1 - beta1) g;   m2 = beta2 m2 + (1 - beta2) g^2
        amsgrad: m2max = max(m2max, m2), used for m2 below
        p = p - lr sqrt(1 - beta2_pow) / (1 - beta1_pow) * m1 / (sqrt(m2) + eps sqrt(1 - beta2_pow))
        beta{1,2}_pow = beta{1,2}_pow * beta{1,2}   (unless use_global_beta_pow)

    ``skip_update`` true: every output is its input.  lazy_mode only concerns sparse gradients."""
    n = op.num_operands
    if n not in (12, 13):
        raise runner.err(op, f"{n} operands: the simulator knows the 12- and 13-operand signatures")
    param, grad, lr, m1, m2 = vals[:5]
    m2max = vals[5] if n == 13 else None
    b1p, b2p, master, skip, beta1_t, beta2_t, eps_t = vals[n - 7:]
    amsgrad = bool(_attr(op, "amsgrad", False))
    outs_in = [param, m1, m2] + ([m2max] if n == 13 else []) + [b1p, b2p, master]
    if _skip(skip):
        return [_copy(x) for x in outs_in]
    if amsgrad and m2max is None:
        raise runner.err(op, "amsgrad without a moment2_max operand")
    beta1 = _opt_scalar(runner, op, beta1_t, "beta1")
    beta2 = _opt_scalar(runner, op, beta2_t, "beta2")
    eps = _opt_scalar(runner, op, eps_t, "epsilon")
    lr_v = _opt_scalar(runner, op, lr, "learning_rate")
    pow1 = _opt_scalar(runner, op, b1p, "beta1_pow")
    pow2 = _opt_scalar(runner, op, b2p, "beta2_pow")
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "moment1": m1, "moment2": m2,
                                  "moment2_max": m2max if amsgrad else None})
    p, g = e["param"], e["grad"]
    if op.name.split(".")[-1].rstrip("_") == "adamw":
        lr_v *= float(_attr(op, "lr_ratio", 1.0))
        if bool(_attr(op, "with_decay", False)):
            p = p - lr_v * float(_attr(op, "coeff", 0.01)) * p
    m1_out = beta1 * e["moment1"] + (1 - beta1) * g
    m2_out = beta2 * e["moment2"] + (1 - beta2) * g * g
    m2max_out = np.maximum(e["moment2_max"], m2_out) if amsgrad else None
    denom = np.sqrt(m2max_out if amsgrad else m2_out) + eps * np.sqrt(1 - pow2)
    p_out = p - lr_v * np.sqrt(1 - pow2) / (1 - pow1) * (m1_out / denom)
    if bool(_attr(op, "use_global_beta_pow", False)):
        b1p_out, b2p_out = _copy(b1p), _copy(b2p)
    else:
        b1p_out = np.asarray(b1p, dtype=np.float64) * beta1
        b2p_out = np.asarray(b2p, dtype=np.float64) * beta2
    outs = [p_out, m1_out, m2_out] + ([_copy(m2max) if m2max_out is None else m2max_out] if n == 13 else [])
    return outs + [b1p_out, b2p_out, None if master is None else p_out.copy()]


def _momentum_kernel(runner: "_RankRunner", op: Operation, vals: list) -> list:
    """``momentum_`` (param, grad, velocity, learning_rate, master_param)::

        g = g * rescale_grad;  g = g + regularization_coeff * p   (regularization_method l2_decay)
        v = mu v + g
        p = p - lr (g + mu v)   (use_nesterov)   else   p = p - lr v

    (rescale_grad as the GPU kernel applies it; Paddle's CPU kernel ignores it.)"""
    if op.num_operands != 5:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 5-operand momentum_")
    param, grad, vel, lr, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "velocity": vel})
    p, g = e["param"], e["grad"] * float(_attr(op, "rescale_grad", 1.0))
    if str(_attr(op, "regularization_method", "")) == "l2_decay":
        g = g + float(_attr(op, "regularization_coeff", 0.0)) * p
    mu = float(_attr(op, "mu"))
    lr_v = _opt_scalar(runner, op, lr, "learning_rate")
    v_out = mu * e["velocity"] + g
    p_out = p - lr_v * (g + mu * v_out) if bool(_attr(op, "use_nesterov", False)) else p - lr_v * v_out
    return [p_out, v_out, None if master is None else p_out.copy()]


def _sgd_kernel(runner: "_RankRunner", op: Operation, vals: list) -> list:
    """``sgd_`` (param, learning_rate, grad, master_param): p = p - lr g."""
    if op.num_operands != 4:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 4-operand sgd_")
    param, lr, grad, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad})
    p_out = e["param"] - _opt_scalar(runner, op, lr, "learning_rate") * e["grad"]
    return [p_out, None if master is None else p_out.copy()]


_OPTIMIZERS: dict[str, Callable] = {
    "adam": _adam_kernel, "adamw": _adam_kernel, "momentum": _momentum_kernel, "sgd": _sgd_kernel,
}


# ------------------------------------------------------------------------------------ scheduler
class _Simulator:
    def __init__(self, programs: Mapping[int, Program], inputs: Mapping[str, Any], seed: int,
                 rings: Mapping[int, Iterable[int]] | None, check_types: bool, strict_rings: bool) -> None:
        self.programs = dict(programs)
        self.inputs = dict(inputs)
        self.seed = seed
        self.rings = {int(k): tuple(sorted(v)) for k, v in (rings or {}).items()}
        self.check_types = check_types
        self.strict_rings = strict_rings
        self._shards: dict[tuple, dict[int, np.ndarray]] = {}
        self._ring_users: dict[int, set[int]] | None = None
        self.ring_groups: dict[int, dict[int, tuple[int, ...]]] = {}
        self.ring_notes: list[tuple[list[int], str]] = []

    # -- groups ----------------------------------------------------------------------------
    def shard(self, k: int, x, dist: TensorDistAttr) -> dict[int, np.ndarray]:
        key = (k, dist.mesh, dist.dims_mapping, dist.partial)
        if key not in self._shards:
            rng = np.random.default_rng([self.seed, k, 7])
            self._shards[key] = distribute(np.asarray(x), dist, rng)
        return self._shards[key]

    def input_pieces(self, key: str, x, dist: TensorDistAttr) -> dict[int, np.ndarray]:
        """Every rank's piece of a partial input (random, reproducible from ``seed`` and the name)."""
        k = ("input", key, dist.mesh, dist.dims_mapping, dist.partial)
        if k not in self._shards:
            rng = np.random.default_rng([self.seed, zlib.crc32(key.encode()), 11])
            self._shards[k] = distribute(np.asarray(x), dist, rng)
        return self._shards[k]

    def ring_users(self, ring: int) -> tuple[int, ...]:
        if self._ring_users is None:
            self._ring_users = {}
            for r, p in self.programs.items():
                for op in p.walk():
                    a = op.attrs.get("ring_id")
                    if a is not None:
                        self._ring_users.setdefault(int(attr_value(a)), set()).add(r)
        return tuple(sorted(self._ring_users.get(ring, ())))

    def group_of(self, op: Operation, rank: int, ring) -> tuple[int, ...]:
        d = op.dist_attr
        if d is not None and rank in d.mesh.process_ids:
            g = tuple(sorted(d.mesh.process_ids))
            if ring is not None and int(ring) in self.rings and self.rings[int(ring)] != g:
                raise SimulationError(f"ring_id {ring} is group {list(self.rings[int(ring)])} but the op mesh "
                                      f"says {list(g)}", rank, op)
            return g
        if ring is not None and int(ring) in self.rings:
            return self.rings[int(ring)]
        if ring is not None:
            return self.ring_users(int(ring))
        raise SimulationError("cannot tell the group of this collective (no op mesh, no ring_id)", rank, op)

    def p2p_partner(self, ring, peer: int, rank: int) -> int | None:
        if ring is not None and int(ring) in self.rings:
            g = self.rings[int(ring)]
            if peer >= len(g):
                raise SimulationError(f"peer {peer} is outside ring {ring} = {list(g)}", rank)
            return g[peer]
        return None

    # -- main loop -------------------------------------------------------------------------
    def run(self) -> dict[int, RankValues]:
        runners = {r: _RankRunner(self, r, p) for r, p in sorted(self.programs.items())}
        gens = {r: rr.run() for r, rr in runners.items()}
        waiting: dict[int, Any] = {}
        done: set[int] = set()
        sends: list[_Send] = []

        def step(r: int, reply=None) -> None:
            try:
                req = gens[r].send(reply) if r in waiting or reply is not None else next(gens[r])
            except StopIteration:
                waiting.pop(r, None)
                done.add(r)
                return
            waiting[r] = req

        for r in runners:
            step(r)

        def receives(stuck: bool) -> bool:
            moved = False
            for r in sorted(waiting):
                req = waiting.get(r)
                if isinstance(req, _Recv):
                    s = self._match(req, sends, stuck)
                    if s is not None:
                        sends.remove(s)
                        moved = True
                        step(r, (s.data.copy(), s.rank))
                        if stuck:
                            return True
            return moved

        while len(done) < len(runners):
            progressed = False
            # buffered sends
            for r in sorted(waiting):
                req = waiting.get(r)
                if isinstance(req, _Send):
                    sends.append(req)
                    progressed = True
                    step(r, [])
            progressed |= receives(False)
            # collectives
            colls = {r: q for r, q in waiting.items() if isinstance(q, _Coll)}
            seen_groups = set()
            for r, q in sorted(colls.items()):
                if q.group in seen_groups:
                    continue
                seen_groups.add(q.group)
                members = [colls.get(m) for m in q.group]
                if any(m is None or m.group != q.group for m in members):
                    missing = [m for m in q.group if m not in self.programs]
                    if missing:
                        raise SimulationError(f"collective over group {list(q.group)}, but no program was "
                                              f"given for ranks {missing}", r, q.op)
                    continue
                replies = self._collective(members)  # type: ignore[arg-type]
                progressed = True
                for m, rep in zip(q.group, replies):
                    step(m, rep)
            if not progressed and not receives(True):
                lines = []
                for r in sorted(waiting):
                    q = waiting[r]
                    what = type(q).__name__.strip("_").lower()
                    loc = f" line {q.op.loc[0]}" if q.op.loc else ""
                    extra = f" group {list(q.group)}" if isinstance(q, _Coll) else f" ring {q.ring} peer {q.peer}"
                    lines.append(f"rank {r} waits in {q.op.name}{loc} ({what}{extra})")
                raise SimulationError("deadlock: " + "; ".join(lines))
        out = {r: rr.env for r, rr in runners.items()}
        for ranks, msg in self.ring_notes:
            for r in ranks:
                out[r].notes.append(msg)
        for s in sends:
            out[s.rank].notes.append(f"send_v2 (ring {s.ring}, peer {s.peer}) was never received")
        return out

    def _match(self, rq: _Recv, sends: list[_Send], stuck: bool) -> _Send | None:
        """The send a receive gets.  Ring ids are process-local handles (Paddle numbers groups in
        creation order, which differs between ranks), so without ``rings`` a send from s matches
        a receive on d when their ``peer`` indices agree with the sorted pair (s, d), preferring
        pairs at the same position of their op meshes (Paddle's cross-mesh copies pair
        ``zip(src_mesh.process_ids, dst_mesh.process_ids)``), then pairs with equal ring ids.
        A ring-id-only match is taken only when nothing else can progress."""
        tiers: dict[int, list[_Send]] = {}
        for s in sends:
            if rq.src is not None or s.to is not None:  # resolved through rings=
                if (rq.src is None or s.rank == rq.src) and (s.to is None or s.to == rq.rank) and \
                        (rq.src is None or s.to is None or s.ring == rq.ring):
                    tiers.setdefault(0, []).append(s)
                continue
            # the 2-rank group is [src, dst] in Paddle (unsorted): each side's ``peer`` is the
            # other's index in it, so the two indices differ
            if s.rank == rq.rank or s.peer not in (0, 1) or rq.peer not in (0, 1) or s.peer == rq.peer:
                continue
            same_pos = s.pos is not None and s.pos == rq.pos
            same_ring = s.ring == rq.ring
            if same_pos and same_ring:
                tiers.setdefault(0, []).append(s)
            elif same_pos:
                tiers.setdefault(1, []).append(s)
            elif same_ring:
                tiers.setdefault(2, []).append(s)
        for t in sorted(tiers):
            if t == 2 and not stuck:
                return None
            cands = tiers[t]
            if len({c.rank for c in cands}) > 1:
                raise SimulationError(f"recv_v2 (ring {rq.ring}, peer {rq.peer}) could match sends of ranks "
                                      f"{sorted({c.rank for c in cands})}; pass rings= to disambiguate",
                                      rq.rank, rq.op)
            return cands[0]
        return None

    def _collective(self, members: list[_Coll]) -> list:
        q0 = members[0]
        kinds = {m.kind for m in members}
        if len(kinds) > 1:
            desc = ", ".join(f"rank {m.rank}: {m.op.name}" for m in members)
            raise SimulationError(f"mismatched collectives on group {list(q0.group)}: {desc}")
        for m in members:  # within one rank, a ring id is one communicator
            seen = self.ring_groups.setdefault(m.rank, {})
            if m.ring is not None and seen.setdefault(m.ring, m.group) != m.group:
                raise SimulationError(f"ring_id {m.ring} is used for group {list(seen[m.ring])} and for "
                                      f"group {list(m.group)}", m.rank, m.op)
        rings = {m.ring for m in members}
        if len(rings) > 1:
            desc = ", ".join(f"rank {m.rank}: ring_id {m.ring}" for m in members)
            msg = f"{q0.op.name} on group {list(q0.group)} uses different ring ids ({desc})"
            if self.strict_rings:
                raise SimulationError(msg)
            self.ring_notes.append(([m.rank for m in members], msg))
        shapes = {m.data.shape for m in members}
        if len(shapes) > 1:
            desc = ", ".join(f"rank {m.rank}: {list(m.data.shape)}" for m in members)
            raise SimulationError(f"{q0.op.name} on group {list(q0.group)} with different local shapes ({desc})")
        n = len(members)
        xs = [m.data for m in members]
        kind = q0.kind
        if kind == "all_reduce":
            rts = {int(m.attrs["reduce_type"]) for m in members}
            if len(rts) > 1:
                raise SimulationError(f"all_reduce on group {list(q0.group)} with different reduce types {sorted(rts)}")
            y = reduce_arrays(xs, int(rts.pop())).astype(xs[0].dtype)
            return [y.copy() for _ in members]
        if kind == "all_gather":
            y = np.concatenate(xs, axis=0) if xs[0].ndim else np.stack(xs)
            return [y.copy() for _ in members]
        if kind == "reduce_scatter":
            y = reduce_arrays(xs, 0)
            if y.ndim == 0 or y.shape[0] % n:
                raise SimulationError(f"{q0.op.name}: extent {y.shape[0] if y.ndim else 0} of axis 0 is not "
                                      f"divisible by the {n} ranks of group {list(q0.group)}")
            return list(np.split(y, n, axis=0))
        if kind == "all_to_all":
            if xs[0].ndim == 0 or xs[0].shape[0] % n:
                raise SimulationError(f"{q0.op.name}: extent {xs[0].shape[0] if xs[0].ndim else 0} of axis 0 "
                                      f"is not divisible by the {n} ranks of group {list(q0.group)}")
            parts = [np.split(x, n, axis=0) for x in xs]
            return [np.concatenate([parts[i][j] for i in range(n)], axis=0) for j in range(n)]
        if kind == "broadcast":
            roots = {m.attrs["root"] for m in members}
            if len(roots) > 1:
                raise SimulationError(f"broadcast on group {list(q0.group)} with different roots {sorted(roots)}")
            root = roots.pop()
            idx = root if root < n else list(q0.group).index(root)
            return [xs[idx].copy() for _ in members]
        raise SimulationError(f"unknown collective {kind}")


def simulate_ranks(programs: Mapping[int, Program], inputs: Mapping[str, Any], *, seed: int = 0,
                   rings: Mapping[int, Iterable[int]] | None = None, check_types: bool = True,
                   strict_rings: bool = False) -> dict[int, RankValues]:
    """Run ``programs[rank]`` on every rank in lockstep.

    ``inputs`` maps ``pd_op.data`` names and ``builtin.parameter`` names to global numpy arrays
    (or to ``{rank: local array}`` mappings).  ``dist_op.shard_tensor``
    turns them into each rank's local piece (partial values: random pieces that reduce to the
    global value, the same on every rank for a given ``seed``).  ``rings`` optionally maps
    ring ids to their ranks (needed only for collectives without an op mesh or ambiguous p2p).

    Returns, for every rank, a :class:`RankValues` (``Value``/``"%N"`` -> ndarray; vectors are
    lists; values that do not exist on the rank are missing).  Raises :class:`SimulationError`
    when a rank cannot run its program or the ranks deadlock.
    """
    return _Simulator(programs, inputs, seed, rings, check_types, strict_rings).run()


# ------------------------------------------------------------------------------------ reshard proof
def _same_layout(a: TensorDistAttr, b: TensorDistAttr) -> bool:
    return a.mesh.shape == b.mesh.shape and a.mesh.process_ids == b.mesh.process_ids and \
        a.dims_mapping == b.dims_mapping and sorted(a.partial) == sorted(b.partial)


def layout_name(d: TensorDistAttr) -> str:
    """``[s0, r] on mesh [2,2] ids [0,1,2,3]`` style text for reports."""
    pl = ", ".join(p.short() for p in d.placements)
    ids = list(d.mesh.process_ids)
    return f"[{pl}] on mesh {list(d.mesh.shape)} {ids}"


def final_value(prog: Program, rank: int, values: Mapping, dst: TensorDistAttr | None) -> Value | None:
    """The rank's result of a one-reshard program: the last unused result computed on the rank,
    preferring one whose type has the destination layout."""
    fallback = None
    for op in reversed(prog.ops):
        for r in op.results:
            if r.uses or dict.get(values, r, _ABSENT) is _ABSENT or not isinstance(dict.get(values, r), np.ndarray):
                continue
            if dst is not None and isinstance(r.type, DistTensorType) and _same_layout(r.type.dist, dst):
                return r
            if fallback is None:
                fallback = r
    return fallback


@dataclass
class ReshardReport:
    """What :func:`verify_reshard` found."""

    src: TensorDistAttr | None
    dst: TensorDistAttr | None
    shape: tuple[int, ...]
    ranks: list[int]
    checked: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: dict[int, list[str]] = field(default_factory=dict)
    error: str | None = None  # the simulation failed (deadlock, bad shapes...)

    @property
    def ok(self) -> bool:
        return not self.problems and self.error is None

    def summary(self) -> str:
        head = (f"{layout_name(self.src) if self.src else '?'} -> {layout_name(self.dst) if self.dst else '?'}, "
                f"shape {list(self.shape)}")
        if self.ok:
            return f"OK {head}: ranks {self.checked} hold the destination layout"
        lines = [f"FAIL {head}"]
        if self.error:
            lines.append("  simulation: " + self.error)
        lines.extend("  " + p for p in self.problems)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _reshard_attrs(prog: Program) -> tuple[TensorDistAttr | None, tuple[int, ...] | None, str | None]:
    src = None
    shape = None
    name = None
    for op in prog.ops:
        if op.name == "pd_op.data" and name is None:
            name = _attr(op, "name")
            t = op.results[0].type
            if hasattr(t, "shape"):
                shape = tuple(t.shape)
        if op.name == "dist_op.shard_tensor" and src is None:
            t = op.results[0].type
            if isinstance(t, DistTensorType):
                src = t.dist
                shape = tuple(t.shape)
    return src, shape, name


def _infer_dst(programs: Mapping[int, Program]) -> TensorDistAttr | None:
    for rank, prog in sorted(programs.items()):
        for op in reversed(prog.ops):
            if op.name == "dist_op.reshard":
                t = op.results[0].type
                if isinstance(t, DistTensorType):
                    return t.dist
    for rank, prog in sorted(programs.items()):
        op = prog.ops[-1] if prog.ops else None
        if op is not None and op.results and isinstance(op.results[0].type, DistTensorType):
            d = op.results[0].type.dist
            if rank in d.mesh.process_ids:
                return d
    return None


def verify_reshard(programs_by_rank: Mapping[int, Program], *, dst: TensorDistAttr | None = None,
                   before: Program | None = None, seed: int = 0, global_value: np.ndarray | None = None,
                   rings: Mapping[int, Iterable[int]] | None = None, rtol: float = 1e-7,
                   atol: float = 1e-7, strict_rings: bool = False) -> ReshardReport:
    """Prove (for one random input) that a lowered one-reshard program is correct on every rank.

    ``programs_by_rank`` holds the lowered program of every rank of the source and destination
    meshes.  The destination layout is ``dst``, else read from ``before`` (the program with the
    ``dist_op.reshard``), else inferred from the lowered programs.  The final value of every
    rank of the destination mesh must be its piece of the global tensor (partial destination:
    the pieces must reduce to it).
    """
    progs = dict(programs_by_rank)
    any_prog = progs[min(progs)]
    src, shape, name = _reshard_attrs(any_prog)
    if dst is None and before is not None:
        for op in before.ops:
            if op.name == "dist_op.reshard" and isinstance(op.results[0].type, DistTensorType):
                dst = op.results[0].type.dist
    if dst is None:
        dst = _infer_dst(progs)
    report = ReshardReport(src, dst, tuple(shape or ()), sorted(progs))
    if dst is None or shape is None or name is None:
        report.error = "cannot tell the input, its shape or the destination layout"
        return report
    need = set(dst.mesh.process_ids) | (set(src.mesh.process_ids) if src else set())
    missing = sorted(need - set(progs))
    if missing:
        report.error = f"no lowered program for ranks {missing}"
        return report
    if global_value is None:
        rng = np.random.default_rng([seed, 12345])
        global_value = np.round(rng.standard_normal(shape) * 8) / 8 + rng.integers(-3, 4, size=shape)
    try:
        res = simulate_ranks(progs, {name: global_value}, seed=seed, rings=rings, strict_rings=strict_rings)
    except SimulationError as e:
        report.error = str(e)
        return report
    pieces = {}
    for r in dst.mesh.process_ids:
        v = final_value(progs[r], r, res[r], dst)
        if v is None:
            report.problems.append(f"rank {r}: no result value")
            continue
        if not (isinstance(v.type, DistTensorType) and _same_layout(v.type.dist, dst)):
            report.notes.setdefault(r, []).append(f"the final value's type is {v.type}, not the destination layout")
        pieces[r] = res[r].get_value(v)
        report.checked.append(r)
    report.notes.update({r: [*report.notes.get(r, []), *res[r].notes] for r in res if res[r].notes})
    if len(pieces) == len(dst.mesh.process_ids):
        report.problems.extend(check_layout(pieces, np.asarray(global_value, dtype=np.float64), dst,
                                            rtol=rtol, atol=atol))
    return report
