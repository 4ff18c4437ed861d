"""Golden-file testing for programs distc reads and writes (for your own pytest suites).

    from distc.testing import assert_matches_golden

    def test_rank0_program(tmp_path):
        out = run_my_pipeline()                      # a distc Program, or PIR text
        assert_matches_golden(out, "tests/golden/main.r0.ir")

The comparison is ``distc diff``'s: equal up to a consistent renaming of value names and ring ids
(``exact_rings=True`` compares ring ids as numbers; ``ignore_attrs`` drops attributes).  On a
difference the assertion message is the diff report (ops, lines, attribute changes), and pytest
shows that report, not this helper's code.  With the environment variable ``DISTC_UPDATE_GOLDEN=1``
(or ``update=True``) a golden file that differs (or is missing, or does not parse) is rewritten
with the program's text, whole, and the check passes; a golden file equal to the program (up to
value names and ring ids) is left as it is, byte for byte as reviewed.  Review the changes with
``git diff`` before committing them.
"""

from __future__ import annotations

import os

from .analysis.diff import diff_programs, render_text
from .ir.core import Program
from .outputs import Outputs
from .syntax.diagnostics import DiagnosticError
from .syntax.parser import parse

UPDATE_ENV = "DISTC_UPDATE_GOLDEN"


def update_requested() -> bool:
    return os.environ.get(UPDATE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def assert_matches_golden(program_or_text: Program | str, path: str | os.PathLike, *,
                          exact_rings: bool = False, ignore_attrs: tuple[str, ...] = (),
                          update: bool | None = None) -> None:
    """Assert that a program equals the golden file at ``path`` (see the module docstring)."""
    __tracebackhide__ = True  # pytest: the report is the message, not this function's code
    path = os.fspath(path)
    text = program_or_text if isinstance(program_or_text, str) else str(program_or_text)
    try:
        actual = parse(text, "<actual>")
    except DiagnosticError as e:
        raise AssertionError("the program does not parse:\n" + e.located("<actual>", text).render()) from None
    report = _differs(actual, path, exact_rings, ignore_attrs)
    if report is None:
        return
    if update if update is not None else update_requested():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with Outputs() as out:
            out.write(out.add("golden file", path), text)
            out.commit()
        return
    raise AssertionError(report)


def _differs(actual: Program, path: str, exact_rings: bool, ignore_attrs) -> str | None:
    """None if the golden file at ``path`` equals ``actual``, else what differs."""
    if not os.path.exists(path):
        return f"{path}: no golden file; create it with {UPDATE_ENV}=1"
    with open(path, encoding="utf-8", newline="") as f:
        golden_text = f.read()
    try:
        golden = parse(golden_text, path)
    except DiagnosticError as e:
        return "the golden file does not parse:\n" + e.located(path, golden_text).render()
    res = diff_programs(golden, actual, exact_rings=exact_rings, ignore_attrs=tuple(ignore_attrs))
    if res.equal:
        return None
    return (f"program differs from golden file {path} (rewrite it with {UPDATE_ENV}=1):\n"
            + render_text(res, path, "<actual>", None))
