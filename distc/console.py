"""What distc shows on stderr: rich's console on a terminal; off a terminal (CI logs, files,
pipes) the same characters written without importing rich (~60 ms of a default run's start-up).

:func:`err_console` gives the console, :class:`Table` is the summaries' table (title, columns,
rows: what ``rich.table.Table`` draws, and drawn by rich on a terminal).  Off a terminal rich
draws nothing wrapped or coloured (the console is :data:`LOG_WIDTH` wide, soft-wrapped, no
colour): a line of text is the text itself, a table its heavy-headed box as wide as its content,
the title on its own line above.  :class:`PlainConsole` writes those characters itself where the
text is plain -- ASCII without tabs or control characters, and no rich markup tag where markup is
read -- and hands anything else to rich (``tests/test_console.py`` holds the two to the same
bytes).  Neither replaces emoji codes: rich did, and ``x.ir:100:5: warning:`` came out as
``x.ir💯5: warning:``.
"""

from __future__ import annotations

import io
import os
import re
import sys

LOG_WIDTH = 100_000  # the console width off a terminal

# rich's markup tags (rich.markup.RE_TAGS: where a text holds one, or an escaped "\\[", rich reads it) and the
# control codes its text drops (rich.control)
_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")
_PLAIN = re.compile(r"[\x20-\x7e\n]*")
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))
_DEFAULTS = {"highlight": False, "soft_wrap": True}  # print()'s options that change nothing here


class Column:
    __slots__ = ("header", "justify")

    def __init__(self, header: str, justify: str) -> None:
        self.header, self.justify = header, justify


class Table:
    """A table as ``rich.table.Table`` draws it by default (``title``, ``add_column(header,
    justify=)``, ``add_row(*cells)``, ``columns``); printed by either console."""

    def __init__(self, title: str | None = None) -> None:
        self.title = title
        self.columns: list[Column] = []
        self.rows: list[tuple] = []

    def add_column(self, header: str = "", justify: str = "left") -> None:
        self.columns.append(Column(header, justify))

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def __rich__(self):
        from rich.table import Table as RichTable

        t = RichTable(title=self.title)
        for c in self.columns:
            t.add_column(c.header, justify=c.justify)  # type: ignore[arg-type]
        for r in self.rows:
            t.add_row(*r)
        return t

    def plain(self) -> str | None:
        """The table as rich draws it off a terminal; None if a text in it is not plain (rich then)."""
        texts = [c.header for c in self.columns] + [x for r in self.rows for x in r]
        if self.title is not None:
            texts.append(self.title)
        if not all(isinstance(x, str) and _plain(x, markup=True) and "\n" not in x for x in texts) or \
                not self.columns or any(len(r) != len(self.columns) for r in self.rows):
            return None
        widths = [max([len(c.header)] + [len(r[i]) for r in self.rows]) for i, c in enumerate(self.columns)]

        def line(left: str, fill: str, mid: str, right: str) -> str:
            return left + mid.join(fill * (w + 2) for w in widths) + right

        def row(cells, bar: str) -> str:
            out = []
            for x, w, c in zip(cells, widths, self.columns):
                pad = w - len(x)
                if c.justify == "right":
                    x = " " * pad + x
                elif c.justify == "center":
                    x = " " * (pad // 2) + x + " " * (pad - pad // 2)
                else:
                    x += " " * pad
                out.append(" " + x + " ")
            return bar + bar.join(out) + bar

        lines = [] if not self.title else [self.title]
        lines += [line("┏", "━", "┳", "┓"), row([c.header for c in self.columns], "┃"), line("┡", "━", "╇", "┩")]
        lines += [row(r, "│") for r in self.rows]
        lines.append(line("└", "─", "┴", "┘"))
        return "\n".join(lines)


def _plain(text: str, markup: bool) -> bool:
    """Whether rich shows ``text`` as it is (control codes it drops aside: see :meth:`PlainConsole.print`)."""
    return _PLAIN.fullmatch(text) is not None and not (markup and "[" in text and ("\\[" in text or _TAG.search(text)))


class PlainConsole:
    """rich's console off a terminal, for plain text and :class:`Table` (anything else: rich's own)."""

    def __init__(self, file=None) -> None:
        self.file = file  # None: sys.stderr at each print (as rich's stderr console)

    def print(self, obj="", *, markup: bool = True, **kw) -> None:
        if isinstance(obj, Table):
            text = obj.plain()
        elif isinstance(obj, str) and kw.items() <= _DEFAULTS.items():
            text = obj.translate(_STRIPPED) if "\t" not in obj and _plain(obj.translate(_STRIPPED), markup) else None
        else:
            text = None
        if text is None:
            _rich_console(self.file, tty=False).print(obj, markup=markup, **kw)
            return
        f = self.file or sys.stderr
        f.write(text + "\n")
        f.flush()


def _rich_console(file, tty: bool):
    from rich.console import Console

    if file is not None:
        return Console(file=file, no_color=True, highlight=False, soft_wrap=True, width=LOG_WIDTH, emoji=False)
    no_color = bool(os.environ.get("NO_COLOR")) or not tty
    # off a terminal (CI logs, files) nothing wraps: a table is as wide as its content
    return Console(stderr=True, no_color=no_color, highlight=False, soft_wrap=True, width=None if tty else LOG_WIDTH,
                   emoji=False)


def err_console():
    """The console on stderr: rich's on a terminal, a :class:`PlainConsole` off it."""
    if sys.stderr is None:  # stderr closed: nothing can be shown
        return PlainConsole(io.StringIO())
    try:
        tty = sys.stderr.isatty()
    except (OSError, ValueError):
        tty = False
    return _rich_console(None, tty) if tty else PlainConsole()
