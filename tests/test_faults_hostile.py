"""A hostile user on the newest features (pipeline job outputs, ``--all-ranks -j``, capture folders,
``report``, ``--json``): bad paths and patterns, outputs over inputs, damaged files and manifests,
signals -- each a located or plain error (exit 1; usage 2), never a traceback, never a partial
output.  (The write-layer faults and signal points of every writing command: tests/test_faults.py.)"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import scheddata
from test_capture import fake, leftovers  # noqa: F401  (fake: the stand-in Paddle fixture)
from test_faults import DISTC, MAIN, STARTUP, assert_no_process_left, proc, run, snapshot

PP = "llama_pp2dp2.1F1B.a4.s0"
SCHED = ["--pp-schedule", "1F1B", "--acc-steps", "4"]


@pytest.fixture
def pp(tmp_path) -> Path:
    """Paddle's pp2 x dp2 LLaMA input, its startup programs, and old outputs in out/."""
    (tmp_path / "main.ir").write_text(scheddata.text(f"{PP}.r0.before_partition.ir"))
    for r in range(4):
        (tmp_path / f"startup.r{r}.ir").write_text(scheddata.text(f"{PP}.r{r}.startup_after_remove.ir"))
    (tmp_path / "out").mkdir()
    return tmp_path


def pp_all(d: Path) -> list[str]:
    return ["shard", str(d / "main.ir"), *SCHED, "--all-ranks", "-j", "2", "-q", "-o", str(d / "out/r{rank}.ir"),
            "--job-out", str(d / "out/r{rank}.{job}.ir"), "--job-list", str(d / "out/r{rank}.jobs.txt"),
            "--startup", str(d / "startup.r{rank}.ir"), "--startup-out", str(d / "out/r{rank}.st.ir")]


def clean(r, code: int) -> None:
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("args,says", [
    (["-o", "out/r{rank}.{job}.ir"], "-o 'out/r{rank}.{job}.ir': unknown field {job} (the one field is {rank}; "
                                     "each job program goes to --job-out, e.g. --job-out 'out/r{rank}.{job}.ir')"),
    (["-o", "out/r{rank}.ir", "--job-out", "out/r{rank}.{job}.{stage}.ir"],
     "--job-out 'out/r{rank}.{job}.{stage}.ir': unknown field {stage} (the fields are {rank} and {job})"),
    (["-o", "out/r{rank}.ir", "--job-out", "out/r{rank}.{job}}.ir"], "a brace outside {rank} and {job}"),
    (["-o", "out/r{rank}.forward.ir", "--job-out", "out/r{rank}.{job}.ir"],
     "-o 'out/r0.forward.ir' and --job-out 'out/r0.forward.ir' name the same file"),
    (["-o", "out/r{rank}.ir", "--job-out", "out/r{rank}.{job}.ir", "--job-list", "out/r{rank}.backward.ir"],
     "--job-out 'out/r0.backward.ir' and --job-list 'out/r0.backward.ir' name the same file"),
    (["-o", "out/r{rank}.ir", "--startup", "startup.r{rank}.ir", "--startup-out", "startup.r{rank}.ir"],
     "--startup-out 'startup.r0.ir' is the input 'startup.r0.ir': distc does not overwrite its inputs"),
    (["-o", "out/r{rank}.ir", "--job-out", "main.{job}", "--job-list", "out/r{rank}.jobs.txt"],
     "several ranks write one file each: give --job-out a pattern with {rank}"),
])
def test_pipeline_output_patterns_are_usage_errors_before_any_work(pp, args, says):
    r = proc("shard", "main.ir", *SCHED, "--all-ranks", "-q", *args, cwd=pp)
    clean(r, 2)
    assert says in r.stderr, r.stderr
    assert list((pp / "out").iterdir()) == []


def test_a_job_output_in_a_missing_folder_writes_nothing(pp):
    """{job} cannot make folders: the first job's file is named, before any lowering."""
    r = proc("shard", "main.ir", *SCHED, "--all-ranks", "-q", "-o", "out/r{rank}.ir",
             "--job-out", "out/{job}/r{rank}.ir", cwd=pp)
    clean(r, 1)
    assert "out/recv_forward/r0.ir: error: cannot write: no directory" in r.stderr, r.stderr
    assert list((pp / "out").iterdir()) == []


@pytest.mark.parametrize("sig,code,delay", [(signal.SIGINT, 130, 1.5),
                                            pytest.param(signal.SIGHUP, 129, 4.0, marks=pytest.mark.slow)])
def test_a_signal_into_a_pipelined_all_ranks_run(pp, sig, code, delay):
    """A real signal into `--pp-schedule --all-ranks -j 2` with job programs, job lists and startup
    programs (32 files): every old file as it was (or, had it finished, every file new), no
    temporary file, no worker left, no traceback."""
    names = [f"r{r}.{k}" for r in range(4) for k in ("ir", "st.ir", "jobs.txt", "forward.ir", "backward.ir")]
    for n in names:
        (pp / "out" / n).write_text(f"old {n}\n")
    before = snapshot(pp / "out")
    p = subprocess.Popen([*DISTC, *pp_all(pp)], stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(delay)
    p.send_signal(sig)
    _, err = p.communicate(timeout=300)
    after = snapshot(pp / "out")
    if p.returncode == 0:
        assert len(after) == 32 and all(after[n] != before[n] for n in names)
    else:
        assert p.returncode in (code, -sig) and after == before, err
    assert_no_process_left(p.pid)
    assert not list(pp.rglob(".distc-*")) and "Traceback" not in err, err


def test_a_signal_distc_was_started_with_ignored_stays_ignored(tmp_path):
    """`nohup distc ...` (SIGHUP ignored) and a script's background job (SIGINT ignored): the signal
    does not stop the run (it stopped it with 129/130 before), SIGTERM still does."""
    (tmp_path / "out").mkdir()
    args = [*DISTC, "shard", str(MAIN), "--all-ranks", "-j", "2", "-q", "-o", str(tmp_path / "out/m{rank}.ir"),
            "--startup", str(STARTUP), "--startup-out", str(tmp_path / "out/s{rank}.ir")]

    def ignoring():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=ignoring)
    deadline = time.time() + 120
    while p.poll() is None and time.time() < deadline:
        p.send_signal(signal.SIGHUP)
        p.send_signal(signal.SIGINT)
        time.sleep(0.2)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == sorted(
        [f"m{r}.ir" for r in range(4)] + [f"s{r}.ir" for r in range(4)])
    shutil.rmtree(tmp_path / "out")
    (tmp_path / "out").mkdir()
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=ignoring)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode in (143, -signal.SIGTERM, 0), err
    if p.returncode != 0:
        assert list((tmp_path / "out").iterdir()) == []
    assert_no_process_left(p.pid)


def test_a_binary_input_never_reaches_the_terminal_raw(tmp_path):
    """A binary file's line is shown with its control characters (a terminal's escape sequences)
    replaced, the caret where the bad byte is."""
    f = tmp_path / "x.ir"
    f.write_bytes(b"abc\x1b[31mRED\x07\x00\n")
    r = proc("fmt", f)
    clean(r, 1)
    assert "x.ir:1:13: error: a binary file, not PIR text (a NUL byte)" in r.stderr, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "abc\ufffd[31mRED\ufffd\ufffd\n" + " " * 12 + "^" in r.stderr, r.stderr
    f.write_bytes(b"x\x1b]0;title\x07\xff\n")
    r = proc("shard", f, "--rank", "0")
    clean(r, 1)
    assert "not UTF-8 text (byte 0xff" in r.stderr and "\x1b" not in r.stderr, r.stderr


MANIFESTS = {
    "truncated": (lambda t: '{\n "format": "distc-capture/1",\n "ranks": [0, 1\n',
                  "unreadable manifest: Expecting ',' delimiter\n"),
    "a list": (lambda t: "[1, 2]", "not a distc-capture/1 manifest (format 'list')"),
    "no ranks": (lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "ranks"}),
                 "a damaged distc-capture/1 manifest: 'ranks' is not a list of ranks (capture the script again)"),
    "outside": (lambda t: json.dumps({**json.loads(t), "inputs": {"main": "../../etc/passwd", "startup": "x"}}),
                "a damaged distc-capture/1 manifest: 'inputs' does not name the main and startup files in the folder"),
    "stage": (lambda t: json.dumps({**json.loads(t), "stage": "3"}),
              "a damaged distc-capture/1 manifest: 'stage' is '3', not 0-3"),
    "amp": (lambda t: json.dumps({**json.loads(t), "strategy": {"amp": True}}),
            "a damaged distc-capture/1 manifest: 'strategy.amp' is not an object"),
}


def test_a_damaged_capture_folder_is_a_located_error_for_every_command(fake, tmp_path):  # noqa: F811
    py, script, _ = fake
    assert subprocess.run([*DISTC, "capture", "-o", "cap", "--world-size", "4", "--", py, script], cwd=tmp_path,
                          capture_output=True).returncode == 0
    (tmp_path / "out").mkdir()
    cap, out = tmp_path / "cap", tmp_path / "out"
    good = (cap / "manifest.json").read_text()
    for name, (damage, says) in MANIFESTS.items():
        (cap / "manifest.json").write_text(damage(good))
        for cmd in (["shard", cap, "-q", "-o", out / "m{rank}.ir"], ["report", cap, "-o", out / "r.html"],
                    ["verify", cap], ["diff", cap, cap / "s1.r0.after_reshard.ir"]):
            r = run(*cmd)  # (in-process: the same handling as a process, 30 fewer start-ups)
            assert r.exit_code == 1 and "Traceback" not in r.stderr, (name, cmd, r.stderr)
            where = "cap/manifest.json:4:1" if name == "truncated" else "cap/manifest.json"
            assert f"{where}: error: {says}" in r.stderr, (name, cmd, r.stderr)
            assert r.stdout == "" and list(out.iterdir()) == []
        doc = json.loads(run("verify", cap, "--json").stdout)
        assert (doc["status"], doc["kind"], doc["exit"]) == ("error", "input", 1)
        assert doc["file"].endswith("cap/manifest.json") and doc["line"] == (4 if name == "truncated" else None)
    (cap / "manifest.json").write_text(good)
    # a truncated program in the folder: located in the folder's file
    src = (cap / "s0.r0.before_partition.ir").read_text()
    (cap / "s0.r0.before_partition.ir").write_text(src[: len(src) // 3])
    for cmd in (["shard", cap, "-q", "-o", out / "m{rank}.ir"], ["verify", cap, "--ranks", cap / "s1.r{rank}.after_reshard.ir"]):
        r = run(*cmd)
        assert r.exit_code == 1 and "cap/s0.r0.before_partition.ir:" in r.stderr, r.stderr
        assert ": error: unexpected end of input" in r.stderr and "Traceback" not in r.stderr
    assert list(out.iterdir()) == [] and leftovers(tmp_path) == []
