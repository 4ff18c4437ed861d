"""What the CLI commands share: reading inputs, writing outputs whole, reporting diagnostics."""

from __future__ import annotations

import io
import os
import stat
import sys
from contextlib import contextmanager
from collections.abc import Iterator

from . import cmdline
from .ir.core import Program
from .outputs import Interrupted
from .syntax import regex
from .syntax.diagnostics import DiagnosticError, Diagnostics, line_col
from .syntax.parser import collector_off, parse_program  # noqa: F401 - collector_off: for the commands

PROGRESS_BYTES = 4 << 20  # show a progress bar for inputs larger than this (on a terminal)


def err_console():
    """The console on stderr (:func:`distc.console.err_console`; its module loaded when something is shown)."""
    from .console import err_console

    return err_console()


READ_CHUNK = 4 << 20


def read_text(path: str) -> str:
    """A file's (``-``: stdin's) text, line ends as they are.  Read a chunk at a time: a binary
    input (``/dev/zero``, an image) fails at its first NUL byte without being read whole.  A gzip
    or xz file (known by its first bytes, whatever its name: ``main.ir.gz``, ``main.ir.xz``, or
    piped on stdin) is read as the text it holds; errors name the file and the line of that text."""
    name = "<stdin>" if path == "-" else path
    if path == "-":
        if sys.stdin is None:
            raise DiagnosticError("stdin is closed: give the program's file name", filename=name)
        if sys.stdin.isatty():
            err_console().print("distc: reading a program from the terminal (stdin); end it with Ctrl-D, "
                                "or give a file name", markup=False)
    data = bytearray()
    try:
        if path == "-":
            buf = getattr(sys.stdin, "buffer", None)  # bytes: line ends as they are (CRLF stays)
            if buf is None:
                data = bytearray(sys.stdin.read().encode("utf-8", "surrogatepass"))
            else:
                _read_into(_decompressed(buf, name), data, name)
        else:
            with open(path, "rb", buffering=0) as raw:
                whole = _whole(raw)
                if whole is None:
                    _read_into(_decompressed(io.BufferedReader(raw), name), data, name)
                else:  # (NUL checked before decoding, as a chunk is)
                    _check_nul(whole, 0, name)
                    data = whole
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise DiagnosticError("no such file", filename=path) from None
    except IsADirectoryError:
        raise DiagnosticError("is a directory", filename=path) from None
    except PermissionError:
        raise DiagnosticError("cannot read: permission denied", filename=path) from None
    except UnicodeDecodeError as e:
        raise _not_text(e, name) from None
    _check_nul(data, 0, name)
    return text


COMPRESSED = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz"}  # first bytes -> format


def compressed(path: str) -> str | None:
    """``"gzip"`` or ``"xz"`` when the file ``path`` is compressed so (its first bytes), else None (``-``: None)."""
    if path == "-":
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    return _kind(head)


def _kind(head: bytes) -> str | None:
    """The compressed format whose first bytes ``head`` starts with (None: not compressed)."""
    return next((k for magic, k in COMPRESSED.items() if head.startswith(magic)), None)


def _decompressed(f, name: str):
    """``f`` itself, or a reader of the text it holds compressed (gzip, xz: its first bytes say)."""
    head = f.peek(6)[:6] if hasattr(f, "peek") else b""
    kind = _kind(head)
    if kind is None:
        return f
    from .compressed import reader

    return reader(f, kind, name)


def _whole(raw) -> bytes | None:
    """A regular, uncompressed file (``raw``: unbuffered, not moved) whose first 64 KB hold no NUL,
    read by one call into one buffer (mlp256: 2,816 page faults, not 4,223); else None."""
    fd = raw.fileno()
    head = os.pread(fd, 1 << 16, 0) if stat.S_ISREG(os.fstat(fd).st_mode) else b"\x00"
    return None if b"\x00" in head or _kind(head[:6]) is not None else raw.readall()


def _read_into(f, data: bytearray, name: str) -> None:
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            return
        start = len(data)
        data += chunk
        _check_nul(data, start, name)


def _check_nul(data: bytes | bytearray, start: int, name: str) -> None:
    """No PIR dump holds a NUL byte: a located error at the first one."""
    nul = data.find(b"\x00", start)
    if nul < 0:
        return
    line = data.count(b"\n", 0, nul) + 1
    begin = data.rfind(b"\n", 0, nul) + 1
    end = data.find(b"\n", nul)
    shown = _printable(bytes(data[begin: end if end >= 0 else len(data)][:4096]).decode("utf-8", "replace"))
    col = len(bytes(data[begin:nul]).decode("utf-8", "replace")) + 1
    raise DiagnosticError("a binary file, not PIR text (a NUL byte)", line, col, filename=name,
                          source="\n" * (line - 1) + shown)


_CONTROL = {c: "\ufffd" for c in [*range(0x20), 0x7f, *range(0x80, 0xa0)] if c != 0x09}


def _printable(line: str) -> str:
    """The line of a binary file as shown under an error: control characters (a terminal's escape
    sequences among them) as U+FFFD, one character each, so the caret's column holds."""
    return line.translate(_CONTROL)


def _not_text(e: UnicodeDecodeError, path: str) -> DiagnosticError:
    """A located error at the first byte that is not UTF-8, the line shown with U+FFFD for bad bytes."""
    data = e.object if isinstance(e.object, bytes) else bytes(e.object)
    start = data.rfind(b"\n", 0, e.start) + 1
    end = data.find(b"\n", e.start)
    line_bytes = data[start: end if end >= 0 else len(data)][:4096]
    shown = _printable(line_bytes.decode("utf-8", "replace"))
    line = data.count(b"\n", 0, e.start) + 1
    col = len(data[start:e.start].decode("utf-8", "replace")) + 1
    what = "a binary file, not PIR text" if b"\x00" in data[:4096] else "not UTF-8 text"
    return DiagnosticError(f"{what} (byte 0x{data[e.start]:02x}: {e.reason} in UTF-8)", line, col,
                           filename=path, source="\n" * (line - 1) + shown)


def load(path: str, program: int | None = None) -> Program:
    """The file's program (``program``: the K-th of a file holding several, 1-based)."""
    text = read_text(path)
    name = "<stdin>" if path == "-" else path
    prog = parse_text(text, name, program)
    check_values(prog, name, text)
    return prog


def load_kept(path: str, sources: dict[str, str], program: int | None = None) -> Program:
    """:func:`load`, the text kept in ``sources`` (file name -> text: where errors are located)."""
    text = read_text(path)
    name = "<stdin>" if path == "-" else path
    sources[name] = text
    prog = parse_text(text, name, program)
    check_values(prog, name, text)
    return prog


def check_values(prog: Program, name: str, text: str | None) -> None:
    """The verifier's value checks (shapes, meshes, optimizer operands) on an input, located."""
    from .analysis.verify import verify_values

    try:
        verify_values(prog)
    except DiagnosticError as e:
        raise e.located(name, text) from None


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


def print_warning(text: str) -> None:
    """A warning (``file:line:col: warning: ...`` and its lines) on stderr: the sink of a
    command's :class:`~distc.syntax.diagnostics.Diagnostics` (:func:`reporting`)."""
    err_console().print(text, markup=False)


def warn_unknown_ops(prog: Program, diags: Diagnostics, note: str | None = "distc passes it through unchanged") -> int:
    """Before a pass rewrites ``prog``: ``file:line:col: warning:`` (the line, a caret under the
    name) for each op name Paddle 3.3.1 does not have, once a name, into ``diags``; how many."""
    from .dialects.known_ops import unknown_op_warnings

    ws = unknown_op_warnings(prog, note)
    for w in ws:
        diags.warn(w)
    return len(ws)


_FIELD = regex.compile(r"\{[^{}]*\}")  # a field of an output pattern: {rank}


def check_pattern(path: str | None, option: str, many: bool, several: str = "--all-ranks",
                  extra: tuple[str, ...] = ()) -> None:
    """An output pattern's one field is ``{rank}`` (and ``extra`` ones: ``--job-out``'s ``{job}``),
    and ``{rank}`` needs several ranks (usage errors)."""
    if path is None or path == "-" or ("{" not in path and "}" not in path):  # (no field, no brace: nothing to check)
        return
    known = ("{rank}", *extra)
    fields = _FIELD.findall(path)
    bad = [f for f in fields if f not in known]
    if bad:
        told = "the one field is {rank}" if not extra else "the fields are " + " and ".join(known)
        if bad[0] == "{job}":  # -o 'out/r{rank}.{job}.ir': the job programs have their own option
            told += "; each job program goes to --job-out, e.g. --job-out 'out/r{rank}.{job}.ir'"
        raise cmdline.UsageError(f"{option} {path!r}: unknown field {bad[0]} ({told})")
    rest = path
    for f in known:
        rest = rest.replace(f, "")
    if rest.count("{") or rest.count("}"):
        raise cmdline.UsageError(f"{option} {path!r}: a brace outside {' and '.join(known)}")
    if "{rank}" in fields and not many:
        raise cmdline.UsageError(f"{option} {path!r} has {{rank}}: that is for several ranks ({several})")


# ------------------------------------------------------------------ errors, as text and as JSON
def error_doc(kind: str, code: int, message: str, file: str | None = None, line: int | None = None,
              col: int | None = None, notes: list[str] | None = None, text: str | None = None) -> dict:
    """What ``--json`` prints on stdout when a command fails before it could report: ``kind`` is
    ``input`` (exit 1), ``output`` (exit 1), ``usage`` (exit 2), ``internal`` (exit 70),
    ``interrupted`` (a signal: 128 + it) or ``killed`` (a worker killed from outside: 128 + the signal)."""
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
    except (OSError, ValueError, AttributeError):  # stdout closed, full, or a broken pipe: stderr has it
        pass


def json_requested(args: list[str], command: cmdline.Command | None) -> bool:
    """Whether a command line asks for ``--json`` (raw arguments: also when they do not parse)."""
    if command is None or not any("--json" in getattr(p, "opts", ()) for p in command.params):
        return False
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(text: str, code: int, doc: dict, diags: Diagnostics | None = None) -> None:
    """Report an error (``text`` on stderr; ``doc`` on stdout under ``--json``, with the warnings
    of ``diags``) and exit ``code``."""
    try:
        err_console().print(text, markup=False)
    except OSError:  # stderr full or gone: the exit status still tells
        pass
    ctx = cmdline.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json"):
        print_error_json({**doc, "warnings": diags.warnings if diags is not None else []}, ctx.info_name)
    sys.exit(code)


def say(text: str) -> None:
    """One line on stderr that needs no console, little memory, and survives a closed stderr."""
    try:
        os.write(2, text.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass


@contextmanager
def reporting() -> Iterator[Diagnostics]:
    """A command's run: yields its :class:`~distc.syntax.diagnostics.Diagnostics` (warnings,
    printed on stderr as they come; ``--json`` summaries and error objects carry them).  Turns
    diagnostics into ``file:line:col: error:`` + exit 1, anything else into exit 70; under the
    command's ``--json`` also one JSON object on stdout (:func:`error_doc`)."""
    diags = Diagnostics(sink=print_warning)
    try:
        yield diags
    except DiagnosticError as e:
        fail(e.render(), 1, diagnostic_doc(e), diags)
    except WorkerFailed as e:
        fail(e.message, e.code, e.doc, diags)
    except (cmdline.Exit, cmdline.Abort, cmdline.CommandLineError, SystemExit, KeyboardInterrupt):
        raise
    except Interrupted as e:  # the outputs are rolled back by now; --json still gets its object
        ctx = cmdline.get_current_context(silent=True)
        if ctx is not None and ctx.params.get("as_json"):
            print_error_json(error_doc("interrupted", e.code, f"stopped by {e.name}"), ctx.info_name)
        raise
    except BrokenPipeError:
        sys.exit(0)
    except MemoryError:  # little memory may be left: no console, no formatting
        say("error: out of memory (a smaller input, --shape or mesh?)")
        ctx = cmdline.get_current_context(silent=True)
        if ctx is not None and ctx.params.get("as_json"):
            print_error_json(error_doc("input", 1, "out of memory"), ctx.info_name)
        sys.exit(1)
    except OSError as e:  # an output that cannot be written, a disk that is full ...
        name = getattr(e, "filename", None)
        msg = f"{name + ': ' if name else ''}error: {e.strerror or e}"
        fail(msg, 1, error_doc("output", 1, str(e.strerror or e), name, text=msg), diags)
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        msg = f"distc: internal error: {type(e).__name__}: {e}"
        import traceback

        hint = (traceback.format_exc() if os.environ.get("DISTC_DEBUG")
                else "(set DISTC_DEBUG=1 for the traceback; please report this)")
        fail(msg + "\n" + hint, 70, error_doc("internal", 70, msg[7:], text=msg), diags)


# ------------------------------------------------------------------ forked workers (distc.workers)
class WorkerFailed(Exception):
    """A forked worker failed: ``item`` names it, ``message`` is its rendered error, ``code`` the
    exit status it asks for (1: a diagnostic, 70: an internal error), ``doc`` its :func:`error_doc`."""

    def __init__(self, item: object, message: str, code: int, doc: dict | None = None) -> None:
        super().__init__(message)
        self.item, self.message, self.code = item, message, code
        self.doc = doc or error_doc("internal" if code == 70 else "input", code, message)
        self.others: list = []  # other items that failed as well


def program_option(help: str):
    """``--program K``: which program of a file holding several (GLOG logs, ``--all-ranks`` output)."""
    return cmdline.option("--program", type=cmdline.IntRange(min=1), default=None, metavar="K", help=help)
