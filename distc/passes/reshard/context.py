"""Building ops the way Paddle's Python API builds them while a reshard function runs.

A :class:`ReshardContext` is the insertion point in front of one ``dist_op.reshard`` plus what a
reshard function needs to know (the rank, the ring allocator, the print style).  Its op methods
mirror the Paddle calls the functions make (``paddle._C_ops.all_gather``, ``paddle.slice``,
``paddle.full`` ...), including what those calls do implicitly:

* scalar and list arguments become ``pd_op.full`` / ``pd_op.full_int_array`` ops right before the
  consumer (dense values, turned into replicated dist values on the consumer's mesh);
* list arguments become a ``builtin.combine``;
* ``op_dist_attr`` and result types come from the op's SPMD rule (:mod:`.spmd`), which the
  function may then override (``retype``, ``set_dist``) as Paddle's functions do;
* ``stop_gradient`` is true iff it is true for every input; ``op_role`` is copied from the
  reshard op being lowered.

Every op name and attribute goes through :class:`distc.ir.builder.Maker`, so a 2024-style program
gets that era's spelling (typed attributes, no placements, no chunk_id) and collective names
(``c_allgather``, ``c_allreduce_sum_``, ``c_reducescatter``, ``c_broadcast``).
"""

from __future__ import annotations

from typing import Sequence

from ...dialects import collectives as C
from ...dialects import ops
from ...dialects.collectives import ALLREDUCE_2024, ERA_2024_NAMES, Collective
from ...ir import attrs as A
from ...ir.builder import InsertPoint, Maker
from ...ir.core import Operation, Program, Value
from ...ir.dist import OperationDistAttr, ProcessMesh, TensorDistAttr, VecDistAttr
from ...ir.types import DTYPE_SUFFIX_TO_NAME, DenseTensorType, DistTensorType, VectorType
from ...syntax.diagnostics import DiagnosticError
from . import spmd
from .groups import RingAllocator
from .util import REDUCE_TYPES, ordered_partial

_TATTR_CACHE: dict = {}


class Decline(Exception):
    """Raised by a reshard function that matched but cannot lower this case (as Paddle would
    fail).  The registry rolls back what the function inserted and tries the next function."""


class ReshardContext:
    """Insertion point + environment for lowering one ``dist_op.reshard`` for one rank."""

    def __init__(self, prog: Program, reshard_op: Operation, rank: int, rings: RingAllocator,
                 *, records: list | None = None, notes: list | None = None) -> None:
        self.prog = prog
        self.op = reshard_op
        self.rank = rank
        self.rings = rings
        self.maker = Maker(prog.style)
        self.style = prog.style
        self.era = prog.style.era
        self.block = reshard_op.parent
        self.inserter = InsertPoint.before(reshard_op)
        self.op_role = reshard_op.attr("op_role")
        self.created: list[Operation] = []
        self.records: list[Collective] = records if records is not None else []
        self.notes: list[str] = notes if notes is not None else []
        self.function = ""  # name of the reshard function running (for records)
        self.layouts: tuple | None = None  # (src, dst) of the reshard being lowered
        # True: reproduce Paddle 3.3.1 exactly, bugs included; False: Paddle's lowering with its
        # numeric bugs fixed (the text differs only on the ranks Paddle gets wrong)
        self.paddle_only = False
        self.fixes: list[str] = []
        self._style_key = (prog.style.dist_form, prog.style.placements, prog.style.chunk_id)

    # -- values ------------------------------------------------------------------------------
    @staticmethod
    def dist(v: Value) -> TensorDistAttr:
        d = v.dist_attr
        if d is None:
            raise DiagnosticError(f"value %{v.name} has no dist type ({v.type})")
        return d

    @staticmethod
    def chunk_id(v: Value) -> int:
        op = v.owner
        if op is not None:
            d = op.dist_attr
            if d is not None and d.chunk_id is not None:
                return d.chunk_id
        return -1

    @staticmethod
    def stop_gradient(v: Value | None) -> bool:
        from ..sharding_util import stop_gradient

        return stop_gradient(v)

    def local_shape(self, v: Value, rank: int | None = None) -> tuple[int, ...]:
        t = v.type
        if isinstance(t, DistTensorType):
            return t.local_shape(rank)
        return tuple(getattr(t, "shape", ()))

    # -- attributes and types ----------------------------------------------------------------
    def tattr(self, mesh: ProcessMesh, dims_mapping: Sequence[int], partial=()) -> TensorDistAttr:
        """A tensor dist attr in the program's style (partial dims in Paddle's print order)."""
        key = (self._style_key, mesh, tuple(dims_mapping), tuple(dict(partial).items()))
        a = _TATTR_CACHE.get(key)
        if a is None:
            a = self.maker.tensor_dist(mesh, tuple(dims_mapping), ordered_partial(partial))
            if len(_TATTR_CACHE) < 100_000:
                _TATTR_CACHE[key] = a
        return a

    def _styled(self, e):
        if isinstance(e, TensorDistAttr):
            if e.is_empty or (e.form == self.style.dist_form and e.placements_shown == self.style.placements):
                return e
            return self.maker.restyle(e)
        if isinstance(e, VecDistAttr):
            return VecDistAttr(tuple(self._styled(x) for x in e.items))
        return e

    def op_attr(self, mesh: ProcessMesh, operands: Sequence = (), results: Sequence = (),
                chunk_id: int = -1) -> OperationDistAttr:
        """An op_dist_attr in the program's style (``chunk_id`` only where the style prints it)."""
        return OperationDistAttr(mesh, tuple(self._styled(x) for x in operands),
                                 tuple(self._styled(x) for x in results),
                                 (chunk_id if chunk_id is not None else -1) if self.style.chunk_id else None)

    def dist_type(self, shape: Sequence[int], dtype: str, attr: TensorDistAttr) -> DistTensorType:
        return DistTensorType(tuple(shape), dtype, self._styled(attr))

    def cvt(self, like, attr: TensorDistAttr, shape: Sequence[int] | None = None) -> DistTensorType:
        """Paddle's ``cvt_to_dist_type(type, attr)``: ``like``'s shape and dtype, ``attr``."""
        t = like.type if isinstance(like, Value) else like
        return self.dist_type(tuple(shape) if shape is not None else t.shape, t.dtype, attr)

    @staticmethod
    def retype(v: Value, t) -> Value:
        v.type = t
        return v

    @staticmethod
    def set_dist(op_or_value, od: OperationDistAttr) -> None:
        op = op_or_value.owner if isinstance(op_or_value, Value) else op_or_value
        op.dist_attr = od

    # -- inserting ---------------------------------------------------------------------------
    def insert(self, name: str, operands: Sequence[Value | None] = (), result_types: Sequence = (),
               attrs: dict | None = None, dist: OperationDistAttr | None = None) -> Operation:
        a = dict(attrs or {})
        if dist is not None:
            a["op_dist_attr"] = dist
        if self.op_role is not None:
            a["op_role"] = self.op_role
        sg = all(self.stop_gradient(v) for v in operands)
        a["stop_gradient"] = self.maker.bools([sg] * len(result_types))
        op = Operation(name, list(operands), list(result_types), a)
        self.inserter.insert(op)
        self.created.append(op)
        return op

    def snapshot(self):
        return (len(self.created), len(self.records), len(self.notes), self.rings.snapshot())

    def rollback(self, snap) -> None:
        n, nrec, nnotes, rings = snap
        for op in reversed(self.created[n:]):
            for r in op.results:
                for user, i in list(r.uses):
                    user.set_operand(i, None)
            op.erase()
        del self.created[n:]
        del self.records[nrec:]
        del self.notes[nnotes:]
        self.rings.restore(rings)

    def ring(self, ranks) -> int:
        return self.rings.get(ranks)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def fix(self, text: str) -> None:
        """Record that distc departs from Paddle's text here to fix a numeric bug of Paddle's."""
        self.fixes.append(text)
        self.notes.append(text)

    def _record(self, kind: str, op: Operation, ring_id: int, ranks, v: Value | None, shape=None,
                dtype: str = "f32", **extra) -> None:
        if v is not None:
            dtype = getattr(v.type, "dtype", "f32")
            shape = self.local_shape(v, self.rank) if shape is None else shape
        self.records.append(Collective.of(
            kind, op.name, ring_id, ranks, self.rank, dtype, tuple(shape or ()), layouts=self.layouts,
            function=self.function, line=self.op.loc[0] if self.op.loc else None, **extra))

    # -- implicit helper ops -----------------------------------------------------------------
    def _dense(self, shape, dtype: str) -> DenseTensorType:
        return self.maker.dense_type(tuple(shape), dtype)

    def full(self, shape: Sequence[int], value: float, dtype: str, *, place: str = "Place(undefined:0)") -> Value:
        """``paddle.full`` (dense result until a dist op consumes it)."""
        m = self.maker
        attrs = {"dtype": m.dtype(DTYPE_SUFFIX_TO_NAME.get(dtype, dtype)), "place": m.place(place),
                 "shape": m.int_array(list(shape)), "value": m.fill_value(value)}
        return self.insert(ops.FULL, [], [self._dense(shape, dtype)], attrs).result

    def scalar(self, value: int, dtype: str = "i32") -> Value:
        """A scalar argument (axis ...) materialised as ``pd_op.full`` of shape [1] on the CPU."""
        return self.full([1], value, dtype, place="Place(cpu)")

    def int_array(self, values: Sequence[int]) -> Value:
        m = self.maker
        attrs = {"dtype": m.dtype("int64"), "place": m.place("Place(cpu)"), "value": m.i64s(list(values))}
        return self.insert(ops.FULL_INT_ARRAY, [], [self._dense([len(values)], "i64")], attrs).result

    def combine(self, values: Sequence[Value]) -> Value:
        t = VectorType(tuple(v.type for v in values))
        return self.insert(ops.COMBINE, list(values), [t]).result

    def _to_dist(self, values: Sequence[Value | None]) -> ProcessMesh | None:
        """Dense helper values consumed by a dist op become replicated on its first dist input's mesh."""
        mesh = None
        for v in values:
            if v is None:
                continue
            t = v.type
            if isinstance(t, VectorType):
                t = next((e for e in t.elements if isinstance(e, DistTensorType)), None)
            if isinstance(t, DistTensorType):
                mesh = t.dist.mesh
                break
        if mesh is None:
            return None
        for v in values:
            if v is not None and isinstance(v.type, DenseTensorType):
                attr = self.tattr(mesh, [-1] * len(v.type.shape))
                v.type = self.dist_type(v.type.shape, v.type.dtype, attr)
        return mesh

    def _entry(self, v: Value):
        t = v.type
        if isinstance(t, VectorType):
            return VecDistAttr(tuple(e.dist for e in t.elements if isinstance(e, DistTensorType)))
        return t.dist if isinstance(t, DistTensorType) else None

    # -- collectives (their op_dist_attr is always set by the caller) ------------------------
    def all_reduce(self, x: Value, ranks, reduce: str) -> Value:
        rid = self.ring(ranks)
        m = self.maker
        if self.era == "2024":
            name = ALLREDUCE_2024.get(reduce, C.C_ALLREDUCE_SUM_)
            attrs = {"ring_id": m.i32(rid), "use_calc_stream": m.bool(False), "use_model_parallel": m.bool(False)}
        else:
            name = C.PD_ALL_REDUCE
            attrs = {"reduce_type": m.i32(REDUCE_TYPES.index(reduce)), "ring_id": m.i32(rid)}
        op = self.insert(name, [x], [x.type], attrs)
        self._record(C.ALL_REDUCE, op, rid, ranks, x, reduce=reduce)
        return op.result

    def _collective(self, kind: str, name: str, x: Value, ranks, attrs: dict, *, stream: bool,
                    **record) -> Value:
        """One same-shape collective: ``name`` in the current era (2024 dumps: ``c_*`` names with
        ``use_calc_stream``; current ones: ``execution_stream`` where Paddle writes it)."""
        m = self.maker
        if self.era == "2024":
            name = ERA_2024_NAMES.get(name, name)
            if name != C.PD_ALL_TO_ALL:
                attrs["use_calc_stream"] = m.bool(True)
        elif stream:
            attrs["execution_stream"] = m.str("DefaultStream")
        op = self.insert(name, [x], [x.type], attrs)
        self._record(kind, op, attrs["ring_id"].value, ranks, x, **record)
        return op.result

    def all_gather(self, x: Value, ranks, nranks: int) -> Value:
        m = self.maker
        attrs = {"nranks": m.i32(nranks), "ring_id": m.i32(self.ring(ranks))}
        return self._collective(C.ALL_GATHER, C.PD_ALL_GATHER, x, ranks, attrs, stream=False)

    def reduce_scatter(self, x: Value, ranks, nranks: int) -> Value:
        m = self.maker
        attrs = {"nranks": m.i32(nranks), "ring_id": m.i32(self.ring(ranks))}
        return self._collective(C.REDUCE_SCATTER, C.PD_REDUCE_SCATTER, x, ranks, attrs, stream=True)

    def all_to_all(self, x: Value, ranks) -> Value:
        attrs = {"ring_id": self.maker.i32(self.ring(ranks))}
        return self._collective(C.ALL_TO_ALL, C.PD_ALL_TO_ALL, x, ranks, attrs, stream=True)

    def broadcast(self, x: Value, ranks, root: int) -> Value:
        m = self.maker
        attrs = {"ring_id": m.i32(self.ring(ranks)), "root": m.i32(root)}
        return self._collective(C.BROADCAST, C.PD_BROADCAST, x, ranks, attrs, stream=False, root=root)

    def send_v2(self, x: Value, ranks, peer: int) -> Operation:
        rid = self.ring(ranks)
        m = self.maker
        attrs = {"dynamic_shape": m.bool(False), "peer": m.i32(peer), "ring_id": m.i32(rid),
                 "use_calc_stream": m.bool(True)}
        op = self.insert(C.PD_SEND_V2, [x], [], attrs)
        self._record(C.SEND, op, rid, ranks, x, peer=ranks[peer])
        return op

    def recv_v2(self, out_shape, dtype: str, ranks, peer: int, result_type) -> Value:
        rid = self.ring(ranks)
        m = self.maker
        attrs = {"dtype": m.dtype(DTYPE_SUFFIX_TO_NAME.get(dtype, dtype)), "dynamic_shape": m.bool(False),
                 "out_shape": m.i32s(list(out_shape)), "peer": m.i32(peer), "ring_id": m.i32(rid),
                 "use_calc_stream": m.bool(True)}
        op = self.insert(C.PD_RECV_V2, [], [result_type], attrs)
        self._record(C.RECV, op, rid, ranks, None, shape=out_shape, dtype=dtype, peer=ranks[peer])
        return op.result

    # -- dist ops ----------------------------------------------------------------------------
    def reshard_v2(self, x: Value, dst: TensorDistAttr, dst_type=None) -> Value:
        """A ``dist_op.reshard`` (Paddle's ``reshard_v2``): the fake value left for ranks that do
        not take part, and the pieces of a decomposed reshard."""
        src = self.dist(x)
        from .util import merged_mesh

        od = self.op_attr(merged_mesh(src.mesh, dst.mesh), [src], [dst])
        t = dst_type if dst_type is not None else self.cvt(x, dst)
        return self.insert(ops.RESHARD, [x], [t], {}, od).result

    # -- plain ops with SPMD-inferred dist attrs ---------------------------------------------
    def share_data_(self, x: Value) -> Value:
        d = self.dist(x)
        op = self.insert(ops.SHARE_DATA_, [x], [x.type], {}, self.op_attr(d.mesh, [d], [d]))
        return op.result

    def assign(self, x: Value) -> Value:
        d = self.dist(x)
        return self.insert(ops.ASSIGN, [x], [x.type], {}, self.op_attr(d.mesh, [d], [d])).result

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        d = self.dist(x)
        req, out = spmd.transpose(d.dims_mapping, perm)
        t = x.type
        shape = tuple(t.shape[p] for p in perm)
        out = spmd.even_only(out, shape, d.mesh.shape)
        rin = self.tattr(d.mesh, req, d.printed_partial)
        rout = self.tattr(d.mesh, out, d.printed_partial)
        op = self.insert(ops.TRANSPOSE, [x], [self.dist_type(shape, t.dtype, rout)],
                         {"perm": self.maker.i32s(list(perm))}, self.op_attr(d.mesh, [rin], [rout]))
        return op.result

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        n_in = n_out = 1
        for d in x.type.shape:
            n_in *= d
        for d in shape:
            n_out *= d
        if n_in != n_out and -1 not in shape and -1 not in x.type.shape:
            raise Decline(f"reshape of {list(x.type.shape)} to {list(shape)}: Expected capacity == in_size, "
                          f"but received capacity:{n_out} != in_size:{n_in}")
        s = self.int_array(list(shape))
        self._to_dist([x, s])
        d = self.dist(x)
        req, out = spmd.reshape(d.dims_mapping, x.type.shape, list(shape), d.mesh.shape)
        out = spmd.even_only(out, shape, d.mesh.shape)
        rin = self.tattr(d.mesh, req, d.printed_partial)
        rout = self.tattr(d.mesh, out, d.printed_partial)
        op = self.insert(ops.RESHAPE, [x, s], [self.dist_type(shape, x.type.dtype, rout)], {},
                         self.op_attr(d.mesh, [rin, s.type.dist], [rout]))
        return op.result

    def slice(self, x: Value, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> Value:
        st = self.int_array(list(starts))
        en = self.int_array(list(ends))
        self._to_dist([x, st, en])
        d = self.dist(x)
        m = self.maker
        shape = list(x.type.shape)
        for a, b, e in zip(axes, starts, ends):
            shape[a] = e - b
        attrs = {"axes": m.i64s(list(axes)), "decrease_axis": A.ArrayAttr(()), "infer_flags": m.i64s([1] * len(axes))}
        op = self.insert(ops.SLICE, [x, st, en], [self.dist_type(shape, x.type.dtype, d)], attrs,
                         self.op_attr(d.mesh, [d, st.type.dist, en.type.dist], [d]))
        return op.result

    def split_with_num(self, x: Value, num: int, axis: int) -> Value:
        """``split_with_num``; returns its vector result (the ``builtin.split`` that Paddle's
        function erases again is not created)."""
        ax = self.scalar(axis)
        self._to_dist([x, ax])
        d = self.dist(x)
        req, outs = spmd.split(d.dims_mapping, axis, num)
        shape = list(x.type.shape)
        shape[axis] = shape[axis] // num if shape[axis] > 0 else shape[axis]
        rin = self.tattr(d.mesh, req)
        routs = [self.tattr(d.mesh, spmd.even_only(o, shape, d.mesh.shape)) for o in outs]
        vt = VectorType(tuple(self.dist_type(shape, x.type.dtype, r) for r in routs))
        op = self.insert(ops.SPLIT_WITH_NUM, [x, ax], [vt], {"num": self.maker.i32(num)},
                         self.op_attr(d.mesh, [rin, ax.type.dist], [VecDistAttr(tuple(routs))]))
        return op.result

    def split(self, x: Value, sections: Sequence[int], axis: int) -> list[Value]:
        """``paddle._C_ops.split``: full_int_array, full, split, builtin.split; the pieces."""
        sec = self.int_array(list(sections))
        ax = self.scalar(axis)
        self._to_dist([x, sec, ax])
        d = self.dist(x)
        req, outs = spmd.split(d.dims_mapping, axis, len(sections))
        rin = self.tattr(d.mesh, req)
        routs = []
        types = []
        for s, o in zip(sections, outs):
            shape = list(x.type.shape)
            shape[axis] = s
            r = self.tattr(d.mesh, spmd.even_only(o, shape, d.mesh.shape))
            routs.append(r)
            types.append(self.dist_type(shape, x.type.dtype, r))
        vt = VectorType(tuple(types))
        op = self.insert(ops.SPLIT, [x, sec, ax], [vt], {},
                         self.op_attr(d.mesh, [rin, sec.type.dist, ax.type.dist], [VecDistAttr(tuple(routs))]))
        bs = self.insert(ops.BUILTIN_SPLIT, [op.result], types)
        return list(bs.results)

    def concat(self, xs, axis: int) -> Value:
        """``concat(list, axis)``: full (axis), builtin.combine (unless ``xs`` is already a
        vector value), concat."""
        ax = self.scalar(axis)
        vec = xs if isinstance(xs, Value) else self.combine(list(xs))
        self._to_dist([vec, ax])
        elems = [e for e in vec.type.elements]
        dms = [e.dist.dims_mapping for e in elems]
        req, out = spmd.concat(dms, axis)
        first = elems[0].dist
        rins = VecDistAttr(tuple(self.tattr(e.dist.mesh, r, e.dist.printed_partial) for e, r in zip(elems, req)))
        shape = list(elems[0].shape)
        shape[axis] = sum(e.shape[axis] for e in elems)
        rout = self.tattr(first.mesh, spmd.even_only(out, shape, first.mesh.shape))
        op = self.insert(ops.CONCAT, [vec, ax], [self.dist_type(shape, elems[0].dtype, rout)], {},
                         self.op_attr(first.mesh, [rins, ax.type.dist], [rout]))
        return op.result


def retire(op: Operation, out: Value | None) -> Value | None:
    """The lowered reshard ``op``'s uses go to ``out`` (if any); ``op`` goes when nothing uses it."""
    r = op.results[0]
    if out is not None:
        r.replace_all_uses_with(out)
    if not r.uses:
        op.erase()
    return out
