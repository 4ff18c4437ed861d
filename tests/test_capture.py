"""``distc capture`` without Paddle: the command line, the per-rank processes, the folder.

Real Paddle runs in ``make test-paddle`` (tests/paddle/).  Here the command's interpreter is a
stand-in (``bin/python`` in a temporary folder) that plays a Paddle process the way
``distc/capture/hooks.py`` does: it writes the snapshots Paddle 3.3.1 printed for
``samples/train_mlp.py`` (stored in tests/data) and ``result.json``, or fails, crashes, hangs as
the test asks (``FAKE``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
STAGE1 = {0: DATA / "corpus/paddle-3.3.1/stage1"}
STAGE1.update({r: DATA / "oracle/stage1" for r in (1, 2, 3)})

FAKE = textwrap.dedent('''\
    #!{python}
    import json, os, shutil, sys, time
    args = sys.argv[1:]
    out = args[args.index("--out") + 1]
    stage0 = "--stage0" in args
    rank = int(os.environ["PADDLE_TRAINER_ID"])
    world = int(os.environ["PADDLE_TRAINERS_NUM"])
    mode = os.environ.get("FAKE", "ok")
    log = os.path.join(os.environ["FAKE_LOG"], "r%d.%s.w%d" % (rank, "s0" if stage0 else "as", world))
    open(log, "w").close()
    os.makedirs(out, exist_ok=True)
    data = {data!r}
    stage = 0 if stage0 else 1
    res = dict(rank=rank, paddle=os.environ.get("FAKE_VERSION", "3.3.1"), python="3.11", mode="train",
               stage=1, shard_fn="ShardingStage1", sharding_mesh_dim="dp", mesh_dim_names=["dp", "mp"],
               param_mesh_dims=[["dp", "mp"]],
               optimizer="AdamW", strategy=dict(amp=dict(enable=False)))
    snaps = ["before_partition", "after_reshard", "dense", "startup_after_remove", "startup_final"]
    if res["paddle"] != "3.3.1":
        res.update(status="version", message="PaddlePaddle %s is not supported by distc capture: ... "
                   "paddlepaddle==3.3.1" % res["paddle"])
        snaps = []
    elif mode == "crash" and rank == 2:
        os.kill(os.getpid(), 9)
    elif mode == "hang" and rank == 1:
        open(os.path.join(os.environ["FAKE_LOG"], "hang.pid"), "w").write(str(os.getpid()))
        time.sleep(60)
    elif mode == "fail" and rank == 1:
        res.update(status="error", message="ValueError: bad shape", where="%s:4:5" % os.environ["FAKE_SCRIPT"],
                   traceback="Traceback ...\\nValueError: bad shape\\n")
        snaps = []
    elif mode == "refuse" and not stage0:
        res.update(status="error", message="AttributeError: 'list' object has no attribute 'get_defining_op'")
        snaps = ["before_partition"]
    elif mode == "flaky" and not os.path.exists(log + ".flaky"):  # dy2static's race, once per (rank, form)
        open(log + ".flaky", "w").close()
        res.update(status="error", message="ValueError: Function: forward doesn't exist in the Module "
                   "transformed from AST.")
        snaps = []
    elif mode == "noengine":
        res.update(status="no-engine", message="the script ended without preparing a train program")
        snaps = []
    else:
        res["status"] = "ok"
    for s in snaps:
        shutil.copyfile(os.path.join(data[str(rank)], "mlp_dp2mp2_adamw.s%d.r%d.%s.ir" % (stage, rank, s)),
                        os.path.join(out, s + ".ir"))
    res["snapshots"] = snaps
    json.dump(res, open(os.path.join(out, "result.json"), "w"))
''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A stand-in interpreter and a script for it; returns (python, script, log folder)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    py = bin_ / "python"
    py.write_text(FAKE.format(python=sys.executable, data={str(r): str(p) for r, p in STAGE1.items()}))
    py.chmod(0o755)
    script = tmp_path / "train.py"
    script.write_text("import paddle\n\nmodel = build(\n    x)\n")
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_SCRIPT", str(script))
    return str(py), str(script), log


def distc(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "distc", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".distc-capture")]


def test_capture_writes_inputs_results_and_manifest(fake, tmp_path):
    py, script, log = fake
    out = tmp_path / "cap"
    r = distc("capture", "-o", str(out), "-j", "2", "--", py, script, "--stage", "1")
    assert r.returncode == 0, r.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["format"] == "distc-capture/1" and man["paddle"] == "3.3.1" and man["stage"] == 1
    assert man["ranks"] == [0, 1, 2, 3] and man["world_size"] == 4
    assert man["meshes"] == [{"shape": [2, 2], "process_ids": [0, 1, 2, 3], "dim_names": []}]
    assert man["command"] == [py, script, "--stage", "1"]
    for rank in range(4):
        for s in ("before_partition", "startup_after_remove"):
            f = f"s0.r{rank}.{s}.ir"
            assert (out / f).read_bytes() == (STAGE1[rank] / f"mlp_dp2mp2_adamw.{f}").read_bytes()
            assert man["files"][f]["role"] == "input" and man["files"][f]["rank"] == rank
        for s in ("after_reshard", "dense", "startup_final", "before_partition"):
            f = f"s1.r{rank}.{s}.ir"
            assert (out / f).read_bytes() == (STAGE1[rank] / f"mlp_dp2mp2_adamw.{f}").read_bytes()
            assert man["files"][f]["role"] == "paddle"
    # the first rank ran with the provisional world size 8, then again with the program's 4;
    # every rank ran the script as written and its stage-0 form
    assert sorted(p.name for p in log.iterdir()) == sorted(
        ["r0.as.w8"] + [f"r{r}.{k}.w4" for r in range(4) for k in ("as", "s0")])
    assert f"distc shard {out} -o" in r.stderr and "ZeRO stage 1 (ShardingStage1 over dp)" in r.stderr
    assert leftovers(tmp_path) == []


def test_next_commands_run_as_printed(fake, tmp_path):
    """The summary's next steps (distc shard on the inputs, distc diff against Paddle's program)."""
    py, script, _ = fake
    r = distc("capture", "-o", "cap", "--world-size", "4", "--json", "--", py, script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "ok" and doc["files"] == 28 and doc["paddle_errors"] == {}
    for cmd in doc["next"]:
        p = subprocess.run(cmd.replace("distc ", f"{sys.executable} -m distc ", 1), shell=True, cwd=tmp_path,
                           capture_output=True, text=True)
        assert p.returncode == 0, (cmd, p.stdout[-2000:], p.stderr[-2000:])
    for rank in range(4):
        assert subprocess.run([sys.executable, "-m", "distc", "diff", f"cap/s1.r{rank}.startup_final.ir",
                               f"out/startup.r{rank}.ir", "--no-summary"], cwd=tmp_path).returncode == 0


def test_dy2static_race_is_run_again(fake, tmp_path, monkeypatch):
    """Paddle's dy2static failing to import its own module (parallel processes) is not a result."""
    py, script, log = fake
    monkeypatch.setenv("FAKE", "flaky")
    r = distc("capture", "-o", str(tmp_path / "cap"), "--world-size", "4", "--ranks", "2", "--", py, script)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in log.iterdir()) == ["r2.as.w4", "r2.as.w4.flaky", "r2.s0.w4", "r2.s0.w4.flaky"]
    assert not list((tmp_path / "cap").glob("*.error.txt"))


def test_paddle_refusal_is_kept_with_a_warning(fake, tmp_path, monkeypatch):
    py, script, _ = fake
    monkeypatch.setenv("FAKE", "refuse")
    out = tmp_path / "cap"
    r = distc("capture", "-o", str(out), "--world-size", "4", "--ranks", "1,2", "--", py, script)
    assert r.returncode == 0, r.stderr
    assert "warning: Paddle refuses the script at stage 1 on ranks 1-2: AttributeError" in r.stderr
    assert r.stderr.count("warning:") == 1
    assert (out / "s1.r2.error.txt").read_text() == \
        "AttributeError: 'list' object has no attribute 'get_defining_op'\n"
    assert (out / "s0.r2.before_partition.ir").exists() and not (out / "s1.r2.after_reshard.ir").exists()
    man = json.loads((out / "manifest.json").read_text())
    assert man["rank_results"]["2"]["status"] == "paddle-error"


@pytest.mark.parametrize("mode,ranks,expect", [
    ("fail", "0,1", "train.py:4:5: error: rank 1: the script failed: ValueError: bad shape"),
    ("crash", "2", "error: rank 2: the script failed: CRASH: the process was killed by SIGKILL"),
    ("noengine", "0-3", "error: rank 0: no program: the script ended without preparing a train program"),
])
def test_a_failing_rank_writes_nothing(fake, tmp_path, monkeypatch, mode, ranks, expect):
    py, script, _ = fake
    monkeypatch.setenv("FAKE", mode)
    out = tmp_path / "cap"
    r = distc("capture", "-o", str(out), "--world-size", "4", "--ranks", ranks, "--", py, script)
    assert r.returncode == 1, r.stderr
    assert expect in r.stderr, r.stderr
    assert not out.exists() and leftovers(tmp_path) == []
    if mode == "fail":  # the line of the script, a caret under the column
        assert "    x)\n    ^" in r.stderr


def test_timeout_stops_the_rank(fake, tmp_path, monkeypatch):
    py, script, _ = fake
    monkeypatch.setenv("FAKE", "hang")
    r = distc("capture", "-o", str(tmp_path / "cap"), "--world-size", "4", "--ranks", "1", "--timeout", "2", "--",
              py, script)
    assert r.returncode == 1 and "rank 1" in r.stderr and "took over 2 s" in r.stderr, r.stderr
    assert not (tmp_path / "cap").exists()


def test_a_signal_stops_every_child_and_writes_nothing(fake, tmp_path, monkeypatch):
    """SIGTERM while a rank runs: the children are killed, nothing is written, exit 143."""
    import signal
    import time

    py, script, log = fake
    monkeypatch.setenv("FAKE", "hang")
    p = subprocess.Popen([sys.executable, "-m", "distc", "capture", "-o", str(tmp_path / "cap"), "--world-size", "4",
                          "--", py, script], stderr=subprocess.PIPE, text=True)
    for _ in range(300):  # (the file is made before its pid is written: wait for the pid)
        if (log / "hang.pid").exists() and (log / "hang.pid").read_text().strip():
            break
        time.sleep(0.1)
    child = int((log / "hang.pid").read_text())
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    assert "stopped by SIGTERM" in err
    assert not (tmp_path / "cap").exists() and leftovers(tmp_path) == []
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_other_paddle_version_is_refused(fake, tmp_path, monkeypatch):
    py, script, _ = fake
    monkeypatch.setenv("FAKE_VERSION", "2.6.2")
    r = distc("capture", "-o", str(tmp_path / "cap"), "--", py, script)
    assert r.returncode == 1
    assert "PaddlePaddle 2.6.2 is not supported" in r.stderr and "paddlepaddle==3.3.1" in r.stderr
    assert not (tmp_path / "cap").exists() and leftovers(tmp_path) == []


def test_real_version_check_and_missing_paddle(tmp_path):
    """hooks.py itself, in an interpreter without Paddle (this one), and its version check."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("capture_hooks", ROOT / "distc/capture/hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert hooks.check_version("3.3.1") is None
    assert "2.6.2 is not supported" in hooks.check_version("2.6.2")
    r = distc("capture", "-o", str(tmp_path / "cap"), "--", sys.executable, str(ROOT / "samples/train_mlp.py"))
    if r.returncode == 0:  # pragma: no cover - an interpreter with Paddle 3.3.1
        pytest.skip("this interpreter has Paddle")
    assert r.returncode == 1 and "PaddlePaddle is not installed for the command's interpreter" in r.stderr
    assert not (tmp_path / "cap").exists() and leftovers(tmp_path) == []


def test_replaces_an_earlier_capture_but_not_other_folders(fake, tmp_path):
    py, script, _ = fake
    out = tmp_path / "cap"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    r = distc("capture", "-o", str(out), "--world-size", "4", "--", py, script)
    assert r.returncode == 1 and "is not a distc capture folder" in r.stderr
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    assert distc("capture", "-o", str(out), "--world-size", "4", "--ranks", "3", "--", py, script).returncode == 0
    (out / "extra.ir").write_text("old")
    r = distc("capture", "-o", str(out), "--world-size", "4", "--ranks", "1", "--", py, script)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir())[:3] == ["manifest.json", "s0.r1.before_partition.ir",
                                                          "s0.r1.startup_after_remove.ir"]
    assert not (out / "extra.ir").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("cmd,msg", [
    ([], "give the training command after --"),
    (["train.py"], "is a script: give the Python interpreter"),
    (["bash", "x.sh"], "must start with a Python interpreter"),
    (["python3", "-c", "print(1)"], "python -c is not supported"),
    (["python3", "missing_script.py"], "'missing_script.py': no such script"),
    (["python3.99", "x.py"], "'python3.99': no such interpreter"),
])
def test_usage_errors(tmp_path, cmd, msg):
    r = distc("capture", "-o", str(tmp_path / "cap"), "--", *cmd)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert not (tmp_path / "cap").exists()


def test_rank_outside_the_mesh(fake, tmp_path):
    py, script, _ = fake
    r = distc("capture", "-o", str(tmp_path / "cap"), "--ranks", "0,5", "--", py, script)
    assert r.returncode == 1 and "rank 5 is in none of the program's meshes (ranks 0, 1, 2, 3)" in r.stderr
    r = distc("capture", "-o", str(tmp_path / "cap"), "--ranks", "4", "--world-size", "4", "--", py, script)
    assert r.returncode == 2 and "rank 4 is not below the world size 4" in r.stderr


def test_python_m_distc_capture():
    r = subprocess.run([sys.executable, "-m", "distc.capture", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "Usage: distc capture [OPTIONS] -- PYTHON SCRIPT" in r.stdout
    assert "manifest.json" in r.stdout


def test_distc_itself_never_imports_paddle():
    """Every command but capture is imported without Paddle (the layer test checks the source)."""
    code = ("import sys, distc.cli, distc.capture.command, distc.capture.session, distc.commands.shard; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'paddle']")
    assert subprocess.run([sys.executable, "-c", code], env=dict(os.environ)).returncode == 0


def test_shard_takes_the_capture_folder(fake, tmp_path):
    """``distc shard FOLDER``: the folder's inputs and the script's stage, mesh dim and ranks."""
    py, script, _ = fake
    assert distc("capture", "-o", "cap", "--world-size", "4", "--ranks", "2,3", "--", py, script,
                 cwd=tmp_path).returncode == 0
    (tmp_path / "out").mkdir()
    r = distc("shard", "cap", "--rank", "2", "--dense", "-q", "-o", "out/d2.ir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out/d2.ir").read_text() == (STAGE1[2] / "mlp_dp2mp2_adamw.s1.r2.dense.ir").read_text()
    r = distc("shard", "cap", "--stage", "0", "-q", "-o", "out/z.r{rank}.ir", cwd=tmp_path)  # an option given wins
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out/z.r3.ir").read_text() == (STAGE1[3] / "mlp_dp2mp2_adamw.s0.r3.after_reshard.ir").read_text()
    (tmp_path / "plain").mkdir()
    r = distc("shard", "plain", "-o", "out/x.ir", cwd=tmp_path)
    assert r.returncode == 1 and "plain: error: is not a distc capture folder (no manifest.json)" in r.stderr
    # a rank the folder does not hold is named as such (it was `cap/s0.r0...ir: error: no such file`)
    for opts in (["--rank", "0"], ["--ranks", "2-3,0-99999999999"], ["--rank", "0", "--startup-out", "out/s.ir"]):
        r = distc("shard", "cap", *opts, "-o", "out/x{rank}.ir", cwd=tmp_path)
        assert r.returncode == 1, r.stderr
        assert "cap: error: rank 0 was not captured: the folder holds ranks 2-3 (`distc capture --ranks 0" in r.stderr
    assert not (tmp_path / "out/x0.ir").exists()
    r = distc("shard", "cap", "--all-ranks", "-o", "out/x{rank}.ir", "--startup-out", "out/s{rank}.ir", cwd=tmp_path)
    assert r.returncode == 1 and "cap: error: --all-ranks with --startup-out needs every rank's startup program: " \
        "rank 0 was not captured (the folder holds ranks 2-3)" in r.stderr, r.stderr


def test_report_takes_the_capture_folder(fake, tmp_path):
    """``distc report FOLDER``, as ``distc shard FOLDER``: the script's stage, mesh dim and ranks."""
    py, script, _ = fake
    assert distc("capture", "-o", "cap", "--world-size", "4", "--ranks", "2,3", "--", py, script,
                 cwd=tmp_path).returncode == 0
    r = distc("report", "cap", "-o", "page.html", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stderr)
    assert doc["stage"] == 1 and doc["sharding_axis"] == 0 and sorted(map(int, doc["ranks"])) == [2, 3], doc
    assert doc["main"] == os.path.join("cap", "s0.r2.before_partition.ir")
    r = distc("report", "cap", "--stage", "3", "-q", "-o", "page.html", "--json", cwd=tmp_path)  # a given option wins
    assert r.returncode == 0 and json.loads(r.stderr.splitlines()[-1])["stage"] == 3, r.stderr
    assert "warning: ZeRO stage 3: Paddle 3.3.1 fails to build this program" in r.stderr  # (the JSON: the last line)
    r = distc("report", "cap", "--ranks", "1", "-o", "page.html", cwd=tmp_path)
    assert r.returncode == 1 and "cap: error: rank 1 was not captured" in r.stderr
