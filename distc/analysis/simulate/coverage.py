"""Which ops the simulator cannot run, found before it runs anything: every op name of the
programs to simulate (inside regions too) that has no kernel, with how many such ops there are
and where the first one is in each program."""

from __future__ import annotations

from typing import Iterable

from ...ir.core import Program
from ...ir.records import field, record
from .registry import lookup


@record
class Missing:
    """One op name without a kernel: its count over all programs and its first op in each."""

    name: str
    count: int = 0
    first: list[tuple[int | None, str | None, int | None, int | None]] = field(default_factory=list)
    # (rank or None for the serial program, file, line, col)

    def where(self) -> str:
        out = []
        for rank, f, line, col in self.first:
            at = f"{f or '<input>'}:{line}:{col}" if line is not None else (f or "<input>")
            out.append(at + (f" (rank {rank})" if rank is not None else ""))
        return ", ".join(out)

    def as_dict(self) -> dict:
        return {"op": self.name, "count": self.count,
                "first": [{"rank": r, "file": f, "line": ln, "col": c} for r, f, ln, c in self.first]}


def missing_kernels(programs: Iterable[tuple[int | None, Program]]) -> list[Missing]:
    """The op names of ``programs`` ((rank or None, program) pairs, in report order) that have no
    kernel, in order of first appearance."""
    found: dict[str, Missing] = {}
    for rank, prog in programs:
        seen: set[str] = set()
        for op in prog.walk():
            if lookup(op.name) is None:
                m = found.setdefault(op.name, Missing(op.name))
                m.count += 1
                if op.name not in seen:
                    seen.add(op.name)
                    loc = op.loc or (None, None)
                    m.first.append((rank, prog.filename, loc[0], loc[1]))
    return list(found.values())


def summary(missing: list[Missing]) -> str:
    n = len(missing)
    head = f"no kernel for {n} op name{'s' if n != 1 else ''} (nothing simulated; the simulator cannot prove these programs):"
    return "\n".join([head] + [f"  {m.name}: {m.count} op{'s' if m.count != 1 else ''}; first at {m.where()}"
                              for m in missing])
