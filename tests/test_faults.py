"""Fault injection: every command that writes, under disk-full and I/O errors, signals at several
points of a run, hostile paths and concurrent runs — the files are left exactly as they were (or
all new), no temporary file is left, never a traceback, and the exit status says what happened
(1: an output error, 2: usage, 128 + the signal).

Faults are injected at the write layer (``DISTC_FAULT_INJECT``, :mod:`distc.outputs`): ``write``
(after half of a file's bytes), ``commit`` (before the renames), ``rename`` (before each rename).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.cli import main

from conftest import DATA

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "samples/mlp_dp2mp2_adamw.ir"
STARTUP = ROOT / "samples/mlp_dp2mp2_adamw.startup.ir"
RESHARD = sorted((DATA / "corpus/paddle-3.3.1/reshard").glob("*.before.ir"))[0]
DISTC = [sys.executable, "-m", "distc"]


def run(*args, input=None, env=None):
    return CliRunner(env=env).invoke(main, [str(a) for a in args], input=input)


def _as_from_a_terminal() -> None:
    """The signals at their defaults in the child, as a command typed at a shell gets them: a suite
    started under nohup or as a background job (`make test &`) hands its children SIGHUP or SIGINT
    ignored, and distc keeps a signal it was started with ignored (test_faults_hostile)."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def proc(*args, env=None, stdin=None, **kw):
    e = {**os.environ, **(env or {})}
    kw.setdefault("preexec_fn", _as_from_a_terminal)
    return subprocess.run([*DISTC, *map(str, args)], capture_output=True, text=True, env=e, stdin=stdin,
                          start_new_session=True, timeout=120, **kw)


def snapshot(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def setup_dir(d: Path) -> Path:
    """Inputs, and old outputs that must survive a failed run."""
    (d / "main.ir").write_bytes(MAIN.read_bytes())
    (d / "st.ir").write_bytes(STARTUP.read_bytes())
    (d / "rs.ir").write_bytes(RESHARD.read_bytes())
    (d / "out").mkdir()
    for name in ("o.ir", "s.ir", "m0.ir", "m2.ir", "s1.ir", "rs.r0.ir", "j.forward.ir", "jl.txt", "o.html"):
        (d / "out" / name).write_text(f"old {name}\n")
    return d


# every command that writes, and what it writes (old files in out/ included)
COMMANDS = {
    "fmt": lambda d: ["fmt", d / "main.ir", "-o", d / "out/o.ir"],
    "opt": lambda d: ["opt", d / "main.ir", "-p", "shard-optimizer,partition", "-o", d / "out/o.ir"],
    "shard": lambda d: ["shard", d / "main.ir", "-q", "-o", d / "out/o.ir", "--startup", d / "st.ir",
                        "--startup-out", d / "out/s.ir"],
    "shard-all": lambda d: ["shard", d / "main.ir", "-q", "--all-ranks", "-j", "2", "-o", d / "out/m{rank}.ir",
                            "--startup", d / "st.ir", "--startup-out", d / "out/s{rank}.ir"],
    "reshard": lambda d: ["reshard", d / "rs.ir", "-q", "-o", d / "out/o.ir"],
    "reshard-all": lambda d: ["reshard", d / "rs.ir", "-q", "--all-ranks", "-o", d / "out/rs.r{rank}.ir"],
    "shard-jobs": lambda d: ["shard", d / "main.ir", "-q", "--acc-steps", "2", "-o", d / "out/o.ir",
                             "--job-out", d / "out/j.{job}.ir", "--job-list", d / "out/jl.txt"],
    "diff": lambda d: ["diff", d / "main.ir", d / "main.ir", "-q", "--html", d / "out/o.html"],
    "report": lambda d: ["report", d / "main.ir", "--ranks", "0-1", "-o", d / "out/o.html"],
}
ONE_FILE = ("fmt", "opt", "reshard", "diff", "report")  # commands that write one file


def assert_no_process_left(pgid: int) -> None:
    """No process of the group ``pgid`` (distc and its workers) still runs, after up to 20 s."""
    t0 = time.time()
    while subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True).stdout and time.time() - t0 < 20:
        time.sleep(0.1)
    assert not subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True).stdout, "workers left running"


def assert_untouched(d: Path, before: dict, r) -> None:
    assert snapshot(d / "out") == before, "outputs changed"
    assert not [p for p in d.rglob(".distc-*")], "temporary files left"
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


FAULTS = [
    ("write:1=ENOSPC", 1, "error: No space left on device"),
    ("write:2=EIO", 1, "error: Input/output error"),
    ("rename:2=EIO", 1, "error: Input/output error"),
    ("commit=EACCES", 1, "error: Permission denied"),
]


def matrix(rows, cols):
    """Every (row, col) pair; `make test` runs one col a row, in turn (every row and every col at
    least once), the rest are marked slow (`make test-slow`)."""
    return [pytest.param(r, c, marks=() if j == i % len(cols) else pytest.mark.slow,
                         id=f"{r}-{c[0] if isinstance(c, tuple) else c}")
            for i, r in enumerate(rows) for j, c in enumerate(cols)]


@pytest.mark.parametrize("cmd,fault", matrix(list(COMMANDS), FAULTS))
def test_io_errors_leave_every_file_as_it_was(tmp_path, cmd, fault):
    fault, code, says = fault
    d = setup_dir(tmp_path)
    before = snapshot(d / "out")
    args = COMMANDS[cmd](d)
    one_file = cmd in ONE_FILE
    if one_file and fault in ("write:2=EIO", "rename:2=EIO"):
        fault = fault.replace(":2", ":1")
    r = run(*args, env={"DISTC_FAULT_INJECT": fault})
    assert r.exit_code == code, r.output
    assert says in r.stderr
    assert_untouched(d, before, r)


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_without_a_fault_every_output_is_written(tmp_path, cmd):
    d = setup_dir(tmp_path)
    before = snapshot(d / "out")
    r = run(*COMMANDS[cmd](d))
    assert r.exit_code == 0, r.output
    assert snapshot(d / "out") != before
    assert not [p for p in d.rglob(".distc-*")]


POINTS = ("plan:1", "write:1", "commit", "rename:2")  # outputs planned (the work ahead), a file half
# written, all written (before the renames), between two renames
SIGS = ("SIGTERM", "SIGINT", "SIGHUP")


@pytest.mark.parametrize("cmd,point", matrix(list(COMMANDS), POINTS))
def test_a_signal_at_each_point_of_every_writing_command(tmp_path, cmd, point):
    """SIGTERM, SIGINT or SIGHUP (in turn) at each point of a run of every command that writes:
    exit 128 + the signal, every output as it was, no temporary file, no traceback.  (In the
    workers of --all-ranks the signal goes to their parent, as a user's kill does.)  `make test`:
    one point a command (each point and each signal at least once); `make test-slow`: all 36."""
    sig = SIGS[(list(COMMANDS).index(cmd) + POINTS.index(point)) % len(SIGS)]
    if cmd in ONE_FILE and point.startswith("rename"):
        point = "rename:1"
    who = "parent:" if cmd == "shard-all" and point.startswith("write") else ""
    d = setup_dir(tmp_path)
    before = snapshot(d / "out")
    r = proc(*COMMANDS[cmd](d), env={"DISTC_FAULT_INJECT": f"{point}={who}{sig}"})
    assert r.returncode == 128 + getattr(signal, sig), r.stderr
    assert f"stopped by {sig}" in r.stderr, r.stderr
    assert_untouched(d, before, r)


@pytest.mark.parametrize("cmd,fault,code", [
    ("shard", "rename:2=SIGTERM", 143),  # during the renames: the first file goes back
    ("shard-all", "write:1=group:SIGTERM", 143),  # kill -TERM -PGID: parent and workers
    ("shard-all", "write:1=group:SIGINT", 130),  # Ctrl-C on a terminal
    ("shard-all", "rename:3=SIGTERM", 143),
    ("shard-all", "write:1=SIGKILL", 137),  # a worker killed from outside (the OOM killer)
])
def test_signals_clean_up_and_exit_128_plus_the_signal(tmp_path, cmd, fault, code):
    d = setup_dir(tmp_path)
    before = snapshot(d / "out")
    r = proc(*COMMANDS[cmd](d), env={"DISTC_FAULT_INJECT": fault})
    assert r.returncode == code, r.stderr
    assert_untouched(d, before, r)
    if code != 137:
        assert f"stopped by {signal.Signals(code - 128).name}" in r.stderr
    else:
        assert "worker process killed by SIGKILL" in r.stderr


@pytest.mark.parametrize("delay", [pytest.param(0.5, marks=pytest.mark.slow), 1.5,
                                   pytest.param(3.0, marks=pytest.mark.slow)])
def test_a_real_sigterm_at_any_moment_leaves_the_old_files_or_all_new_ones(tmp_path, delay):
    """``kill PID`` from outside (no injection) at some moment of a --all-ranks run with startup
    programs, wherever it lands (start-up, the shared passes, the workers, the renames, after
    the end): exit 143 (or -15 before distc has started) with every output as it was, or exit 0
    with every output new; no temporary file, no worker left running, no traceback."""
    d = setup_dir(tmp_path)
    before = snapshot(d / "out")
    p = subprocess.Popen([*DISTC, *map(str, COMMANDS["shard-all"](d))], stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(delay)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    after = snapshot(d / "out")
    if p.returncode == 0:
        assert all(after[f"{k}{r}.ir"] != before.get(f"{k}{r}.ir") for k in "ms" for r in range(4))
    else:
        assert p.returncode in (143, -signal.SIGTERM) and after == before, err
    assert_no_process_left(p.pid)
    assert not [q for q in d.rglob(".distc-*")] and "Traceback" not in err, err


def test_a_signal_while_reading_exits_143_and_writes_nothing(tmp_path):
    d = setup_dir(tmp_path)
    before = snapshot(d / "out")
    p = subprocess.Popen([*DISTC, "fmt", "-", "-o", str(d / "out/o.ir")], stdin=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    half = MAIN.read_bytes()[:-10]
    for _ in range(20):  # far more than a pipe holds: distc is reading once this returns
        p.stdin.write(half[: len(half) // 2] if _ == 19 else b" " * 65536)
        p.stdin.flush()
    p.send_signal(signal.SIGTERM)
    p.stdin.close()
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert p.returncode == 143, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    assert snapshot(d / "out") == before and not [q for q in d.rglob(".distc-*")]


# ------------------------------------------------------------------------ data loss, reported
def test_fmt_of_one_program_of_several_does_not_replace_its_input(tmp_path):
    two = tmp_path / "two.ir"
    two.write_text(MAIN.read_text() + STARTUP.read_text())
    before = two.read_bytes()
    r = run("fmt", two, "--program", "2", "-o", two)
    assert r.exit_code == 2 and "distc does not overwrite its inputs" in r.stderr
    assert two.read_bytes() == before
    assert run("fmt", two, "-o", two).exit_code == 0 and two.read_bytes() == before  # all of it: in place


def test_two_spellings_of_one_output_are_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("shard", MAIN, "--rank", "0", "-o", "X", "--startup", STARTUP, "--startup-out", "./X")
    assert r.exit_code == 2 and "-o 'X' and --startup-out './X' name the same file" in r.stderr
    assert not (tmp_path / "X").exists()
    (tmp_path / "Y").write_text("old\n")
    os.link(tmp_path / "Y", tmp_path / "Z")  # a hard link is the same file too
    r = run("shard", MAIN, "--rank", "0", "-o", "Y", "--startup", STARTUP, "--startup-out", "Z")
    assert r.exit_code == 2 and "name the same file" in r.stderr and (tmp_path / "Y").read_text() == "old\n"


def test_stdin_is_an_input_by_its_identity(tmp_path):
    x = tmp_path / "X"
    x.write_bytes(MAIN.read_bytes())
    with open(x, "rb") as f:
        r = proc("shard", "-", "--rank", "0", "-q", "-o", x, stdin=f)
    assert r.returncode == 2 and "-o" in r.stderr and "is the input '<stdin>'" in r.stderr
    assert x.read_bytes() == MAIN.read_bytes()
    with open(x, "ab") as out:  # stdout appended to the input
        r = subprocess.run([*DISTC, "fmt", str(x)], stdout=out, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 2 and "stdout is the input" in r.stderr and x.read_bytes() == MAIN.read_bytes()


def test_a_planted_symlink_or_fifo_at_the_temporary_name_is_never_followed(tmp_path, monkeypatch):
    import distc.outputs

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    monkeypatch.setattr(distc.outputs.secrets, "token_hex", lambda n: "0" * (2 * n))
    name = tmp_path / ".distc-0000000000000000.tmp"
    for plant in (lambda: os.symlink(victim, name), lambda: os.mkfifo(name)):
        plant()
        r = run("fmt", MAIN, "-o", tmp_path / "out.ir")
        assert r.exit_code == 1 and "File exists" in r.stderr, r.output
        assert victim.read_text() == "precious\n" and not (tmp_path / "out.ir").exists()
        assert name.is_symlink() or name.is_fifo()  # the planted file is not ours to remove
        name.unlink()


def test_temporary_names_are_unpredictable(tmp_path, monkeypatch):
    from distc.outputs import Outputs

    with Outputs() as out:
        a, b = out.add("-o", str(tmp_path / "a")), out.add("-o", str(tmp_path / "b"))
        assert a.tmp != b.tmp and str(os.getpid()) not in a.tmp and len(a.tmp) > 20


def test_concurrent_runs_into_one_pattern_never_interleave(tmp_path):
    d = setup_dir(tmp_path)
    for r in range(4):
        (d / f"out/m{r}.ir").write_text("old\n")
    pattern = d / "out/m{rank}.ir"
    # A stops for 2 s between its second and third rename, holding the lock of out/; B starts then
    a = subprocess.Popen([*DISTC, "shard", str(d / "main.ir"), "--all-ranks", "-q", "--stage", "0", "-o", str(pattern)],
                         env={**os.environ, "DISTC_FAULT_INJECT": "rename:3=sleep:2"}, stderr=subprocess.PIPE)
    t0 = time.time()
    while "old\n" in {(d / f"out/m{r}.ir").read_text() for r in range(2)} and time.time() - t0 < 60:
        time.sleep(0.02)  # until A has renamed two files
    b = subprocess.run([*DISTC, "shard", str(d / "main.ir"), "--all-ranks", "-q", "--stage", "1", "-o", str(pattern)],
                       capture_output=True)
    a.wait(timeout=60)
    assert a.returncode == 0 and b.returncode == 0
    texts = [(d / f"out/m{r}.ir").read_text() for r in range(4)]
    assert all("reduce_scatter" in t for t in texts), "B committed whole, after A (not BBAA)"
    assert not [p for p in d.rglob(".distc-*")]


def test_a_worker_whose_parent_was_killed_just_ends(tmp_path):
    """The workers of a parent killed outright (SIGKILL: no clean-up possible) finish, find no one
    to answer and end: none runs the parent's code (no report, no signals to other pids)."""
    d = setup_dir(tmp_path)
    p = subprocess.Popen([*DISTC, *map(str, COMMANDS["shard-all"](d))], stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "DISTC_FAULT_INJECT": "write:1=parent:SIGKILL"}, start_new_session=True)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert_no_process_left(p.pid)
    assert err == "", err  # no report from a worker, no traceback
    assert snapshot(d / "out")["m0.ir"] == b"old m0.ir\n"


# ------------------------------------------------------------------------ closed and full streams
@pytest.mark.parametrize("redirect,code,says", [
    ({"stdout": subprocess.DEVNULL, "close": 1}, 1, "<stdout>: error: stdout is closed"),
    ({"stdin": None, "close": 0}, 1, "<stdin>: error: stdin is closed"),
])
def test_closed_streams(tmp_path, redirect, code, says):
    args = ["fmt", "-"] if redirect["close"] == 0 else ["shard", str(MAIN), "-q", "--json"]
    fd = redirect["close"]
    r = subprocess.run([*DISTC, *args], stderr=subprocess.PIPE, text=True, close_fds=True,
                       preexec_fn=lambda: os.close(fd))
    assert r.returncode == code and says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_json_with_stdout_on_a_full_disk():
    with open("/dev/full", "w") as full:
        r = subprocess.run([*DISTC, "shard", str(MAIN), "-q", "--json"], stdout=full, stderr=subprocess.PIPE,
                           text=True)
    assert r.returncode == 1 and "<stdout>: error: No space left on device" in r.stderr
    assert "Traceback" not in r.stderr


def test_an_output_device_that_is_full(tmp_path):
    r = run("fmt", MAIN, "-o", "/dev/full")
    assert r.exit_code == 1 and "/dev/full: error: No space left on device" in r.stderr
