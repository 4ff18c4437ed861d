"""distc.console: off a terminal, the plain console writes what rich's console writes (same bytes),
without importing rich; on a terminal it is rich's."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from distc.console import LOG_WIDTH, PlainConsole, Table, err_console

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "mlp_dp2mp2_adamw.ir"


def rich_out(obj, **kw) -> str:
    f = io.StringIO()
    try:
        Console(file=f, no_color=True, highlight=False, soft_wrap=True, width=LOG_WIDTH, emoji=False).print(obj, **kw)
    except Exception as e:  # noqa: BLE001 - markup rich refuses: refused alike
        return repr(e)
    return f.getvalue()


def plain_out(obj, **kw) -> str:
    f = io.StringIO()
    try:
        PlainConsole(f).print(obj, **kw)
    except Exception as e:  # noqa: BLE001
        return repr(e)
    return f.getvalue()


TEXTS = ["", "abc", "abc\n", "\n\nx", "x  ", "a\rb", "a\x07b\x0bc\x0cd\x08", "a\tb", "[0,1]", "[bold]x[/bold]",
         "\\[bold]", "a [#fff]b", "x.ir:100:5: warning: :smile: :+1:", "aé中", "a\x1bb", "a\x00b", "a\x7fb",
         "a\u200bb", "a\x85b\u2028c", "ZeRO-1 saving on rank 0: 2240 bytes = 2.2 KiB (49.6% of optimizer states)",
         "[/]", "[@click]x", "a]b[c", "[a=1]"]


@pytest.mark.parametrize("markup", [True, False])
def test_text_as_rich_writes_it(markup):
    rng = random.Random(7)
    alphabet = "ab :[]/#@\\\n\t\r\x07é中=01"
    texts = TEXTS + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(3000)]
    for t in texts:
        assert plain_out(t, markup=markup) == rich_out(t, markup=markup), repr(t)
    assert plain_out("x", markup=markup, highlight=False, soft_wrap=True) == "x\n"


def test_tables_as_rich_draws_them():
    rng = random.Random(3)
    cells = ["", "0", "12", "all_gather", "[0,1]", "1.2 KiB (1248 B)", "[bold]x", "é", "a b", "x:1:", "a\tb", "a\nb"]
    for _ in range(1500):
        t = Table(title=rng.choice([None, "", "t", "per-rank memory, rank 0 (stage 1, sharding mesh dim 0)", "[b]x"]))
        ncol = rng.randrange(1, 5)
        for _ in range(ncol):
            t.add_column(rng.choice(["", "kind", "bytes sent", "é"]), justify=rng.choice(["left", "right", "center"]))
        for _ in range(rng.randrange(4)):
            t.add_row(*(rng.choice(cells) for _ in range(ncol)))
        assert plain_out(t) == rich_out(t), (t.title, [c.header for c in t.columns], t.rows)


def test_plain_tables_are_drawn_without_rich():
    t = Table(title="x")
    t.add_column("kind")
    t.add_column("count", justify="right")
    t.add_row("all_gather", "5")
    assert t.plain() == ("x\n┏━━━━━━━━━━━━┳━━━━━━━┓\n┃ kind       ┃ count ┃\n┡━━━━━━━━━━━━╇━━━━━━━┩\n"
                         "│ all_gather │     5 │\n└────────────┴───────┘")
    t.add_row("é", "1")
    assert t.plain() is None  # (rich measures the cells)


def test_err_console_off_a_terminal_is_plain(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    con = err_console()
    assert isinstance(con, PlainConsole)
    con.print("a.ir:100:5: warning: x", markup=False)  # (rich made ':100:' an emoji)
    assert sys.stderr.getvalue() == "a.ir:100:5: warning: x\n"


CHILD = r"""
import json, sys
sys.argv = ["distc", *json.loads(sys.argv[1])]
from distc.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "rich")), file=sys.__stdout__)
"""


@pytest.mark.parametrize("args", [["--rank", "0"], ["--all-ranks"]], ids=["rank0", "all-ranks"])
def test_default_shard_run_off_a_terminal_imports_no_rich(tmp_path, args):
    out = str(tmp_path / "m.r{rank}.ir") if "--all-ranks" in args else str(tmp_path / "m.ir")
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(["shard", str(SAMPLE), *args, "-o", out])],
                       capture_output=True, text=True, timeout=120)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
    assert "┏━" in r.stderr and "per-rank memory" in r.stderr or "per rank (4 ranks" in r.stderr
