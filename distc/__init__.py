"""distc: a compiler for PaddlePaddle's distributed PIR programs (read, rewrite, print).

Layers, bottom-up (each imports only from itself and below; ``tests/test_layers.py``):
``ir`` (programs, types, dist attributes, builder) -> ``syntax`` (parser, printer) ->
``dialects`` (Paddle's op names, collectives, optimizer table, SPMD rules) -> ``analysis``
(verifier, cost, memory, simulator, diff) -> ``passes`` (one file a pass; ``passes.paddle_api`` the
one op builder) -> ``pipeline`` (the library's shard pipeline) -> ``driver`` -> ``commands`` / ``cli``.

This module is the library's face: ``distc.parse``, ``distc.print_program``, the IR classes and
``distc.shard`` (:func:`distc.pipeline.shard`; ``shard_ranks``, ``ShardOptions``, ``ShardPipeline``
with it), each imported when first used: so that reading and printing programs costs no passes, and
the ``distc`` command can set up its process (:mod:`distc.cli`) before the modules it runs load.
"""

from __future__ import annotations

from _thread import RLock

__version__ = "0.1.0"  # the one place the version is written (pyproject reads it from here)

# name -> the module defining it
_WHERE = {
    **dict.fromkeys(("Block", "BlockArgument", "Operation", "OpResult", "Program", "Region", "Value"), "ir.core"),
    "DiagnosticError": "syntax.diagnostics", "parse": "syntax.parser", "print_program": "syntax.printer",
    **dict.fromkeys(("RankResult", "ShardOptions", "ShardPipeline", "ShardResult", "shard", "shard_ranks"),
                    "pipeline"),
}

__all__ = [*_WHERE, "__version__"]

# Library threads whose first call is ``distc.parse`` / ``distc.shard`` load its modules one thread at a
# time: several threads importing the same package tree at once can deadlock in Python 3.11's per-module
# import locks (a package's ``__init__`` importing a submodule another thread is importing) and get a
# partly initialised module.  A lock, not state: nothing is kept in it.
_LOADING = RLock()


def __getattr__(name: str):
    from importlib import import_module

    where = _WHERE.get(name)
    if where is not None:
        with _LOADING:
            if where == "ir.core":  # a program made here prints (``str``): the printer installs itself on import
                import_module(f"{__name__}.syntax.printer")
            module = import_module(f"{__name__}.{where}")
        return getattr(module, name)
    if not name.startswith("_"):  # a subpackage (``distc.ir.ProcessMesh`` after ``import distc``)
        try:
            return import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'distc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
