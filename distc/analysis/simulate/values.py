"""What the simulator computes with: errors, the absent marker, dtypes, one rank's values and
the small readers kernels share (attributes, scalar operands, local shapes)."""

from __future__ import annotations

import numpy as np

from ...ir.attrs import attr_value
from ...ir.core import Operation, Program, Value
from ...ir.types import DenseTensorType, DistTensorType


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
        self.partial: dict | None = None  # rank -> RankValues computed before the failure (the scheduler's)


class NoKernel(SimulationError):
    """The simulator has no kernel for an op: not a verdict about the program."""


class Undecidable(SimulationError):
    """The programs do not say what the simulation needs (the group of a collective whose ring
    no file names, :mod:`.groups`): not a verdict about the program either."""


ABSENT = object()  # a value that does not exist on this rank

FLOAT = ("f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2")
INT = ("i8", "u8", "i16", "i32", "i64", "index")
_NAME_TO_SUFFIX = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "bool": "b",
    "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64",
    "complex64": "c64", "complex128": "c128",
}


def np_dtype(dtype: str) -> np.dtype:
    d = _NAME_TO_SUFFIX.get(dtype, dtype)
    if d in FLOAT:
        return np.dtype(np.float64)
    if d in INT:
        return np.dtype(np.int64)
    if d == "b":
        return np.dtype(np.bool_)
    if d in ("c64", "c128"):
        return np.dtype(np.complex128)
    return np.dtype(np.float64)




class RankValues(dict):
    """One rank's simulated values: ``Value -> ndarray`` (vectors are lists), and also the
    printed names (``"%3"``).  ``notes`` is what the simulator noticed (pass-throughs,
    type/shape disagreements), ``executed`` the ops run on the rank."""

    def __init__(self, rank: int, program: Program) -> None:
        super().__init__()
        self.rank = rank
        self.program = program
        self.notes: list[str] = []
        self.assumed: list[str] = []  # what the files do not say and the simulation took (.groups)
        self.executed: list[Operation] = []

    def get_value(self, v: Value):
        x = dict.get(self, v, ABSENT)
        return None if x is ABSENT else x


def int_list(x) -> list[int]:
    if isinstance(x, np.ndarray):
        return [int(v) for v in x.reshape(-1)]
    if isinstance(x, (list, tuple)):
        return [int(v) for v in x]
    return [int(x)]


def scalar(x) -> float:
    if isinstance(x, np.ndarray):
        return x.reshape(-1)[0].item()
    return x


def attr(op: Operation, key: str, default=None):
    a = op.attrs.get(key)
    return default if a is None else attr_value(a)


def operand_or_attr(vals: list, i: int, op: Operation, key: str, default=None, conv=scalar):
    """Operand ``i`` when the op has it (a tensor such as a slice's starts), else attribute ``key``."""
    if len(vals) > i and vals[i] is not None:
        return conv(vals[i])
    v = attr(op, key, default)
    return v if v is None or conv is scalar else conv(v)


def local_shape(t, rank: int) -> tuple[int, ...] | None:
    if isinstance(t, DistTensorType):
        if rank in t.dist.mesh.process_ids or not t.dist.dims_mapping:
            return t.local_shape(rank)
        return t.local_shape(None)
    if isinstance(t, DenseTensorType):
        return t.shape
    return None


def norm_axis(a: int, nd: int) -> int:
    return a + nd if a < 0 else a
