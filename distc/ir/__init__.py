"""The IR: programs, blocks, ops, values; immutable types, attributes and dist attributes.

The names are those of the submodules (:mod:`~distc.ir.attrs` whole, the classes of
:mod:`~distc.ir.core`, :mod:`~distc.ir.dist` and :mod:`~distc.ir.types`), each imported when first
asked for.  The package imports none of them itself: threads whose first imports meet here --
one importing ``distc.ir`` (its ``__init__`` holding the package's import lock while it imported a
submodule), another a submodule first (holding that submodule's lock while it imported the
package) -- could deadlock in Python 3.11's per-module import locks and hand a thread a partly
initialised module (tests/test_pipeline_threads.py)."""

from __future__ import annotations

_WHERE = {
    **dict.fromkeys(("Block", "BlockArgument", "Operation", "OpResult", "Program", "Region", "Value"), "core"),
    **dict.fromkeys(("EMPTY_MESH", "OperationDistAttr", "Partial", "Placement", "ProcessMesh", "REPLICATE", "Shard",
                     "TensorDistAttr", "VecDistAttr", "split_bounds"), "dist"),
    **dict.fromkeys(("NULL_TYPE", "DenseTensorType", "DistTensorType", "NullType", "OpaqueType", "Type", "VectorType"),
                    "types"),
}


def __getattr__(name: str):
    from importlib import import_module

    if name == "__all__":  # (``from distc.ir import *``)
        return __dir__()
    module = import_module(f"{__name__}.{_WHERE.get(name, 'attrs')}")
    if name in _WHERE or (not name.startswith("_") and hasattr(module, name)):
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")  # (a submodule: imported by from-imports)


def __dir__() -> list[str]:
    from importlib import import_module

    attrs = import_module(f"{__name__}.attrs")
    return sorted({*_WHERE, *(n for n in vars(attrs) if not n.startswith("_"))})
