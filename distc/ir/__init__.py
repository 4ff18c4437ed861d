"""The IR: programs, blocks, ops, values; immutable types, attributes and dist attributes."""

from .attrs import *  # noqa: F401,F403
from .core import Block, BlockArgument, Operation, OpResult, Program, Region, Value  # noqa: F401
from .dist import (  # noqa: F401
    EMPTY_MESH, OperationDistAttr, Partial, Placement, ProcessMesh, REPLICATE, Shard, TensorDistAttr,
    VecDistAttr, split_bounds,
)
from .types import (  # noqa: F401
    NULL_TYPE, DenseTensorType, DistTensorType, NullType, OpaqueType, Type, VectorType,
)
