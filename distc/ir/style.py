"""The print style of a program, detected when it is parsed, so that new ops print like old ones."""

from __future__ import annotations

from .records import record


@record
class Style:
    typed_attrs: bool = False  # 2023/2024: (Int32)1, (pd_op.DataType)float32 ...
    tensor_prefix: str = "tensor"  # "builtin.tensor" (2024), "pd_op.tensor" (2023), "tensor" (now)
    placements: bool = True  # ", placements:[...]" in dist attrs (late 2024 on)
    chunk_id: bool = True  # ",chunk_id:-1" in op_dist_attr
    dist_form: str = "full"  # "nopids": the F1 format without process_ids
    sorted_attrs: bool = True  # attribute keys printed sorted (Paddle's printer does)
    renumber: bool = True  # %N renumbered in print order (Paddle's printer does)
    indent: str = "    "
    double_fill: bool = True  # full's value as (Double) rather than (Float) in typed style
    newline: str = "\n"  # "\r\n": a CRLF file prints back with CRLF

    @property
    def era(self) -> str:
        """'2024' for the typed-attribute styles (old collective names), else 'current'."""
        return "2024" if self.typed_attrs else "current"
