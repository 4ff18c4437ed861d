"""Test helpers: structural IR comparison and ring-id normalisation."""

from __future__ import annotations

import re

from distc.ir.core import Block, Program


def structure(prog: Program) -> list:
    """A plain nested description of a program (names, types, attrs) for equality checks."""
    return _block(prog.block)


def _block(b: Block) -> list:
    out: list = [("args", [(a.name, str(a.type), a.keyword, sorted((k, str(v)) for k, v in a.attrs.items())) for a in b.args])]
    for op in b.ops:
        out.append((
            op.name, op.op_id, op.sig, op.operand_keywords,
            [None if v is None else v.name for v in op.operands],
            [(r.name, r.type) for r in op.results],
            list(op.attrs.items()),
            [[_block(blk) for blk in r.blocks] for r in op.regions],
        ))
    return out


_RING = re.compile(r"ring_id:(\(Int32\))?(-?\d+)")


def normalize_rings(text: str) -> str:
    """Rename ring ids bijectively, in order of first appearance (R0, R1, ...)."""
    mapping: dict[str, str] = {}

    def sub(m: re.Match) -> str:
        key = m.group(2)
        if key not in mapping:
            mapping[key] = f"R{len(mapping)}"
        return f"ring_id:{m.group(1) or ''}{mapping[key]}"

    return _RING.sub(sub, text)
