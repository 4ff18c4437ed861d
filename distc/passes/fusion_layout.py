"""The buffers of ZeRO with tensor fusion (Paddle's ``ShardingOptimizerStage1``), as data: which
optimizer updates of the stage-0 program are fused, how the parameters are grouped into buffers
and padded, which piece of each buffer a rank of the sharding group owns.  Used by the
``tensor-fusion`` pass (:mod:`.tensor_fusion`), its startup step (:mod:`.fusion_startup`) and the
``distc shard`` summary (:func:`owners`, :func:`plan_summary`)."""

from __future__ import annotations


from ..dialects import ops
from ..dialects.fusion import padded as padded_size, pieces as fused_pieces
from ..ir.core import Operation, Value
from ..ir import attrs as A
from ..ir.builder import Maker
from ..ir.records import field, record
from ..ir.types import DTYPE_SUFFIX_TO_NAME, DistTensorType

NULL = A.RawAttr("<#AttrNull>")
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8}
ACC_ORDER = {"moment1": 0, "moment2": 1, "moment2_max": 2, "beta1_pow_acc": 3, "beta2_pow_acc": 4, "master": 5}
POWS = ("beta1_pow_acc", "beta2_pow_acc")


@record
class Update:
    """One optimizer op of the stage-0 program and what it reads (kept: the op itself goes)."""

    op: Operation
    param: Value
    grad: Value  # the gradient as backward produced it (before a clip)
    name: str  # the parameter's name
    scalars: list[Operation]  # the pd_op.full operands made for the op (beta1, beta2, epsilon)
    states: dict[int, Operation]  # operand index -> the pd_op.data of a state / beta pow / master
    sig: object = None  # its optimizer signature
    operands: list = field(default_factory=list)  # its operands
    mesh: object = None  # the parameter's mesh (kept: a dense program's values have none)


@record
class Piece:
    """The part ``[begin, end)`` of this rank's shard of a buffer that holds (part of) a parameter:
    the rank updates it as the parameter ``slice@NAME``."""

    update: Update
    begin: int
    end: int


@record
class Buffer:
    """One fused buffer: its parameters in order, each padded to ``align`` bytes."""

    index: int
    mesh: object
    updates: list[Update]
    padded: list[int]  # elements each parameter takes
    size: int  # elements
    shard: int  # elements per rank of the sharding group
    align: int  # bytes (coalesce_tensor_'s align_size: the device alignment x the sharding degree)
    name: str  # fused@-NAME-NAME...
    pieces: list[Piece] = field(default_factory=list)  # this rank's
    group: list[int] = field(default_factory=list)  # its sharding group (a buffer of a sub-mesh: that one's)
    rank_index: int = 0  # the rank's place in it
    ring: list[int] = field(default_factory=list)  # the communicator's ranks, if not ``group``'s (another pp stage's)


def param_name(v: Value) -> str:
    op = v.owner
    a = op.attr("parameter_name") if op is not None else None
    return str(getattr(a, "value", "")) if a is not None else ""


def data_name(op: Operation) -> str:
    return str(getattr(op.attr("name"), "value", ""))


def value_name(v: Value | None) -> str:
    """The name a persistable value goes by (a parameter's or a data op's)."""
    op = v.owner if v is not None else None
    if op is None:
        return ""
    return param_name(v) if op.name == ops.PARAMETER else data_name(op)


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES.get(dtype, 4)


def local_shape(v: Value) -> tuple[int, ...]:
    t = v.type
    return t.dist.local_shape(tuple(t.shape)) if isinstance(t, DistTensorType) else tuple(t.shape)


def acc_kind(name: str) -> str:
    """``moment1``, ``beta2_pow_acc`` ... of an optimizer state's name."""
    import re

    m = re.search(r"_(moment1|moment2_max|moment2|beta1_pow_acc|beta2_pow_acc|master)(_\d+)?$", name)
    return m.group(1) if m else ""


def group_by_size(updates: list[Update], limit: int) -> list[list[int]]:
    """Paddle's ``assign_group_by_size`` (``Eager_AssignGroupBySize``): per dtype, a group closes
    once its bytes reach ``limit`` (0: every parameter its own group); groups sorted by their
    first index."""
    res: list[list[int]] = []
    nxt: dict[str, tuple[list[int], int]] = {}
    for i, u in enumerate(updates):
        t = u.param.type
        idx, size = nxt.get(t.dtype, ([], 0))
        idx = idx + [i]
        size += dtype_bytes(t.dtype) * numel(t.shape)
        if size >= limit:
            res.append(idx)
            idx, size = [], 0
        nxt[t.dtype] = (idx, size)
    res += [idx for idx, _ in nxt.values() if idx]
    return sorted(res, key=lambda g: g[0])


def make_buffer(index: int, mesh, us: list[Update], align_bytes: int, group: list[int], rank_index: int) -> Buffer:
    """The buffer of ``us`` (``_fuse_group_param``): padded sizes, the shard of the rank at
    ``rank_index`` in the sharding ``group`` and the pieces of parameters it covers."""
    degree = len(group)
    nb = dtype_bytes(us[0].param.type.dtype)
    align = align_bytes // nb * degree  # Paddle: alignment[device] // align[dtype] * degree (bytes)
    padded = [padded_size(numel(local_shape(u.param)) * nb, align) // nb for u in us]
    size = sum(padded)
    shard = size // degree
    b = Buffer(index, mesh, us, padded, size, shard, align, "fused@" + "".join("-" + u.name for u in us))
    b.pieces = pieces_of(b, rank_index)
    b.group, b.rank_index = list(group), rank_index
    return b


def pieces_of(b: Buffer, rank_index: int) -> list[Piece]:
    return [Piece(b.updates[k], lo, hi) for k, lo, hi in fused_pieces(b.padded, b.shard, rank_index)]


def owners(b: Buffer, group: list[int]) -> dict[str, list[tuple[int, int]]]:
    """Parameter name -> [(rank, elements of its update that rank runs)] over the sharding group."""
    out: dict[str, list[tuple[int, int]]] = {}
    for i, r in enumerate(group):
        for pc in pieces_of(b, i):
            out.setdefault(pc.update.name, []).append((r, pc.end - pc.begin))
    return out


def plan_summary(buffers: list[Buffer], group: list[int], rank: int) -> dict:
    """Plain data for a summary: each buffer the rank holds (parameters, elements, bytes, per-rank
    shard, its sharding group) and who updates each parameter."""
    out = []
    for b in buffers:
        if rank not in b.mesh.process_ids:  # a sub-mesh's buffer (MoE experts): not on this rank
            continue
        nb = dtype_bytes(b.updates[0].param.type.dtype)
        out.append({"buffer": b.index, "parameters": [u.name for u in b.updates], "elements": b.size,
                    "bytes": b.size * nb, "shard_bytes": b.shard * nb, "align_bytes": b.align,
                    "group": list(b.group or group), "owners": owners(b, b.group or group),
                    "mine": [(pc.update.name, pc.end - pc.begin) for pc in b.pieces]})
    return {"rank": rank, "group": list(group), "buffers": out}


def dtype_name(d: str) -> str:
    return DTYPE_SUFFIX_TO_NAME.get(d, d)


def coalesce_attrs(mk: Maker, align: int, dtype: str) -> dict:
    """``coalesce_tensor_(xs, dtype, copy_data=True, set_constant=False, persist_output=False,
    constant=0.0, use_align=True, align_size, size_of_dtype=-1, [], [])`` as Paddle calls it."""
    return {"align_size": mk.i32(align), "concated_ranks": A.ArrayAttr(()), "concated_shapes": A.ArrayAttr(()),
            "constant": mk.i32(0), "copy_data": A.BoolAttr(True), "dtype": A.IdentAttr(dtype_name(dtype)),
            "persist_output": A.BoolAttr(False), "persistable": A.ArrayAttr((NULL, A.BoolAttr(True))),
            "set_constant": A.BoolAttr(False), "size_of_dtype": mk.i32(-1), "use_align": A.BoolAttr(True)}
