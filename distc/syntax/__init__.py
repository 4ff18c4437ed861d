"""PIR text: the parser package, the printer (installed into ``distc.ir`` for ``str(program)``),
the grammar and located diagnostics.

Importing this package installs the printer hook without importing the printer: the hook's first
call imports :mod:`distc.syntax.printer`, which puts its own functions in its place.  (Importing a
submodule here would hold this package's import lock while waiting for the submodule's, and a
thread importing one of this package's submodules first holds that one's while waiting for this
package's: in Python 3.11 the two deadlock; tests/test_pipeline_threads.py.)"""

from __future__ import annotations

from ..ir.core import set_printer


def _print(program) -> str:
    from .printer import print_program

    return print_program(program)


def _names(program) -> dict:
    from .printer import number_values

    return number_values(program)


set_printer(_print, _names)
