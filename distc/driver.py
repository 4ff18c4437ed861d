"""What the CLI commands share: reading inputs, writing outputs whole, reporting diagnostics."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import traceback
from contextlib import contextmanager
from typing import Iterator

import click

from .ir.core import Program
from .syntax.diagnostics import DiagnosticError, line_col
from .syntax.parser import parse_program

LOG_WIDTH = 100_000  # the console width off a terminal
PROGRESS_BYTES = 4 << 20  # show a progress bar for inputs larger than this (on a terminal)


def err_console():
    from rich.console import Console

    tty = sys.stderr.isatty()
    no_color = bool(os.environ.get("NO_COLOR")) or not tty
    # off a terminal (CI logs, files) nothing wraps: a table is as wide as its content
    return Console(stderr=True, no_color=no_color, highlight=False, soft_wrap=True,
                   width=None if tty else LOG_WIDTH)


def read_text(path: str) -> str:
    if path == "-":
        if sys.stdin.isatty():
            err_console().print("distc: reading a program from the terminal (stdin); end it with Ctrl-D, "
                                "or give a file name", markup=False)
    try:
        if path == "-":
            buf = getattr(sys.stdin, "buffer", None)  # bytes: line ends as they are (CRLF stays)
            text = buf.read().decode("utf-8") if buf is not None else sys.stdin.read()
        else:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
    except FileNotFoundError:
        raise DiagnosticError("no such file", filename=path) from None
    except IsADirectoryError:
        raise DiagnosticError("is a directory", filename=path) from None
    except UnicodeDecodeError as e:
        raise _not_text(e, "<stdin>" if path == "-" else path) from None
    nul = text.find("\x00")
    if nul >= 0:  # no PIR dump holds a NUL byte
        line, col = line_col(text, nul)
        raise DiagnosticError("a binary file, not PIR text (a NUL byte)", line, col,
                              filename="<stdin>" if path == "-" else path, source=text)
    return text


def _not_text(e: UnicodeDecodeError, path: str) -> DiagnosticError:
    """A located error at the first byte that is not UTF-8, the line shown with U+FFFD for bad bytes."""
    data = e.object if isinstance(e.object, bytes) else bytes(e.object)
    start = data.rfind(b"\n", 0, e.start) + 1
    end = data.find(b"\n", e.start)
    line_bytes = data[start: end if end >= 0 else len(data)][:4096]
    shown = line_bytes.decode("utf-8", "replace")
    line = data.count(b"\n", 0, e.start) + 1
    col = len(data[start:e.start].decode("utf-8", "replace")) + 1
    what = "a binary file, not PIR text" if b"\x00" in data[:4096] else "not UTF-8 text"
    return DiagnosticError(f"{what} (byte 0x{data[e.start]:02x}: {e.reason} in UTF-8)", line, col,
                           filename=path, source="\n" * (line - 1) + shown)


def load(path: str, program: int | None = None) -> Program:
    """The file's program (``program``: the K-th of a file holding several, 1-based)."""
    text = read_text(path)
    return parse_text(text, "<stdin>" if path == "-" else path, program)


def load_inputs(passes) -> None:
    """Load the programs that pass options name by path (``shard-startup{main=PATH}``) into the
    passes (``ModulePass.inputs``): passes read no files themselves."""
    for p in passes:
        for option, attr in type(p).inputs.items():
            path = getattr(p, option)
            if path and getattr(p, attr, None) is None:
                setattr(p, attr, load(path))


def parse_text(text: str, name: str, program: int | None = None) -> Program:
    """Parse, with a progress bar on stderr for big inputs when stderr is a terminal.  A file of
    several programs is an error listing them unless ``program`` picks one."""
    if len(text) > PROGRESS_BYTES and sys.stderr.isatty():
        from rich.progress import Progress

        with Progress(console=err_console(), transient=True) as prog:
            task = prog.add_task(f"parsing {os.path.basename(name)}", total=len(text))
            return parse_program(text, name, program, progress=lambda done: prog.update(task, completed=done))
    return parse_program(text, name, program)


WARNINGS: list[str] = []  # the warnings this command printed, first lines (--json summaries carry them)


def warn(text: str) -> None:
    """Print a warning (``file:line:col: warning: ...`` and its lines) on stderr and remember it."""
    WARNINGS.append(text.split("\n", 1)[0])
    err_console().print(text, markup=False)


def warn_unknown_ops(prog: Program, note: str | None = "distc passes it through unchanged") -> int:
    """Before a pass rewrites ``prog``: ``file:line:col: warning:`` (the line, a caret under the
    name) for each op name Paddle 3.3.1 does not have, once a name; the count of such names."""
    from .dialects.known_ops import unknown_message, unknown_ops

    bad = unknown_ops(prog)
    for k, (name, uses) in enumerate(bad.items()):
        if k == 10:  # a program of some other op set: name a few, count the rest
            warn(f"{prog.filename or '<input>'}: warning: {len(bad) - k} more op names Paddle 3.3.1 does not "
                 f"have: {', '.join(repr(n) for n in list(bad)[k:k + 5])}{', ...' if len(bad) > k + 5 else ''}")
            break
        op = uses[0]
        line, col = op.loc or (None, None)
        src = op.src.split("\n", 1)[0] if op.src else None
        if src is not None and line is not None:
            at = src.find(f'"{name}"')
            col = at + 2 if at >= 0 else col
        notes = [f"also used at line{'s' * (len(uses) > 2)} "
                 + ", ".join(str(u.loc[0]) for u in uses[1:6] if u.loc) + (", ..." if len(uses) > 6 else "")
                 ] if len(uses) > 1 else []
        notes += [note] if note else []
        w = DiagnosticError(unknown_message(name), line, col, filename=prog.filename, notes=notes,
                            source=None if src is None or line is None else "\n" * (line - 1) + src,
                            severity="warning")
        warn(w.render())
    return len(bad)


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
    if os.path.exists(real) and not os.access(real, os.W_OK):
        raise DiagnosticError("cannot write: permission denied", filename=path)


def check_inputs_kept(outputs: list[tuple[str, str | None]], inputs: list[str | None]) -> None:
    """No output (``(option, path)``) is one of the input files: distc never overwrites what it
    reads (a usage error, before any work; ``fmt -o`` in place is the exception)."""
    ins = [p for p in inputs if p and p != "-" and os.path.isfile(p)]
    for opt, path in outputs:
        if not path or path == "-" or not os.path.exists(path):
            continue
        for p in ins:
            if os.path.samefile(path, p):
                raise click.UsageError(f"{opt} {path!r} is the input {p!r}: distc does not overwrite its inputs")


def check_pattern(path: str | None, option: str, many: bool, several: str = "--all-ranks") -> None:
    """An output pattern's one field is ``{rank}``, and it needs several ranks (usage errors)."""
    if path is None or path == "-":
        return
    fields = re.findall(r"\{[^{}]*\}", path)
    bad = [f for f in fields if f != "{rank}"]
    if bad:
        raise click.UsageError(f"{option} {path!r}: unknown field {bad[0]} (the one field is {{rank}})")
    if re.sub(r"\{rank\}", "", path).count("{") or re.sub(r"\{rank\}", "", path).count("}"):
        raise click.UsageError(f"{option} {path!r}: a brace outside {{rank}}")
    if fields and not many:
        raise click.UsageError(f"{option} {path!r} has {{rank}}: that is for several ranks ({several})")


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
    try:
        _write(path, text)
    except OSError as e:  # name the user's path, not a temporary file or a symlink's target
        raise OSError(e.errno, e.strerror or str(e), path) from None


def _write(path: str, text: str) -> None:
    real = os.path.realpath(path)
    if os.path.exists(real) and not os.path.isfile(real):
        with open(real, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return
    mode = _mode_for(real)
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


def _mode_for(real: str) -> int:
    """The mode a file replacing ``real`` gets: the old file's, or what the umask leaves."""
    if os.path.exists(real):
        return os.stat(real).st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


# ------------------------------------------------------------------ errors, as text and as JSON
def error_doc(kind: str, code: int, message: str, file: str | None = None, line: int | None = None,
              col: int | None = None, notes: list[str] | None = None, text: str | None = None) -> dict:
    """What ``--json`` prints on stdout when a command fails before it could report: ``kind`` is
    ``input`` (exit 1), ``output`` (exit 1), ``usage`` (exit 2) or ``internal`` (exit 70)."""
    return {"status": "error", "kind": kind, "exit": code, "file": file, "line": line, "col": col,
            "message": message, "notes": list(notes or []), "error": text or message}


def diagnostic_doc(e: DiagnosticError) -> dict:
    return error_doc("input", 1, e.message, e.filename, e.line, e.col if e.line is not None else None,
                     e.notes, e.render())


def print_error_json(doc: dict, command: str | None = None) -> None:
    import json

    try:
        sys.stdout.write(json.dumps({"command": command, **doc} if command else doc) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass


def json_requested(args: list[str], command: click.Command | None) -> bool:
    """Whether a command line asks for ``--json`` (raw arguments: also when they do not parse)."""
    if command is None or not any("--json" in getattr(p, "opts", ()) for p in command.params):
        return False
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(text: str, code: int, doc: dict) -> None:
    """Report an error (``text`` on stderr; ``doc`` on stdout under ``--json``) and exit ``code``."""
    err_console().print(text, markup=False)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json"):
        print_error_json({**doc, "warnings": list(WARNINGS)}, ctx.info_name)
    sys.exit(code)


@contextmanager
def reporting() -> Iterator[None]:
    """Turn diagnostics into ``file:line:col: error:`` + exit 1, anything else into exit 70; under
    the command's ``--json`` also one JSON object on stdout (:func:`error_doc`)."""
    WARNINGS.clear()  # one command's (several run in one process under tests)
    try:
        yield
    except DiagnosticError as e:
        fail(e.render(), 1, diagnostic_doc(e))
    except WorkerFailed as e:
        fail(e.message, e.code, e.doc)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        sys.exit(0)
    except MemoryError:
        msg = "error: out of memory (a smaller --shape or mesh?)"
        fail(msg, 1, error_doc("input", 1, msg[7:], text=msg))
    except OSError as e:  # an output that cannot be written, a disk that is full ...
        name = getattr(e, "filename", None)
        msg = f"{name + ': ' if name else ''}error: {e.strerror or e}"
        fail(msg, 1, error_doc("output", 1, str(e.strerror or e), name, text=msg))
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        msg = f"distc: internal error: {type(e).__name__}: {e}"
        hint = (traceback.format_exc() if os.environ.get("DISTC_DEBUG")
                else "(set DISTC_DEBUG=1 for the traceback; please report this)")
        fail(msg + "\n" + hint, 70, error_doc("internal", 70, msg[7:], text=msg))


# ------------------------------------------------------------------ many outputs, forked workers
class Staged:
    """Outputs written to temporary files beside their targets and renamed into place only when
    every one of them is ready (:meth:`commit`), or removed (:meth:`discard`): a group of files
    written whole or not at all.  Temporary names are chosen up front, so a worker process can
    write them and the parent can still clean up after a worker that failed half way."""

    def __init__(self) -> None:
        self.files: list[tuple[str, str]] = []  # (tmp, target)

    def plan(self, path: str) -> str:
        """Check ``path`` (a regular file or a new one) and return the temporary file to write."""
        check_output(path)
        real = os.path.realpath(path)
        if os.path.exists(real) and not os.path.isfile(real):
            raise DiagnosticError("is not a regular file (one output a rank needs a file)", filename=path)
        if any(t == real for _, t in self.files):
            raise DiagnosticError("named twice among the outputs", filename=path)
        d = os.path.dirname(real) or "."
        tmp = os.path.join(d, f".distc-{os.getpid()}-{len(self.files)}.tmp")
        self.files.append((tmp, real))
        return tmp

    def commit(self) -> None:
        try:
            for tmp, real in self.files:
                os.chmod(tmp, _mode_for(real))
        except BaseException:
            self.discard()
            raise
        for tmp, real in self.files:
            os.replace(tmp, real)

    def discard(self) -> None:
        for tmp, _ in self.files:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_file(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


class WorkerFailed(Exception):
    """A forked worker failed: ``item`` names it, ``message`` is its rendered error, ``code`` the
    exit status it asks for (1: a diagnostic, 70: an internal error), ``doc`` its :func:`error_doc`."""

    def __init__(self, item: object, message: str, code: int, doc: dict | None = None) -> None:
        super().__init__(message)
        self.item, self.message, self.code = item, message, code
        self.doc = doc or error_doc("internal" if code == 70 else "input", code, message)
        self.others: list = []  # other items that failed as well


def fork_each(items: list, work, jobs: int) -> dict:
    """``{item: work(item)}``, each call in its own forked child process, at most ``jobs`` at once.

    A child starts from the parent's state at the fork (copy on write: what the parent computed
    once is shared, and a child's changes stay its own), sends back its result pickled, and exits
    without teardown.  The first failure stops new starts; the running ones are waited for and
    :class:`WorkerFailed` names the first failing item (in the order of ``items``).  Without ``os.fork`` the calls run one by one
    in this process, which only works for one item (``work`` may change the shared state)."""
    import gc
    import pickle
    import selectors

    if len(items) <= 1 or not hasattr(os, "fork"):
        if len(items) > 1:
            raise DiagnosticError("several workers need os.fork, which this platform lacks: one at a time")
        out = {}
        for it in items:
            try:
                out[it] = work(it)
            except DiagnosticError as e:
                raise WorkerFailed(it, e.render(), 1, diagnostic_doc(e)) from None
        return out
    sys.stdout.flush()
    sys.stderr.flush()
    gc.collect()
    gc.freeze()  # the collector must not touch (and so copy) the shared objects in the children
    sel = selectors.DefaultSelector()
    todo = list(items)
    running: dict[int, tuple[object, int, bytearray]] = {}  # fd -> (item, pid, data)
    results: dict = {}
    failures: list[WorkerFailed] = []
    try:
        while todo or running:
            while todo and not failures and len(running) < max(1, jobs):
                it = todo.pop(0)
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child
                    os.close(r)
                    _child(it, work, w)
                os.close(w)
                running[r] = (it, pid, bytearray())
                sel.register(r, selectors.EVENT_READ)
            if failures:
                todo.clear()
            if not running:
                break
            for key, _ in sel.select():
                fd = key.fd
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    running[fd][2].extend(chunk)
                    continue
                sel.unregister(fd)
                os.close(fd)
                it, pid, data = running.pop(fd)
                _, status = os.waitpid(pid, 0)
                try:
                    kind, payload, code = pickle.loads(bytes(data))
                except Exception:  # noqa: BLE001 - the child died before it could answer
                    kind, code = "error", 70
                    payload = (f"worker process died (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status)
                               else f"worker process exited with status {os.waitstatus_to_exitcode(status)}")
                if kind == "ok":
                    results[it] = payload
                else:
                    text, doc = payload if isinstance(payload, tuple) else (payload, None)
                    failures.append(WorkerFailed(it, text, code, doc))
    except BaseException:
        import signal

        for _, pid, _ in running.values():
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
        raise
    finally:
        sel.close()
        gc.unfreeze()
    if failures:  # the first in the order of ``items``, naming the others
        order = {it: i for i, it in enumerate(items)}
        failures.sort(key=lambda f: order[f.item])
        failures[0].others = [f.item for f in failures[1:]]
        raise failures[0]
    return results


def _child(item, work, w: int) -> None:
    import pickle

    # (the cyclic collector stays on: the shared objects are frozen, and without it the
    # garbage of the rank's own work piles up and costs more than collecting it)
    try:
        out = ("ok", work(item), 0)
    except DiagnosticError as e:
        out = ("error", (e.render(), diagnostic_doc(e)), 1)
    except MemoryError:
        out = ("error", "error: out of memory", 1)
    except OSError as e:
        name = getattr(e, "filename", None)
        msg = f"{name + ': ' if name else ''}error: {e.strerror or e}"
        out = ("error", (msg, error_doc("output", 1, str(e.strerror or e), name, text=msg)), 1)
    except BaseException as e:  # noqa: BLE001 - reported by the parent, never a bare traceback
        msg = f"internal error: {type(e).__name__}: {e}"
        if os.environ.get("DISTC_DEBUG"):
            msg += "\n" + traceback.format_exc()
        out = ("error", msg, 70)
    try:
        data = pickle.dumps(out)
    except Exception as e:  # noqa: BLE001
        data = pickle.dumps(("error", f"internal error: result not picklable: {e}", 70))
    view = memoryview(data)
    while view:
        n = os.write(w, view)
        view = view[n:]
    os.close(w)
    os._exit(0)


def program_option(help: str):
    """``--program K``: which program of a file holding several (GLOG logs, ``--all-ranks`` output)."""
    return click.option("--program", type=click.IntRange(min=1), default=None, metavar="K", help=help)
