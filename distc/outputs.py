"""One output transaction for everything a command writes.

    with Outputs(inputs=[main_file, startup]) as out:
        main = out.add("-o", output)                 # checked now, before any work
        start = out.add("--startup-out", startup_out)
        ...                                          # the work
        out.write(main, text)                        # a temporary file beside the target
        out.write(start, startup_text)
        out.commit()                                 # every target renamed into place, or none

* A file target is written to a temporary file created exclusively (``O_EXCL|O_NOFOLLOW``, a
  random name, through a descriptor of the target's folder opened once), so nothing planted at
  a temporary name — a symlink, a FIFO — is ever followed; the new file keeps the mode of the
  file it replaces (or what the umask leaves).  A symlink target is written through to its file.
* :meth:`Outputs.commit` renames every temporary file over its target only when all were written,
  holding an exclusive lock (``flock``) on each target folder, so two runs into the same outputs
  never interleave (the last to commit wins, whole).  Signals are held back during the renames;
  the old files are kept as hard links until every rename succeeded, so a failure (or a signal
  that came during the renames) puts every old file back.  Streams (stdout, a FIFO) go first.
* Leaving the ``with`` block without :meth:`commit` (an error, a signal, a failed worker) removes
  every temporary file, the ones forked workers wrote included (their names are chosen here).
* Outputs are checked against the inputs by file identity (device, inode; stdin's too): no output
  is one of the inputs (a usage error), and two options naming one file (``X`` and ``./X``, a
  hard link) are a usage error.

``DISTC_FAULT_INJECT`` (tests only) injects faults at the write layer:
``POINT[:WHICH]=ACTION`` items separated by ``;`` — POINT ``plan`` (each output planned: checked,
before the work), ``write`` (each file written, after half of its bytes), ``commit`` (before the
renames), ``rename`` (before each rename); WHICH a 1-based count in this process or a target's
base name; ACTION ``ENOSPC``/``EIO``/``EACCES`` (an OSError), ``SIGINT``/``SIGTERM``/``SIGHUP``/
``SIGKILL`` (to this process), ``parent:SIG`` / ``group:SIG``, or ``sleep:SECONDS``.
"""

from __future__ import annotations

import _signal as signal  # signal's C module (ints for signals): `signal` makes 3 enums, ~1 ms of start-up
import errno
import fcntl
import io
import os
import stat
import sys
import time

from . import cmdline
from .ir.records import field, record
from .syntax.diagnostics import DiagnosticError
from .syntax.printer import encoded, joined

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CHUNK, PIECES = 1 << 20, 1024  # characters (of a str) or pieces (the printer's list) encoded and written at a time
FAULT_ENV = "DISTC_FAULT_INJECT"


class _Secrets:
    """What is used of the standard ``secrets`` module (``token_hex``: ``os.urandom``'s bytes in hex, as
    ``secrets`` itself does), without its import (hmac, hashlib, random, base64: 10 ms of every run's start-up)."""

    @staticmethod
    def token_hex(nbytes: int) -> str:
        return os.urandom(nbytes).hex()


secrets = _Secrets()

TMP_PREFIX = ".distc-"


class Interrupted(BaseException):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped the command: the exit status is 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        from signal import Signals  # (its enums: imported when a signal is named)
        return Signals(self.signum).name


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted(signum)


def catch_signals() -> None:
    """The ``distc`` process: SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (clean-up,
    then exit 130/143/129); one it was started with ignored stays so (``nohup``, ``distc &``)."""
    for s in SIGNALS:
        if signal.getsignal(s) != signal.SIG_IGN:
            signal.signal(s, _raise_interrupted)


def default_signals() -> None:
    """A forked worker: signals (but ignored ones) kill it outright; the parent cleans up."""
    for s in SIGNALS:
        if signal.getsignal(s) != signal.SIG_IGN:
            signal.signal(s, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file a path names (symlinks followed; ``-``: stdin), or None."""
    try:
        if path == "-":
            st = os.fstat(sys.stdin.fileno()) if sys.stdin is not None else None
        else:
            st = os.stat(path)
    except (OSError, ValueError, AttributeError):  # no such file; a stdin without a descriptor
        return None
    return None if st is None else (st.st_dev, st.st_ino)


def stdout_identity() -> tuple[int, int] | None:
    """(device, inode) of stdout when it is a regular file (``> FILE``), else None."""
    try:
        st = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


@record(eq=False)
class Target:
    """One output: a file (renamed into place at commit), or a stream (written at commit)."""

    option: str  # the option that named it ("-o"), for messages
    path: str  # as the user wrote it ("-" : stdout)
    real: str | None = None  # the file written (symlinks resolved); None for stdout
    dirfd: int | None = None  # the target folder, opened once
    base: str = ""  # the target's name in that folder
    tmp: str = ""  # the temporary file's name in that folder
    mode: int = 0o666  # the new file's permission bits
    stream: bool = False  # stdout, a FIFO, a device: written directly at commit
    ident: tuple | None = None  # (device, inode) of the file it replaces (stdout: a regular file's)
    text: str | None = None  # a stream's text, kept for the commit
    renamed: bool = False  # in place (commit)


@record
class _Fault:
    point: str
    which: str
    action: str
    seen: int = 0


@record
class Outputs:
    """The transaction (see the module docstring).  ``inputs``: the paths the command reads
    (``-`` is stdin); ``in_place``: an output may be an input (``fmt -o`` of its one input)."""

    inputs: list = field(default_factory=list)
    in_place: bool = False
    targets: list = field(default_factory=list)
    _ids: dict = field(default_factory=dict)  # input identity -> path
    _dirs: dict = field(default_factory=dict)  # real folder -> its descriptor
    _named: dict = field(default_factory=dict)  # real path, and identity of an existing file -> Target
    _faults: list = field(default_factory=list)
    _done: bool = False

    def __post_init__(self) -> None:
        for p in self.inputs:
            self.add_input(p)
        self._faults = _parse_faults(os.environ.get(FAULT_ENV, ""))

    # ------------------------------------------------------------------ planning
    def add_input(self, path: str | None) -> None:
        """Another file the command reads (its identity: no output may be it)."""
        if not path:
            return
        ident = identity(path)
        if ident is None or ident in self._ids:
            return
        self._ids[ident] = "<stdin>" if path == "-" else path
        for t in [self._named.get(ident), *(t for t in self.targets if t.path == "-")]:
            if t is not None:
                self._not_an_input(t)

    def _not_an_input(self, t: Target) -> None:
        if t.ident is None or t.ident not in self._ids:
            return
        src = self._ids[t.ident]
        if t.path == "-":  # `distc fmt X > X`: the shell emptied X before distc could read it
            raise cmdline.UsageError(f"stdout is the input {src!r}: distc does not overwrite its inputs")
        if not self.in_place:
            raise cmdline.UsageError(f"{t.option} {t.path!r} is the input {src!r}: distc does not overwrite its inputs")

    def add(self, option: str, path: str | None) -> Target | None:
        """Plan one output (``-``: stdout; None: nothing): every check is made now, before any work."""
        if path is None:
            return None
        if path == "-":
            t = Target(option, path, stream=True, ident=stdout_identity())
            self._not_an_input(t)
            self.targets.append(t)
            return t
        real = os.path.realpath(path)
        if os.path.isdir(real):
            raise DiagnosticError("is a directory, not an output file", filename=path)
        folder = os.path.dirname(real) or "."
        if not os.path.isdir(folder):
            raise DiagnosticError(f"cannot write: no directory {folder}", filename=path)
        try:
            st = os.stat(real)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise DiagnosticError(f"cannot write: {e.strerror}", filename=path) from None
        if st is not None and not os.access(real, os.W_OK):
            raise DiagnosticError("cannot write: permission denied", filename=path)
        stream = st is not None and not stat.S_ISREG(st.st_mode)
        if not stream and not os.access(folder, os.W_OK | os.X_OK):
            raise DiagnosticError(f"cannot write: directory {folder} is not writable", filename=path)
        t = Target(option, path, real, base=os.path.basename(real), stream=stream,
                   ident=(st.st_dev, st.st_ino) if st is not None else None)
        self._not_an_input(t)
        keys = [real] + ([(st.st_dev, st.st_ino)] if st is not None else [])
        for k in keys:
            other = self._named.get(k)
            if other is not None:
                raise cmdline.UsageError(f"{other.option} {other.path!r} and {option} {path!r} name the same file")
        for k in keys:
            self._named[k] = t
        if not stream:
            t.dirfd = self._folder(folder, path)
            t.tmp = f"{TMP_PREFIX}{secrets.token_hex(8)}.tmp"
            t.mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        self.targets.append(t)
        self._fire(self._fault("plan", t.base))
        return t

    def _folder(self, folder: str, path: str) -> int:
        fd = self._dirs.get(folder)
        if fd is None:
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                raise DiagnosticError(f"cannot write: {e.strerror}", filename=path) from None
            self._dirs[folder] = fd
        return fd

    # ------------------------------------------------------------------ writing
    def write(self, t: Target | None, text: str | list[str]) -> None:
        """Stage ``text`` (or the printer's pieces) for ``t``: a file target gets its temporary file now (also in
        a forked worker: the name was chosen when it was planned); a stream keeps the text for the commit."""
        if t is None:
            return
        if t.stream or t.path.lower().endswith((".gz", ".xz")):
            text = text if isinstance(text, str) else joined(text)
            if t.stream:
                t.text = text
                return
            from .compressed import packed  # (imported only for a compressed output)
            text = packed(t.path, text)
        try:
            fd = os.open(t.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=t.dirfd)
        except OSError as e:
            if e.errno == errno.EEXIST:
                t.tmp = ""  # someone else's file at that name: never followed, never removed
            raise OSError(e.errno, e.strerror or str(e), t.path) from None
        try:
            self._write_fd(fd, text, self._fault("write", t.base))
            os.fchmod(fd, t.mode)
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), t.path) from None
        finally:
            os.close(fd)

    def _write_fd(self, fd: int, text: str | bytes | list[str], fault: "_Fault | None" = None) -> None:
        """All of ``text`` (str: encoded a chunk at a time; bytes: as is; pieces: PIECES a time), a fault at half."""
        half = len(text) // 2 if fault is not None else len(text)
        _write_range(fd, text, 0, half)
        if fault is not None:
            self._fire(fault)
            _write_range(fd, text, half, len(text))

    # ------------------------------------------------------------------ commit, rollback
    def commit(self) -> None:
        """Every target in place, or (an exception) none changed."""
        if self._done:
            return
        files = [t for t in self.targets if not t.stream]
        for t in self.targets:
            if t.stream and t.text is not None:
                self._write_stream(t)
        self._fire(self._fault("commit", None))
        locked = self._lock()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        backups: list[tuple[Target, str | None]] = []
        try:
            try:
                for t in files:
                    backups.append((t, self._backup(t)))
                    try:
                        self._fire(self._fault("rename", t.base))
                        os.replace(t.tmp, t.base, src_dir_fd=t.dirfd, dst_dir_fd=t.dirfd)
                    except OSError as e:
                        raise OSError(e.errno, e.strerror or str(e), t.path) from None
                    t.renamed = True
                pending = set(signal.sigpending()) & set(SIGNALS)
                if pending:  # a signal came during the renames: it is taken, and the old files go back
                    raise Interrupted(signal.sigwait(pending))
            except BaseException:
                self._restore(backups)
                raise
            for t, name in backups:
                if name is not None:
                    _unlink(name, t.dirfd)
        finally:
            self._unlock(locked)
            self._done = True
            self._close()
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a signal held back is raised here

    def rollback(self) -> None:
        """Remove every temporary file this transaction planned (whoever wrote it)."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            for t in self.targets:
                if t.tmp and t.dirfd is not None:
                    _unlink(t.tmp, t.dirfd)
            self._done = True
            self._close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if not self._done:
            self.rollback()

    def _write_stream(self, t: Target) -> None:
        text, t.text = t.text or "", None
        if t.path == "-":
            write_stdout(text)
            return
        try:
            fd = os.open(t.real, os.O_WRONLY | os.O_CLOEXEC)
            try:
                _write_range(fd, text, 0, len(text))
            finally:
                os.close(fd)
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), t.path) from None

    def _backup(self, t: Target) -> str | None:
        """Keep the file ``t`` replaces under another name (None: there is none): a hard link, so
        the target never goes missing; where links are refused, the old file itself, moved."""
        name = f"{TMP_PREFIX}{secrets.token_hex(8)}.old"
        try:
            os.link(t.base, name, src_dir_fd=t.dirfd, dst_dir_fd=t.dirfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError:
            os.replace(t.base, name, src_dir_fd=t.dirfd, dst_dir_fd=t.dirfd)
        return name

    def _restore(self, backups: list[tuple[Target, str | None]]) -> None:
        for t, name in reversed(backups):
            try:
                if not t.renamed and name is not None and _exists(t.base, t.dirfd):
                    _unlink(name, t.dirfd)  # not renamed yet: the old file is still in place
                elif name is not None:
                    os.replace(name, t.base, src_dir_fd=t.dirfd, dst_dir_fd=t.dirfd)
                elif t.renamed:
                    _unlink(t.base, t.dirfd)
                t.renamed = False
            except OSError:
                pass
        for t in self.targets:
            if t.tmp and t.dirfd is not None:
                _unlink(t.tmp, t.dirfd)

    def _lock(self) -> list[int]:
        """An exclusive lock on every target folder, in one order (no deadlock between runs)."""
        fds = sorted({t.dirfd for t in self.targets if t.dirfd is not None},
                     key=lambda fd: (os.fstat(fd).st_dev, os.fstat(fd).st_ino))
        got: list[int] = []
        try:
            for fd in fds:
                fcntl.flock(fd, fcntl.LOCK_EX)
                got.append(fd)
        except BaseException:
            self._unlock(got)
            raise
        return got

    @staticmethod
    def _unlock(fds: list[int]) -> None:
        for fd in fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass

    def _close(self) -> None:
        for fd in self._dirs.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._dirs.clear()

    # ------------------------------------------------------------------ fault injection (tests)
    def _fault(self, point: str, name: str | None) -> _Fault | None:
        for f in self._faults:
            if f.point != point:
                continue
            f.seen += 1
            if f.which in ("", str(f.seen)) or (name is not None and f.which == name):
                return f
        return None

    @staticmethod
    def _fire(f: _Fault | None) -> None:
        if f is None:
            return
        action = f.action
        if action.startswith("sleep:"):
            time.sleep(float(action[6:]))
            return
        if action in errno.errorcode.values():
            code = getattr(errno, action)
            raise OSError(code, os.strerror(code))
        who, _, sig = action.rpartition(":")
        signum = getattr(signal, sig)
        if who == "parent":
            os.kill(os.getppid(), signum)
        elif who == "group":
            os.killpg(os.getpgrp(), signum)
        else:  # (held back if it comes during the renames, as a real one would be)
            os.kill(os.getpid(), signum)
        time.sleep(0.05)  # let it arrive (a worker may be killed here)


def write_stdout(text: str) -> None:
    """``text`` on stdout, encoded a chunk at a time; an error names ``<stdout>`` (closed, full)."""
    out = sys.stdout
    if out is None:
        raise OSError(errno.EBADF, "stdout is closed", "<stdout>")
    try:
        try:
            fd = out.fileno()
        except (ValueError, AttributeError, io.UnsupportedOperation):  # a stdout without a descriptor (tests)
            out.write(text)
            out.flush()
            return
        out.flush()
        _write_range(fd, text, 0, len(text))
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), "<stdout>") from None


def _parse_faults(text: str) -> list[_Fault]:
    out = []
    for item in filter(None, (s.strip() for s in text.split(";"))):
        spec, _, action = item.partition("=")
        point, _, which = spec.partition(":")
        out.append(_Fault(point.strip(), which.strip(), action.strip()))
    return out


def _write_range(fd: int, text: str | bytes | list[str], start: int, end: int) -> None:
    for pos in range(start, end, (step := PIECES if isinstance(text, list) else CHUNK)):  # (pieces: no fresh pages)
        part = text[pos:min(pos + step, end)]
        view = memoryview(part if isinstance(part, bytes) else part.encode() if isinstance(part, str)
                          else encoded(part))  # (the printer's pieces, or UTF-8 ones)
        while view:
            view = view[os.write(fd, view):]


def _exists(name: str, dirfd: int | None) -> bool:
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _unlink(name: str, dirfd: int | None) -> None:
    try:
        os.unlink(name, dir_fd=dirfd)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
