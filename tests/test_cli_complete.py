"""Shell completion (``distc/cmdline/complete.py``): click's way, which went with click (9fb3ab0)
and is back, so that a shell start-up file holding ``eval "$(_DISTC_COMPLETE=bash_source distc)"``
completes again: ``bash_source``/``zsh_source``/``fish_source`` print the script, the script asks
``*_complete`` with the command line's words; commands, options, a choice's values, file names.
The bash script runs in a real bash here (zsh and fish are not on this machine: their scripts and
answers are checked as text)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def distc(instruction: str, words: list[str] | None = None, cword: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "_DISTC_COMPLETE": instruction}
    if words is not None:
        env.update(COMP_WORDS="\n".join(words), COMP_CWORD=str(len(words) - 1 if cword is None else cword))
    return subprocess.run([sys.executable, "-c", "from distc.cli import run; run()"], capture_output=True,
                          text=True, env=env, timeout=120)


def answers(*words: str) -> list[str]:
    r = distc("bash_complete", ["distc", *words])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout.splitlines()


def test_the_scripts():
    for shell, marks in (("bash", ["_distc_complete()", "bash_complete", "complete -o nosort -F _distc_complete distc"]),
                         ("zsh", ["#compdef distc", "zsh_complete", "compdef _distc_complete distc"]),
                         ("fish", ["function __distc_complete", "fish_complete", "complete --no-files --command distc"])):
        r = distc(f"{shell}_source")
        assert r.returncode == 0 and r.stderr == "" and all(m in r.stdout for m in marks), (shell, r.stdout, r.stderr)
    r = distc("yes")  # (not an instruction: one line, exit 1, nothing for the shell to run)
    assert (r.returncode, r.stdout) == (1, "") and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("distc: error: _DISTC_COMPLETE=yes: expected {bash,zsh,fish}_source"), r.stderr


def test_what_is_completed():
    assert answers("sh") == ["plain,shard"]
    assert answers("") == [f"plain,{c}" for c in ("capture", "diff", "fmt", "opt", "passes", "report", "reshard",
                                                  "schedule", "shard", "verify")]
    assert answers("-") == ["plain,-V", "plain,--version", "plain,-h", "plain,--help"]
    assert answers("shard", "--pp") == ["plain,--pp-schedule"]
    assert answers("shard", "main.ir", "--pp-schedule", "") == [f"plain,{m}" for m in
                                                                ("FThenB", "1F1B", "VPP", "Eager1F1B", "ZBH1")]
    assert answers("shard", "--pp-schedule=V") == ["plain,--pp-schedule=VPP"]
    assert answers("shard", "--stage", "") == ["file,"]  # (a number: nothing better to offer)
    assert answers("shard", "") == ["file,"] and answers("shard", "-q", "ma") == ["file,"]
    assert answers("shard", "--", "-") == ["file,"]  # after --, files
    assert "plain,--no-coshard" in answers("reshard", "--no")
    assert answers("nosuchcommand", "") == []
    r = distc("zsh_complete", ["distc", "shard", "--am"])
    assert r.stdout.splitlines() == ["plain,--amp"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_with_the_script():
    exe = Path(sys.executable).parent / "distc"
    if not exe.exists():
        pytest.skip("no distc executable beside the interpreter (make install)")
    script = distc("bash_source").stdout
    probe = script + ('COMP_WORDS=(distc sh); COMP_CWORD=1; _distc_complete distc; echo "[${COMPREPLY[*]}]"\n'
                      'COMP_WORDS=(distc shard x.ir --pp-schedule V); COMP_CWORD=4; _distc_complete distc; '
                      'echo "[${COMPREPLY[*]}]"\n')
    env = {**os.environ, "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.splitlines() == ["[shard]", "[VPP]"], (r.stdout, r.stderr)
