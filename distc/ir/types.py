"""Types as immutable values.  Each keeps the spelling of its dialect prefix so it prints back as read."""

from __future__ import annotations

from math import prod

from .dist import TensorDistAttr
from .records import field, record, replace

DTYPE_BYTES = {
    "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "b": 1, "i8": 1, "u8": 1, "i16": 2, "i32": 4,
    "i64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1, "index": 8,
}

# pd_op.DataType names <-> type-suffix spellings
DTYPE_NAMES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "bool": "b",
    "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64",
    "complex64": "c64", "complex128": "c128", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
}
DTYPE_SUFFIX_TO_NAME = {v: k for k, v in DTYPE_NAMES.items()}


def _shape_text(shape: tuple[int, ...], dtype: str) -> str:
    return "".join(f"{d}x" for d in shape) + dtype


@record(frozen=True, slots=True)
class DenseTensorType:
    """``builtin.tensor<4x8xf32>`` (2024), ``pd_op.tensor<...>`` (2023) or ``tensor<...>`` (now)."""

    shape: tuple[int, ...]
    dtype: str
    prefix: str = "tensor"

    def __str__(self) -> str:
        return f"{self.prefix}<{_shape_text(self.shape, self.dtype)}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return prod(self.shape) if all(d >= 0 for d in self.shape) else 0

    def nbytes(self) -> int:
        return self.numel() * DTYPE_BYTES.get(self.dtype, 4)

    def with_shape(self, shape: tuple[int, ...]) -> "DenseTensorType":
        return replace(self, shape=tuple(shape))


@record(frozen=True, slots=True)
class DistTensorType:
    """``pd_dist.tensor<GLOBALxDTYPE, dist attr>``: the shape is the global one."""

    shape: tuple[int, ...]
    dtype: str
    dist: TensorDistAttr
    _memo: dict | None = field(default=None, init=False, compare=False, repr=False, hash=False)

    def __str__(self) -> str:
        return f"pd_dist.tensor<{_shape_text(self.shape, self.dtype)}, {self.dist.format()}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def local_shape(self, rank: int | None = None) -> tuple[int, ...]:
        return self.dist.local_shape(self.shape, rank)

    def numel(self) -> int:
        return prod(self.shape) if all(d >= 0 for d in self.shape) else 0

    def nbytes(self) -> int:
        return self.numel() * DTYPE_BYTES.get(self.dtype, 4)

    def local_nbytes(self, rank: int | None = None) -> int:
        return prod(self.local_shape(rank)) * DTYPE_BYTES.get(self.dtype, 4)

    def with_dist(self, dist: TensorDistAttr) -> "DistTensorType":
        """This type on ``dist``: one shared object per layout as it prints (passes retype
        thousands of values to a few layouts; shared types keep the id()-keyed caches of the
        verifier and the printer hitting: mlp256 after reshard held 3,247 type objects for 24
        types).  The key is the layout's value and what prints it but is not compared."""
        m = self._memo
        if m is None:
            m = {}
            object.__setattr__(self, "_memo", m)
        key = (dist, dist.form, dist.placements_shown, dist.partial_order, dist.mesh.dim_names)
        t = m.get(key)
        if t is None:  # (the constructor: replace() costs 5x)
            t = m[key] = DistTensorType(self.shape, self.dtype, dist)
        return t

    def with_shape(self, shape: tuple[int, ...]) -> "DistTensorType":
        return replace(self, shape=tuple(shape))

    def to_dense(self, prefix: str = "tensor", rank: int | None = None) -> DenseTensorType:
        return DenseTensorType(self.local_shape(rank), self.dtype, prefix)


@record(frozen=True, slots=True)
class VectorType:
    """``vec[T,T]``: the type of a list value (``builtin.combine``, ``split_with_num``)."""

    elements: tuple["Type", ...]

    def __str__(self) -> str:
        return "vec[" + ",".join(str(t) for t in self.elements) + "]"


@record(frozen=True, slots=True)
class NullType:
    """``<<NULL TYPE>>``: the type of an absent optional value."""

    def __str__(self) -> str:
        return "<<NULL TYPE>>"


@record(frozen=True, slots=True)
class OpaqueType:
    """Any other ``dialect.name<...>`` type, kept as written."""

    text: str

    def __str__(self) -> str:
        return self.text


Type = DenseTensorType | DistTensorType | VectorType | NullType | OpaqueType
NULL_TYPE = NullType()
