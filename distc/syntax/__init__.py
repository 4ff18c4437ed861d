"""PIR text: the parser package, the printer (installed into ``distc.ir`` for ``str(program)``),
the grammar and located diagnostics."""

from . import printer  # noqa: F401  (installs the printer hook)
