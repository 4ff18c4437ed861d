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


def check_output(path: str | None) -> None:
    """Fail early (a diagnostic, exit 1) if ``path`` cannot be written, before any work is done."""
    if path is None or path == "-":
        return
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise DiagnosticError("is a directory, not an output file", filename=path)
    d = os.path.dirname(real) or "."
    if not os.path.isdir(d):
        raise DiagnosticError(f"cannot write: no directory {d}", filename=path)
    if not os.access(d, os.W_OK) and not (os.path.exists(real) and os.access(real, os.W_OK)):
        raise DiagnosticError(f"cannot write: directory {d} is not writable", filename=path)


def write_output(path: str | None, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (``-``/None: stdout).

    A regular file is replaced atomically (a temporary file in the same directory, then a rename),
    keeping the mode of the file it replaces (or the umask's); a symlink is written through to its
    target; a device or pipe (``/dev/stdout``, a FIFO) is written to directly."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    check_output(path)
    real = os.path.realpath(path)
    if os.path.exists(real) and not os.path.isfile(real):
        with open(real, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return
    if os.path.exists(real):
        mode = os.stat(real).st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".distc-", suffix=".tmp", dir=os.path.dirname(real) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
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
    except MemoryError:
        err_console().print("error: out of memory (a smaller --shape or mesh?)", markup=False)
        sys.exit(1)
    except OSError as e:  # an output that cannot be written, a disk that is full ...
        name = getattr(e, "filename", None)
        err_console().print(f"{name + ': ' if name else ''}error: {e.strerror or e}", markup=False)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        con = err_console()
        con.print(f"distc: internal error: {type(e).__name__}: {e}", markup=False)
        if os.environ.get("DISTC_DEBUG"):
            con.print(traceback.format_exc(), markup=False)
        else:
            con.print("(set DISTC_DEBUG=1 for the traceback; please report this)", markup=False)
        sys.exit(70)
