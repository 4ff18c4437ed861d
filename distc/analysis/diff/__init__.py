"""``distc diff``'s engine: two programs compared up to a consistent renaming of value names and
ring ids, ops aligned by name, operands and results (:mod:`.align`, :mod:`.compare`), reported
per op with attribute-level changes and a per-rank summary (:mod:`.report`)."""

from .compare import Change, DiffResult, OpDiff, diff_programs
from .report import describe, infer_rank, render_text, summary, to_json

__all__ = ["Change", "DiffResult", "OpDiff", "diff_programs", "describe", "infer_rank", "render_text",
           "summary", "to_json"]
