"""What the CLI commands share: reading inputs, writing outputs whole, reporting diagnostics."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from contextlib import contextmanager
from typing import Iterator

import click

from .ir.core import Program
from .syntax.diagnostics import DiagnosticError
from .syntax.parser import parse

PROGRESS_BYTES = 4 << 20  # show a progress bar for inputs larger than this (on a terminal)


def err_console():
    from rich.console import Console

    no_color = bool(os.environ.get("NO_COLOR")) or not sys.stderr.isatty()
    return Console(stderr=True, no_color=no_color, highlight=False, soft_wrap=True)


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        raise DiagnosticError("no such file", filename=path) from None
    except IsADirectoryError:
        raise DiagnosticError("is a directory", filename=path) from None
    except UnicodeDecodeError as e:
        raise DiagnosticError(f"not UTF-8 text ({e.reason} at byte {e.start})", filename=path) from None


def load(path: str) -> Program:
    text = read_text(path)
    return parse_text(text, "<stdin>" if path == "-" else path)


def parse_text(text: str, name: str) -> Program:
    """Parse, with a progress bar on stderr for big inputs when stderr is a terminal."""
    if len(text) > PROGRESS_BYTES and sys.stderr.isatty():
        from rich.progress import Progress

        with Progress(console=err_console(), transient=True) as prog:
            task = prog.add_task(f"parsing {os.path.basename(name)}", total=len(text))
            return parse(text, name, progress=lambda done: prog.update(task, completed=done))
    return parse(text, name)


def write_output(path: str | None, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (``-``/None: stdout)."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".distc-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def reporting() -> Iterator[None]:
    """Turn diagnostics into ``file:line:col: error:`` + exit 1, anything else into exit 70."""
    try:
        yield
    except DiagnosticError as e:
        err_console().print(e.render(), markup=False)
        sys.exit(1)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        con = err_console()
        con.print(f"distc: internal error: {type(e).__name__}: {e}", markup=False)
        if os.environ.get("DISTC_DEBUG"):
            con.print(traceback.format_exc(), markup=False)
        else:
            con.print("(set DISTC_DEBUG=1 for the traceback; please report this)", markup=False)
        sys.exit(70)
