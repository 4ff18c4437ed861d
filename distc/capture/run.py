"""One Paddle process per (rank, run): the user's command under :mod:`distc.capture.hooks`.

distc never imports Paddle: each rank's programs come from a child process started with the
command's own interpreter, ``PADDLE_TRAINER_ID=rank`` and ``PADDLE_TRAINERS_NUM=world size``, which
runs ``hooks.py`` as a script (so the interpreter needs Paddle, not distc).  The child writes its
snapshots and ``result.json`` into a folder of its own; this module reads them back as a
:class:`RankRun`.  Nothing here writes the user's output folder (:mod:`distc.capture.folder` does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

from ..ir.records import field, record
from ..syntax.diagnostics import DiagnosticError

HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hooks.py")
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*(\.exe)?$")
_OPT_WITH_ARG = ("-X", "-W")  # interpreter options that take the next argument
_OPT_ALONE = ("-u", "-B", "-O", "-OO", "-E", "-s", "-S", "-I", "-q", "-b", "-bb", "-d", "-v", "-R", "-P")


class UsageProblem(Exception):
    """The command cannot be captured as given (exit 2)."""


@record
class Command:
    """``python [interpreter options] script.py ARGS`` or ``python -m module ARGS``."""

    python: str  # the interpreter, resolved on PATH
    py_opts: list[str]
    target: list[str]  # [script, args...] or ["-m", module, args...]
    given: list[str]  # the command as the user gave it

    @property
    def script(self) -> str:
        return self.target[1] if self.target[0] == "-m" else self.target[0]

    def argv(self, out: str, stage0: bool, mode: str) -> list[str]:
        return [self.python, *self.py_opts, HOOKS, "--out", out, "--mode", mode,
                *(["--stage0"] if stage0 else []), "--", *self.target]


def split_command(cmd: list[str]) -> Command:
    """Check that ``cmd`` runs a Python script or module and find its interpreter."""
    if not cmd:
        raise UsageProblem("give the training command after --, e.g. distc capture -- python train.py")
    exe = cmd[0]
    if exe.endswith(".py"):
        raise UsageProblem(f"{exe!r} is a script: give the Python interpreter that has Paddle before it, "
                           f"e.g. distc capture -- python {' '.join(cmd)}")
    base = os.path.basename(exe)
    if not _PYTHON.match(base):
        raise UsageProblem(f"distc capture runs a Python training script: the command must start with a "
                           f"Python interpreter (python, python3, /path/to/venv/bin/python), got {exe!r}")
    python = shutil.which(exe)
    if python is None:
        raise UsageProblem(f"{exe!r}: no such interpreter (not found{' on PATH' if os.sep not in exe else ''})")
    opts, i = [], 1
    while i < len(cmd) and cmd[i].startswith("-") and cmd[i] != "-m":
        o = cmd[i]
        if o in _OPT_WITH_ARG and i + 1 < len(cmd):
            opts += [o, cmd[i + 1]]
            i += 2
        elif o in _OPT_ALONE or o.startswith(("-X", "-W")):
            opts.append(o)
            i += 1
        elif o == "-c":
            raise UsageProblem("python -c is not supported: put the training code in a script file")
        else:
            raise UsageProblem(f"interpreter option {o!r} is not supported by distc capture")
    rest = cmd[i:]
    if not rest:
        raise UsageProblem(f"no script after {' '.join(cmd[:i])}: e.g. distc capture -- python train.py")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise UsageProblem("-m needs a module name")
    elif not os.path.isfile(rest[0]):
        raise UsageProblem(f"{rest[0]!r}: no such script")
    return Command(python, opts, rest, list(cmd))


@record
class RankRun:
    """What one child process left: its result document and snapshot texts (by snapshot name)."""

    rank: int
    stage0: bool
    folder: str
    result: dict = field(default_factory=dict)
    log: str = ""
    returncode: int = 0

    @property
    def status(self) -> str:
        return self.result.get("status") or "crashed"

    def has(self, snapshot: str) -> bool:
        return snapshot in self.result.get("snapshots", ())

    def path(self, snapshot: str) -> str:
        return os.path.join(self.folder, snapshot + ".ir")

    def jobs(self) -> list[dict] | None:
        return self.result.get("jobs")

    def job_types(self) -> list[str]:
        seen: list[str] = []
        for j in self.jobs() or ():
            if j["type"] not in seen:
                seen.append(j["type"])
        return seen

    def message(self) -> str:
        """Paddle's (or the script's) error in one line, or how the process died."""
        if self.result.get("message"):
            return self.result["message"]
        fatal = re.findall(r"(FatalError: `[^`]*` is detected by the operating system\.)", self.log)
        if fatal:
            return "CRASH: " + fatal[-1]
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"CRASH: the process was killed by {name}"
        tail = [ln for ln in self.log.strip().splitlines() if ln.strip()]
        return f"CRASH: the process exited with status {self.returncode}" + (f": {tail[-1].strip()}" if tail else "")

    def log_tail(self, n: int = 12) -> str:
        return "\n".join(self.log.rstrip().splitlines()[-n:])


def child_env(rank: int, world: int) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("POD_NAME", None)  # Paddle would start fleet (a real launch) when it is set
    env.update(PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(world))
    env.setdefault("PYTHONHASHSEED", "0")  # byte-stable programs
    env.setdefault("GLOG_minloglevel", "2")
    return env


class Children:
    """The child processes running now: all killed at once when the capture stops (a failure, a
    signal), and none started after that."""

    def __init__(self) -> None:
        self.procs: set[subprocess.Popen] = set()
        self.lock = threading.Lock()
        self.stopped = False

    def start(self, argv: list[str], env: dict, log) -> subprocess.Popen:
        with self.lock:
            if self.stopped:
                raise RuntimeError("capture stopped")
            p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)  # its own group: killed with what it started
            self.procs.add(p)
            return p

    def done(self, p: subprocess.Popen) -> None:
        with self.lock:
            self.procs.discard(p)

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            procs = list(self.procs)
        for p in procs:
            _kill(p)


# Paddle's dy2static sometimes fails to import the module it has just written when several Paddle
# processes run at once (seen in the oracle generators too): such a run is started again
FLAKY = "doesn't exist in the Module transformed from AST"
ATTEMPTS = 3


def run_one(cmd: Command, rank: int, world: int, stage0: bool, mode: str, work: str, timeout: float,
            children: Children | None = None) -> RankRun:
    """Run the command for ``rank`` in a child process; its files go to a new folder under ``work``."""
    for attempt in range(ATTEMPTS):
        run = _run_once(cmd, rank, world, stage0, mode, work, timeout, children or Children(), attempt)
        if FLAKY not in (run.result.get("message") or ""):
            break
    run.result["attempts"] = attempt + 1
    return run


def _run_once(cmd: Command, rank: int, world: int, stage0: bool, mode: str, work: str, timeout: float,
              children: Children, attempt: int) -> RankRun:
    folder = os.path.join(work, f"{'s0' if stage0 else 'as-given'}.r{rank}" + (f".{attempt}" if attempt else ""))
    os.makedirs(folder, exist_ok=True)
    run = RankRun(rank, stage0, folder)
    log_path = os.path.join(folder, "log.txt")
    with open(log_path, "wb") as log:
        p = children.start(cmd.argv(folder, stage0, mode), child_env(rank, world), log)
        try:
            run.returncode = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(p)
            run.result = {"status": "timeout", "message": f"the process took over {timeout:g} s and was "
                          "stopped (does the script wait for other ranks, or train before calling .train()?)"}
        finally:
            children.done(p)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        run.log = f.read()
    res = os.path.join(folder, "result.json")
    if not run.result and os.path.exists(res):
        with open(res, encoding="utf-8") as f:
            run.result = json.load(f)
    return run


def _kill(p: subprocess.Popen) -> None:
    """Stop the child and what it started (its own session: DataLoader workers ...)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    p.wait()


def run_many(cmd: Command, jobs: list[tuple[int, bool]], world: int, mode: str, work: str, timeout: float,
             parallel: int, progress=None) -> list[RankRun]:
    """Run ``(rank, stage0)`` jobs, ``parallel`` processes at a time; ``progress(run, done, total)``
    after each.  Results in the order of ``jobs``.  Anything that stops this (a signal) kills the
    running children first."""
    done = [0]
    children = Children()

    def one(job):
        r = run_one(cmd, job[0], world, job[1], mode, work, timeout, children)
        done[0] += 1
        if progress is not None:
            progress(r, done[0], len(jobs))
        return r

    if not jobs:
        return []
    ex = ThreadPoolExecutor(max_workers=max(1, parallel))
    try:
        futures = [ex.submit(one, j) for j in jobs]
        return [f.result() for f in futures]
    except BaseException:
        children.stop()
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def failure(run: RankRun, what: str, script: str) -> DiagnosticError:
    """The error for a rank whose run left no program to work on (exit 1): located at the line of
    the user's script where it raised, when there is one, with the traceback as a note."""
    line = col = source = None
    filename = script
    where = run.result.get("where")
    if where:
        filename, line, col = where.rsplit(":", 2)
        line, col = int(line), int(col)
        try:
            with open(filename, encoding="utf-8") as f:
                source = f.read()
        except OSError:
            source = None
    tb = run.result.get("traceback")
    detail = ("traceback:\n" + tb.rstrip()) if tb else (
        "the process's last output:\n" + run.log_tail() if run.log.strip() else "")
    return DiagnosticError(f"rank {run.rank}: {what}: {run.message()}", line=line, col=col,
                           filename=filename, source=source, notes=[detail] if detail else [])
