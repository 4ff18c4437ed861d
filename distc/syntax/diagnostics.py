"""Located errors: ``path:line:col: error: message``, then the source line and a caret; and the
printer's error for an operand without a name (:class:`UnnamedOperand`: distc's, not the input's)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..ir.core import Operation, Program


class DiagnosticError(Exception):
    """An error in the user's input (or in what they asked for), with a source location."""

    def __init__(self, message: str, line: int | None = None, col: int | None = None,
                 filename: str | None = None, source: str | None = None, notes: list[str] | None = None,
                 severity: str = "error"):
        super().__init__(message)
        self.severity = severity  # "warning": rendered alike, by a caller that goes on
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename
        self.source = source
        self.notes = notes or []

    def located(self, filename: str | None, source: str | None) -> "DiagnosticError":
        if self.filename is None:
            self.filename = filename
        if self.source is None:
            self.source = source
        return self

    def render(self) -> str:
        name = self.filename or "<input>"
        if self.line is None:
            head = f"{name}: {self.severity}: {self.message}"
            return "\n".join([head, *(f"note: {n}" for n in self.notes)])
        col = self.col or 1
        head = f"{name}:{self.line}:{col}: {self.severity}: {self.message}"
        out = [head]
        if self.source is not None:
            lines = self.source.split("\n")
            if 0 < self.line <= len(lines):
                text = lines[self.line - 1].rstrip("\r")
                if not text.isprintable():  # control characters (a binary file ...) as U+FFFD, one for one
                    text = "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in text)
                shown, caret_col = _clip(text, col)
                out.append(shown)
                prefix = "".join(c if c == "\t" else " " for c in shown[: caret_col - 1])
                out.append(prefix + "^")
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


def _clip(text: str, col: int, width: int = 160) -> tuple[str, int]:
    """Long PIR lines are clipped around the column so the caret stays readable."""
    if len(text) <= width:
        return text, col
    start = max(0, col - 1 - width // 2)
    end = min(len(text), start + width)
    shown = ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "")
    return shown, col - start + (3 if start else 0)


def line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


class Diagnostics:
    """The warnings of one run, in order: located :class:`DiagnosticError` objects of severity
    ``warning`` or already rendered texts (``path: warning: ...``).  Each run (a command, a
    :func:`distc.shard` call) has its own; ``sink``, if given, sees each rendered warning as it
    comes (the command line prints it on stderr)."""

    def __init__(self, sink=None) -> None:
        self.items: list[DiagnosticError | str] = []
        self.sink = sink

    def warn(self, w: "DiagnosticError | str") -> None:
        self.items.append(w)
        if self.sink is not None:
            self.sink(w.render() if isinstance(w, DiagnosticError) else w)

    @property
    def warnings(self) -> list[str]:
        """Each warning's first line (what ``--json`` summaries carry)."""
        return [(w.render() if isinstance(w, DiagnosticError) else w).split("\n", 1)[0] for w in self.items]

    def __len__(self) -> int:
        return len(self.items)


class UnnamedOperand(ValueError):
    """An operand whose value has no name where the printer reaches it: no op of the program
    defines the value before this use (the verifier's 'used before it is defined'; a pass that
    left a use of a value it removed).  Raised where the op is printed, naming the op (its
    location in its file) and the operand."""


def unnamed_operand(prog: "Program", op: "Operation", names: dict) -> UnnamedOperand:
    """The error for ``op``'s first operand without a name (``names``: the printer's so far)."""
    i, v = next((i, v) for i, v in enumerate(op.operands) if v is not None and names.get(v, v.name) is None)
    f = prog.filename or "<input>"
    where = f"{f}:{op.loc[0]}:{op.loc[1]}" if op.loc else f"{f} (an op a pass created)"
    owner = v.owner
    if owner is None:
        why = "no op defines its value"
    else:
        at = f" (line {owner.loc[0]})" if owner.loc else ""
        inside = owner.parent is not None and any(o is owner for o in prog.walk())
        why = (f"its value is result {v.index} of '{owner.name}'{at}, " +
               ("which comes after this use" if inside else "which is not in the program"))
    return UnnamedOperand(f"{where}: '{op.name}': operand {i} has no name: {why}")
