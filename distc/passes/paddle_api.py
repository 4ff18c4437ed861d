"""Paddle's Python API as ops: the one place passes build ops the way Paddle's calls build them.

A :class:`PaddleAPI` is an insertion point (:class:`distc.ir.builder.InsertPoint`) in a program's
print style (:class:`distc.ir.builder.Maker`) with the guards Paddle's passes hold while they call
its API: the ``op_role`` of the op being served (``pir_op_role_guard``) and the source location
diagnostics should name.  Its methods mirror ``paddle._C_ops.*`` / ``paddle.*`` calls, including
what those calls do implicitly:

* scalar and list arguments become ``pd_op.full`` / ``pd_op.full_int_array`` ops right before the
  consumer (dense values, turned into replicated dist values on the consumer's mesh);
* list arguments become a ``builtin.combine``;
* ``op_dist_attr`` and result types come from the op's SPMD rule (:mod:`distc.dialects.spmd`),
  which the caller may then override (``retype``, ``set_dist``) as Paddle's functions do;
* ``stop_gradient`` is true iff it is true for every input;
* collectives take the group's ranks: ``new_group`` (given by the caller, e.g. a reshard
  lowering's ring allocator) names the ring, and ``on_collective`` hears of every collective
  built (the lowering keeps its records; the builder keeps none).

Collective names and attributes follow the program's era (2024 dumps: ``c_allgather``,
``c_allreduce_sum_``, ``c_reducescatter``, ``c_broadcast`` with ``use_calc_stream``).  The
partition, shard-optimizer, shard-startup and ZeRO clip passes and every reshard function build
through this class; the lowering state (rank, rings, records, notes) is kept apart in
:class:`distc.passes.reshard.context.ReshardContext`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dialects import collectives as C
from ..dialects import ops, spmd
from ..dialects.collectives import ALLREDUCE_2024, ERA_2024_NAMES
from ..dialects.partial_order import ordered_partial
from ..ir import attrs as A
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Value, new_op
from ..ir.dist import REDUCE_TYPES, OperationDistAttr, ProcessMesh, TensorDistAttr, VecDistAttr, merge_meshes
from ..ir.style import Style
from ..ir.types import DTYPE_SUFFIX_TO_NAME, DenseTensorType, DistTensorType, VectorType
from ..syntax.diagnostics import DiagnosticError
from .sharding_util import chunk_id_of, stop_gradient


class Decline(Exception):
    """A Paddle call that fails for these arguments (Paddle's API would raise).  Reshard matching
    refuses such cases first, so a lowering that meets one reports an internal error."""


def set_result_dist(v: Value, attr: TensorDistAttr, maker: Maker, *, retype: bool = False) -> None:
    """``v``'s entry in its producer's op_dist_attr becomes ``attr`` in the program's style (and,
    with ``retype``, ``v``'s type too), as Paddle's functions do after overriding an inferred type."""
    attr = maker.restyle(attr)  # type: ignore[assignment]
    if retype and isinstance(v.type, DistTensorType):
        v.type = v.type.with_dist(attr)
    op = v.owner
    od = op.dist_attr if op is not None else None
    if od is not None and getattr(v, "index", 0) < len(od.results):
        res = list(od.results)
        res[getattr(v, "index", 0)] = attr
        op.dist_attr = od.with_(results=tuple(res))


def _no_group(ranks) -> int:
    raise DiagnosticError(f"internal error: a collective over {list(ranks)} built where no process group exists")


class PaddleAPI:
    """Ops built as Paddle's API builds them, inserted at ``at`` in ``style``."""

    def __init__(self, style: Style, at: InsertPoint, *, op_role: A.Attribute | None = None,
                 loc: tuple[int, int] | None = None, new_group: Callable[..., int] = _no_group,
                 on_collective: Callable[..., None] | None = None, cache: dict | None = None) -> None:
        self.maker = Maker(style)
        self.style = style
        self.era = style.era
        self.at = at
        self.op_role = op_role
        self.loc = loc
        self.new_group = new_group
        self.on_collective = on_collective
        self.created: list[Operation] = []
        self._cache = cache if cache is not None else {}  # (one program, one style)

    def moved(self, at: InsertPoint, *, op_role: A.Attribute | None = None,
              loc: tuple[int, int] | None = None) -> "PaddleAPI":
        """This builder, now inserting at ``at`` under ``op_role`` and ``loc`` (a pass that builds
        at thousands of places keeps one; ``created`` starts anew)."""
        self.at, self.op_role, self.loc = at, op_role, loc
        self.created = []
        return self

    # -- values ------------------------------------------------------------------------------
    @staticmethod
    def dist(v: Value) -> TensorDistAttr:
        d = v.dist_attr
        if d is None:
            raise DiagnosticError(f"value %{v.name} has no dist type ({v.type})")
        return d

    @staticmethod
    def chunk_id(v: Value) -> int:
        """The chunk id of ``v``'s producer (-1 for none)."""
        return chunk_id_of(v.owner) if v.owner is not None else -1

    @staticmethod
    def local_shape(v: Value, rank: int | None = None) -> tuple[int, ...]:
        t = v.type
        if isinstance(t, DistTensorType):
            return t.local_shape(rank)
        return tuple(getattr(t, "shape", ()))

    # -- attributes and types ----------------------------------------------------------------
    def tattr(self, mesh: ProcessMesh, dims_mapping: Sequence[int], partial=()) -> TensorDistAttr:
        """A tensor dist attr in the program's style (partial dims in Paddle's print order); one
        object for each (style, layout), which printing and replaying key on."""
        key = (mesh, tuple(dims_mapping), tuple(dict(partial).items()))
        a = self._cache.get(key)
        if a is None:
            a = self._cache[key] = self.maker.tensor_dist(mesh, tuple(dims_mapping), ordered_partial(partial))
        return a

    def op_attr(self, mesh: ProcessMesh, operands: Sequence = (), results: Sequence = (),
                chunk_id: int = -1) -> OperationDistAttr:
        """An op_dist_attr in the program's style (``chunk_id`` only where the style prints it);
        one object for the same mesh and entries (by identity: entries equal in value may print
        otherwise, ``{}`` and ``{<#AttrNull>}``), which printing and verifying key on."""
        key = ("op", id(mesh), tuple(map(id, operands)), tuple(map(id, results)), chunk_id)
        hit = self._cache.get(key)
        if hit is not None:
            return hit[3]
        od = self.maker.op_dist(mesh, operands, results)
        od = od if od.chunk_id is None or chunk_id == -1 else od.with_(chunk_id=chunk_id)
        self._cache[key] = (mesh, tuple(operands), tuple(results), od)  # (keeps the key's ids theirs)
        return od

    def dist_type(self, shape: Sequence[int], dtype: str, attr: TensorDistAttr) -> DistTensorType:
        return self.maker.dist_type(shape, dtype, attr)

    def cvt(self, like, attr: TensorDistAttr, shape: Sequence[int] | None = None) -> DistTensorType:
        """Paddle's ``cvt_to_dist_type(type, attr)``: ``like``'s shape and dtype, ``attr``."""
        t = like.type if isinstance(like, Value) else like
        if shape is None and isinstance(t, DistTensorType):  # (one shared type per layout)
            return t.with_dist(self.maker.restyle(attr))  # type: ignore[arg-type]
        return self.dist_type(tuple(shape) if shape is not None else t.shape, t.dtype, attr)

    @staticmethod
    def retype(v: Value, t) -> Value:
        v.type = t
        return v

    def set_result_dist(self, v: Value, attr: TensorDistAttr) -> None:
        """``v``'s entry in its producer's op_dist_attr becomes ``attr`` (styled)."""
        set_result_dist(v, attr, self.maker)

    @staticmethod
    def set_dist(op_or_value, od: OperationDistAttr) -> None:
        op = op_or_value.owner if isinstance(op_or_value, Value) else op_or_value
        op.dist_attr = od

    # -- inserting ---------------------------------------------------------------------------
    def insert(self, name: str, operands: Sequence[Value | None] = (), result_types: Sequence = (),
               attrs: dict | None = None, dist: OperationDistAttr | None = None, *,
               with_stop_gradient: bool = True) -> Operation:
        """One op at the insertion point: ``attrs`` + ``op_dist_attr`` + the guard's ``op_role`` +
        ``stop_gradient`` (true iff true for every input)."""
        sg = None
        if with_stop_gradient:
            sg = all(stop_gradient(v) for v in operands) if len(operands) != 1 else stop_gradient(operands[0])
        if attrs:
            a = self._attrs(attrs, dist, sg, len(result_types))
        else:  # (thousands of reshards and assign_out_ a pass: one dict for each kind, by identity;
            # attribute dicts are never changed in place)
            k = ("attrs", id(dist), id(self.op_role), sg, len(result_types))
            hit = self._cache.get(k)
            if hit is None:
                hit = self._cache[k] = (dist, self.op_role, self._attrs({}, dist, sg, len(result_types)))
            a = hit[2]
        op = new_op(name, operands, result_types, a)  # (``a`` held: never changed in place)
        if self.loc is not None:
            op._line, op._col = self.loc
        self.at.insert(op)
        self.created.append(op)
        return op

    def _attrs(self, attrs: dict, dist: OperationDistAttr | None, sg: bool | None, n: int) -> dict:
        """``attrs`` + ``op_dist_attr`` + ``op_role`` + ``stop_gradient`` (``sg`` for ``n`` results, unless None)."""
        a = dict(attrs)
        if dist is not None:
            a["op_dist_attr"] = dist
        if self.op_role is not None:
            a["op_role"] = self.op_role
        if sg is not None:
            k = ("sg", sg, n)
            b = self._cache.get(k)
            if b is None:
                b = self._cache[k] = self.maker.bools([sg] * n)
            a["stop_gradient"] = b
        return a

    # -- implicit helper ops -----------------------------------------------------------------
    def full(self, shape: Sequence[int], value: float, dtype: str, *, place: str = "Place(undefined:0)") -> Value:
        """``paddle.full`` (dense result until a dist op consumes it)."""
        m = self.maker
        attrs = {"dtype": m.dtype(DTYPE_SUFFIX_TO_NAME.get(dtype, dtype)), "place": m.place(place),
                 "shape": m.int_array(list(shape)), "value": m.fill_value(value)}
        return self.insert(ops.FULL, [], [m.dense_type(shape, dtype)], attrs).result

    def scalar(self, value: int, dtype: str = "i32") -> Value:
        """A scalar argument (axis ...) materialised as ``pd_op.full`` of shape [1] on the CPU."""
        return self.full([1], value, dtype, place="Place(cpu)")

    def int_array(self, values: Sequence[int]) -> Value:
        m = self.maker
        attrs = {"dtype": m.dtype("int64"), "place": m.place("Place(cpu)"), "value": m.i64s(list(values))}
        return self.insert(ops.FULL_INT_ARRAY, [], [m.dense_type([len(values)], "i64")], attrs).result

    def combine(self, values: Sequence[Value | None]) -> Value:
        t = VectorType(tuple(v.type for v in values if v is not None))
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

    # -- collectives (their op_dist_attr is set by the caller) -------------------------------
    def _heard(self, kind: str, op: Operation, ring_id: int, ranks, v: Value | None, **extra) -> None:
        if self.on_collective is not None:
            self.on_collective(kind, op, ring_id, ranks, v, **extra)

    def all_reduce(self, x: Value, ranks, reduce: str) -> Value:
        rid = self.new_group(ranks)
        m = self.maker
        if self.era == "2024":
            name = ALLREDUCE_2024.get(reduce, C.C_ALLREDUCE_SUM_)
            attrs = {"ring_id": m.i32(rid), "use_calc_stream": m.bool(False), "use_model_parallel": m.bool(False)}
        else:
            name = C.PD_ALL_REDUCE
            attrs = {"reduce_type": m.i32(REDUCE_TYPES.index(reduce)), "ring_id": m.i32(rid)}
        op = self.insert(name, [x], [x.type], attrs)
        self._heard(C.ALL_REDUCE, op, rid, ranks, x, reduce=reduce)
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
        self._heard(kind, op, attrs["ring_id"].value, ranks, x, **record)
        return op.result

    def all_gather(self, x: Value, ranks, nranks: int) -> Value:
        m = self.maker
        attrs = {"nranks": m.i32(nranks), "ring_id": m.i32(self.new_group(ranks))}
        return self._collective(C.ALL_GATHER, C.PD_ALL_GATHER, x, ranks, attrs, stream=False)

    def reduce_scatter(self, x: Value, ranks, nranks: int) -> Value:
        m = self.maker
        attrs = {"nranks": m.i32(nranks), "ring_id": m.i32(self.new_group(ranks))}
        return self._collective(C.REDUCE_SCATTER, C.PD_REDUCE_SCATTER, x, ranks, attrs, stream=True)

    def all_to_all(self, x: Value, ranks) -> Value:
        attrs = {"ring_id": self.maker.i32(self.new_group(ranks))}
        return self._collective(C.ALL_TO_ALL, C.PD_ALL_TO_ALL, x, ranks, attrs, stream=True)

    def broadcast(self, x: Value, ranks, root: int) -> Value:
        m = self.maker
        attrs = {"ring_id": m.i32(self.new_group(ranks)), "root": m.i32(root)}
        return self._collective(C.BROADCAST, C.PD_BROADCAST, x, ranks, attrs, stream=False, root=root)

    def send_v2(self, x: Value, ranks, peer: int) -> Operation:
        rid = self.new_group(ranks)
        m = self.maker
        attrs = {"dynamic_shape": m.bool(False), "peer": m.i32(peer), "ring_id": m.i32(rid),
                 "use_calc_stream": m.bool(True)}
        op = self.insert(C.PD_SEND_V2, [x], [], attrs)
        self._heard(C.SEND, op, rid, ranks, x, peer=ranks[peer])
        return op

    def recv_v2(self, out_shape, dtype: str, ranks, peer: int, result_type) -> Value:
        rid = self.new_group(ranks)
        m = self.maker
        attrs = {"dtype": m.dtype(DTYPE_SUFFIX_TO_NAME.get(dtype, dtype)), "dynamic_shape": m.bool(False),
                 "out_shape": m.i32s(list(out_shape)), "peer": m.i32(peer), "ring_id": m.i32(rid),
                 "use_calc_stream": m.bool(True)}
        op = self.insert(C.PD_RECV_V2, [], [result_type], attrs)
        self._heard(C.RECV, op, rid, ranks, None, shape=out_shape, dtype=dtype, peer=ranks[peer])
        return op.result

    # -- dist ops ----------------------------------------------------------------------------
    def reshard(self, x: Value, dst: TensorDistAttr, dst_type=None) -> Value:
        """``paddle._C_ops.reshard_v2(x, dst)``: a ``dist_op.reshard`` on the merged mesh of both
        layouts (the one way every pass builds one)."""
        xt = x.type
        if not isinstance(xt, DistTensorType):
            raise DiagnosticError(f"cannot reshard a value of non-distributed type {xt}")
        # (op_dist_attr and result type: one pair for each input type and layout, by identity)
        key = ("reshard", id(xt), id(dst))
        hit = self._cache.get(key)
        if hit is None:
            src = xt.dist
            hit = self._cache[key] = (xt, dst, self.op_attr(merge_meshes(src.mesh, dst.mesh), [src], [dst]),
                                      self.cvt(xt, dst))
        return self.insert(ops.RESHARD, [x], [hit[3] if dst_type is None else dst_type], {}, hit[2]).result

    def assign_out_(self, x: Value, out: Value, chunk_id: int = -1) -> Value:
        """``paddle.assign(x, out)`` as the partition pass calls it (``assign_out_``: no
        ``stop_gradient`` written; the op_dist_attr on ``out``'s mesh)."""
        xd, od = self.dist(x), self.dist(out)
        t = out.type
        assert isinstance(t, DistTensorType)
        return self.insert(ops.ASSIGN_OUT_, [x, out], [t.with_dist(self.maker.restyle(xd))], {},  # type: ignore[arg-type]
                           self.op_attr(od.mesh, [xd, od], [xd], chunk_id), with_stop_gradient=False).result

    # -- plain ops with SPMD-inferred dist attrs ---------------------------------------------
    def share_data_(self, x: Value) -> Value:
        d = self.dist(x)
        return self.insert(ops.SHARE_DATA_, [x], [x.type], {}, self.op_attr(d.mesh, [d], [d])).result

    def share_data(self, x: Value) -> Value:
        """``paddle._C_ops.share_data(x)`` (not in place)."""
        d = self.dist(x)
        return self.insert(ops.SHARE_DATA, [x], [x.type], {}, self.op_attr(d.mesh, [d], [d])).result

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
        op = self.insert(ops.SPLIT, [x, sec, ax], [VectorType(tuple(types))], {},
                         self.op_attr(d.mesh, [rin, sec.type.dist, ax.type.dist], [VecDistAttr(tuple(routs))]))
        return list(self.insert(ops.BUILTIN_SPLIT, [op.result], types).results)

    def concat(self, xs, axis: int) -> Value:
        """``concat(list, axis)``: full (axis), builtin.combine (unless ``xs`` is already a
        vector value), concat."""
        ax = self.scalar(axis)
        vec = xs if isinstance(xs, Value) else self.combine(list(xs))
        self._to_dist([vec, ax])
        elems = list(vec.type.elements)
        req, out = spmd.concat([e.dist.dims_mapping for e in elems], axis)
        first = elems[0].dist
        rins = VecDistAttr(tuple(self.tattr(e.dist.mesh, r, spmd.concat_input_partial(e.dist.printed_partial))
                                 for e, r in zip(elems, req)))
        shape = list(elems[0].shape)
        shape[axis] = sum(e.shape[axis] for e in elems)
        rout = self.tattr(first.mesh, spmd.even_only(out, shape, first.mesh.shape))
        op = self.insert(ops.CONCAT, [vec, ax], [self.dist_type(shape, elems[0].dtype, rout)], {},
                         self.op_attr(first.mesh, [rins, ax.type.dist], [rout]))
        return op.result
