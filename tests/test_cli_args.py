"""The command line under a hostile user: what the argument layer does with unknown options,
options given twice, ``--opt=value`` and ``--opt value``, ``-o-``, ``--``, missing arguments,
``-h`` on every command, ``--json`` with usage errors, non-UTF-8 and very long arguments (README's
CLI contract and ``distc --help``'s exit statuses: usage errors exit 2 with the usage line, never
a traceback).  Pinned on d71f2c6's behaviour (click's), which the command-line layer that
replaced click keeps.  Each case is one ``distc`` run, forked from one process that imported
distc (the executable's ``run``: its exit status, its stdout and stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples/mlp_dp2mp2_adamw.ir"
COMMANDS = ("fmt", "shard", "reshard", "verify", "diff", "opt", "capture", "report", "schedule")

RUNNER = r'''
import json, os, sys
from distc.cli import run

out = []
for i, args in enumerate(json.loads(sys.stdin.read())):
    args = [os.fsdecode(a.encode("utf-8", "surrogateescape")) for a in args]
    files = [f"run{i}.out", f"run{i}.err"]
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, name in zip((1, 2), files):
            os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.argv = ["distc", *args]
        run(prog_name="distc")
    _, status = os.waitpid(pid, 0)
    out.append([os.waitstatus_to_exitcode(status), *(open(f, "rb").read().decode("utf-8", "replace") for f in files)])
print(json.dumps(out))
'''


def distc(tmp_path, *cases: list[str]) -> list[tuple[int, str, str]]:
    """Each case's (exit status, stdout, stderr), run in ``tmp_path`` (a ``main.ir`` there)."""
    (tmp_path / "main.ir").write_bytes(SAMPLE.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "OMP_NUM_THREADS": "1"}
    env.pop("DISTC_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps([list(c) for c in cases]), cwd=tmp_path,
                       env=env, capture_output=True, text=True, errors="surrogateescape", timeout=600)
    assert r.returncode == 0, r.stderr
    return [tuple(x) for x in json.loads(r.stdout)]


def usage(rc_out_err, message: str, command: str = "shard", line: bool = True) -> None:
    """Exit 2, nothing on stdout, on stderr the usage line (not for a value missing or given to a
    flag: click's way) and ``Error: message``."""
    rc, out, err = rc_out_err
    assert rc == 2 and out == "", (rc, out, err)
    if not line:
        assert err == f"Error: {message}\n", err
    elif command.startswith("["):  # distc's own usage
        assert err.startswith(f"Usage: distc {command}\nTry 'distc --help' for help.\n"), err
    else:
        assert err.startswith(f"Usage: distc {command} [OPTIONS]") and f"Try 'distc {command} --help' for help." in err, err
    assert err.rstrip("\n").endswith(f"Error: {message}"), err


def test_usage_errors_exit_2_with_the_usage_line(tmp_path):
    runs = distc(tmp_path, ["shard", "main.ir", "--bogus"], ["shard", "--bogus", "main.ir"], ["shard", "main.ir", "-Z"],
                 ["shard"], ["shard", "main.ir", "--rank"], ["shard", "main.ir", "-o"], ["shard", "main.ir", "--rank", "abc"],
                 ["shard", "main.ir", "--stage", "5"], ["shard", "main.ir", "--", "-q"], ["shard", "main.ir", "--sta", "3"],
                 ["shard", "main.ir", "--rank", "--json"], ["shard", "main.ir", "—rank", "1"], ["shard", "main.ir", "--Stage", "3"],
                 ["fmt", "main.ir", "--program=0"], ["diff", "main.ir"], ["shardd"], ["--bogus", "shard", "main.ir"])
    usage(runs[0], "No such option '--bogus'. Did you mean '--jobs'?")
    usage(runs[1], "No such option '--bogus'. Did you mean '--jobs'?")
    usage(runs[2], "No such option '-Z'.")
    usage(runs[3], "Missing argument 'MAIN'.")
    usage(runs[4], "Option '--rank' requires an argument.", line=False)
    usage(runs[5], "Option '-o' requires an argument.", line=False)
    usage(runs[6], "Invalid value for '--rank': 'abc' is not a valid integer.")
    usage(runs[7], "Invalid value for '--stage': 5 is not in the range 0<=x<=3.")
    usage(runs[8], "Got unexpected extra argument (-q)")  # (after --: an argument, not an option)
    usage(runs[9], "No such option '--sta'. (Did you mean one of: '--amp', '--stage', '--startup'?)")  # no abbreviations
    rc, out, err = runs[10]  # --json is an option, not --rank's value: still a JSON error (the word is on the line)
    assert rc == 2 and json.loads(out)["message"] == ("Option '--rank' requires an argument, not the option '--json' "
                                                      "(to mean the word '--json' itself: --rank=--json).")
    usage(runs[11], "Got unexpected extra arguments (—rank 1)")  # (an em dash pasted for --)
    usage(runs[12], "No such option '--Stage'. Did you mean '--stage'?")
    usage(runs[13], "Invalid value for '--program': 0 is not in the range x>=1.", "fmt")
    usage(runs[14], "Missing argument 'B'.", "diff")
    usage(runs[15], "No such command 'shardd'.", "[OPTIONS] COMMAND [ARGS]...")
    usage(runs[16], "No such option '--bogus'.", "[OPTIONS] COMMAND [ARGS]...")  # (an option of distc itself)


def test_json_with_a_usage_error_is_one_json_object_on_stdout(tmp_path):
    runs = distc(tmp_path, ["shard", "main.ir", "--json", "--bogus"], ["shard", "--json"], ["shard", "main.ir", "--json", "-o"],
                 ["shard", "main.ir", "--no-such-flag", "--json"], ["report", "main.ir", "--json", "--stage", "7"],
                 ["verify", "main.ir", "--bogus", "--json"], ["schedule", "main.ir", "--json", "--acc-steps", "x"])
    for (rc, out, err), msg in zip(runs, ["No such option '--bogus'.", "Missing argument 'MAIN'.",
                                          "Option '-o' requires an argument.", "No such option '--no-such-flag'.",
                                          "Invalid value for '--stage': 7", "No such option '--bogus'.",
                                          "Invalid value for '--acc-steps': 'x'"]):
        doc = json.loads(out)
        assert rc == 2 and doc["status"] == "error" and doc["kind"] == "usage" and doc["exit"] == 2, out
        assert doc["message"].startswith(msg) and f"Error: {doc['message']}" in err, (doc, err)


def test_help_on_every_command(tmp_path):
    runs = distc(tmp_path, *([c, h] for c in COMMANDS for h in ("-h", "--help")), ["-h"], ["--help"], [],
                 ["shard", "main.ir", "--json", "-h"], ["shard", "-h", "--bogus"], ["fmt", "--help=yes"])
    for c, (rc, out, err) in zip([c for c in COMMANDS for _ in "hh"], runs):
        assert rc == 0 and err == "" and out.startswith(f"Usage: distc {c} [OPTIONS]") and "-h, --help" in out, (c, out, err)
    assert runs[0][1] == runs[1][1]
    for rc, out, err in runs[-6:-4]:
        assert rc == 0 and out.startswith("Usage: distc [OPTIONS] COMMAND") and "Exit status:" in out
        assert all(f"  {c} " in out for c in COMMANDS), out
    rc, out, err = runs[-4]
    assert rc == 2 and out == "" and err.startswith("Usage: distc [OPTIONS] COMMAND")  # no command: the help, exit 2
    assert runs[-3][:2] == (0, runs[2][1])  # -h after the file and --json: the help
    usage(runs[-2], "No such option '--bogus'. Did you mean '--jobs'?")  # (an unknown option before any help)
    usage(runs[-1], "Option '--help' does not take a value.", line=False)


def test_option_forms_give_the_same_run(tmp_path):
    """``--rank=1``, ``--rank 1``, ``-o-``, ``-o -``, ``--output=-``, ``-qo-``, an option before the
    file or after ``--``'s file (an option given twice: test_option_given_twice_is_a_usage_error)."""
    forms = [["shard", "main.ir", "--rank", "1", "-q", "-o", "-"], ["shard", "main.ir", "--rank=1", "-q", "-o", "-"],
             ["shard", "main.ir", "--rank", "1", "-q", "-o-"], ["shard", "main.ir", "--rank", "1", "-q", "--output=-"],
             ["shard", "main.ir", "--rank", "1", "-qo-"], ["shard", "-q", "--rank", "1", "-o", "-", "main.ir"],
             ["shard", "--rank", "1", "-q", "-o", "-", "--", "main.ir"], ["shard", "main.ir", "--rank", "1", "-q", "-q", "-o-"]]
    runs = distc(tmp_path, *forms)
    assert runs[0][0] == 0 and runs[0][1].startswith("{\n") and runs[0][2] == ""
    assert all(r == runs[0] for r in runs[1:]), [(f, r[0], r[2][-300:]) for f, r in zip(forms, runs) if r != runs[0]]
    assert not (tmp_path / "x.ir").exists()


def test_dashes_non_utf8_and_long_arguments(tmp_path):
    """A file named like an option after ``--``; a file name that is not UTF-8 and one longer than
    the system takes: the input's error (exit 1), never a traceback."""
    (tmp_path / "--weird.ir").write_bytes(SAMPLE.read_bytes())
    bad = os.fsdecode(b"\xff\xfe.ir")
    runs = distc(tmp_path, ["shard", "-q", "-o", "-", "--rank", "1", "--", "--weird.ir"],
                 ["shard", "--", "--weird.ir", "-o", "-"], ["fmt", bad], ["fmt", "x" * 100_000],
                 ["shard", "main.ir", "-q", "-o", "-", "--mesh-dims", "x" * 100_000], ["shard", "main.ir", "--" + "a" * 100_000],
                 ["shard", "main.ir", os.fsdecode(b"--\xff")])
    assert runs[0][0] == 0 and runs[0][1].startswith("{\n")
    usage(runs[1], "Got unexpected extra arguments (-o -)")
    assert runs[2][0] == 1 and runs[2][2].endswith(".ir: error: no such file\n"), runs[2]
    assert runs[3][0] == 1 and runs[3][2].endswith(": error: File name too long\n"), runs[3][2][-200:]
    assert runs[4][0] == 1 and runs[4][2].startswith("main.ir: error: shard-optimizer: mesh_dims names 1 dim(s)")
    assert runs[5][0] == 2 and runs[6][0] == 2 and "Error: No such option" in runs[6][2]
    assert not any("Traceback" in out + err for _, out, err in runs)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_help_or_version_on_a_full_stdout_is_an_error_not_a_traceback(tmp_path):
    """A help page or the version that cannot be written (stdout on a full disk): exit 1 and one
    line on stderr (a traceback and exit 1 with click and after it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["shard", "-h"], ["--version"], ["--help"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "distc", *args], stdout=full, stderr=subprocess.PIPE, text=True,
                               env=env, cwd=tmp_path, timeout=120)
        assert r.returncode == 1 and r.stderr == "distc: error: cannot write: No space left on device\n", (args, r.stderr)


def test_a_number_that_is_not_one(tmp_path):
    """'nan' for a float option (click takes it: a tolerance that makes every value DIVERGED, a
    schedule table of nan, a buffer size read as the default) and an infinite buffer size (an
    internal error, exit 70): usage errors."""
    runs = distc(tmp_path, ["verify", "main.ir", "--ranks", "r{rank}.ir", "--rtol", "nan"],
                 ["schedule", "main.ir", "--acc-steps", "2", "--flops", "NaN"],
                 ["shard", "main.ir", "--tensor-fusion", "--comm-buffer-size", "nan", "-q"],
                 ["shard", "main.ir", "--tensor-fusion", "--comm-buffer-size", "inf", "-q", "-o", "-"],
                 ["shard", "main.ir", "--tensor-fusion", "--comm-buffer-size", "0.5", "-q", "-o", "-"])
    usage(runs[0], "Invalid value for '--rtol': 'nan' is not a valid float range.", "verify")
    usage(runs[1], "Invalid value for '--flops': 'NaN' is not a valid float range.", "schedule")
    usage(runs[2], "Invalid value for '--comm-buffer-size': 'nan' is not a valid float range.")
    usage(runs[3], "--comm-buffer-size inf: a buffer size is a finite number of MB")
    assert runs[4][0] == 0 and runs[4][1].startswith("{\n"), runs[4][2][-300:]


def test_option_given_twice_is_a_usage_error(tmp_path):
    """A single-valued option given twice is a usage error naming it and both values (click let the
    last win silently: ``--rank 0 --rank 1`` lowered rank 1); a flag given twice is the flag, an
    option declared repeatable (``diff --ignore-attr``) keeps working; ``--x`` and ``--no-x``
    together are two values of one option."""
    runs = distc(tmp_path, ["shard", "main.ir", "--rank", "0", "--rank", "1"],
                 ["shard", "main.ir", "-o", "x.ir", "--output", "-"], ["shard", "main.ir", "--stage=1", "--stage", "1"],
                 ["reshard", "main.ir", "--coshard", "--no-coshard"], ["shard", "main.ir", "--rank", "0", "--json", "--rank", "1"],
                 ["shard", "main.ir", "-q", "-q", "--amp", "--amp", "-o", "-"],
                 ["diff", "main.ir", "main.ir", "--ignore-attr", "op_role", "--ignore-attr", "stop_gradient"])
    usage(runs[0], "Option '--rank' is given twice (--rank 0, then --rank 1): it takes one value; give it once.")
    usage(runs[1], "Option '--output' is given twice (-o x.ir, then --output -): it takes one value; give it once.")
    usage(runs[2], "Option '--stage' is given twice (--stage 1, then --stage 1): it takes one value; give it once.")
    usage(runs[3], "Option '--no-coshard' is given twice (--coshard, then --no-coshard): it takes one value; give it "
                   "once.", "reshard")
    rc, out, err = runs[4]
    assert rc == 2 and json.loads(out)["kind"] == "usage" and "'--rank' is given twice" in json.loads(out)["message"]
    assert runs[5][0] == 0 and runs[5][1].startswith("{\n") and runs[5][2] == ""
    assert not (tmp_path / "x.ir").exists()
    assert runs[6][0] == 0, runs[6]


def test_an_option_is_not_a_value(tmp_path):
    """``-o --json`` wrote a file named ``--json`` (click took the next word whatever it was): a word
    naming one of the command's options is never taken as a value (usage error, exit 2, nothing
    written); ``--output=--json`` means that file, ``-o -`` is stdout, ``--rank -1`` a (bad) number."""
    runs = distc(tmp_path, ["shard", "main.ir", "-o", "--json"], ["shard", "main.ir", "-o", "-q"],
                 ["shard", "main.ir", "--output", "-qo-"], ["shard", "main.ir", "-o", "--stage=2"],
                 ["shard", "main.ir", "-q", "--output=--json"], ["shard", "main.ir", "-q", "-o", "-"],
                 ["shard", "main.ir", "--rank", "-1"], ["shard", "main.ir", "--mesh-dims", "-h"],
                 ["shard", "main.ir", "-o", "--bogus"])
    assert not (tmp_path / "-q").exists() and not (tmp_path / "-qo-").exists() and not (tmp_path / "--stage=2").exists()
    for r, word, name in ((runs[0], "--json", "-o"), (runs[1], "-q", "-o"), (runs[2], "-qo-", "--output"),
                          (runs[3], "--stage=2", "-o")):
        rc, out, err = r
        assert rc == 2, r
        assert err.rstrip("\n").endswith(f"Error: Option '{name}' requires an argument, not the option '{word}' (to "
                                          f"mean the word '{word}' itself: --output={word})."), err
        if word == "--json":
            assert json.loads(out)["kind"] == "usage"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("-")) == ["--bogus", "--json"]
    assert runs[4][0] == 0 and (tmp_path / "--json").read_text().startswith("{\n")  # as asked, with =
    assert runs[5][0] == 0 and runs[5][1] == (tmp_path / "--json").read_text()
    usage(runs[6], "Invalid value: --rank must be 0 or more")
    usage(runs[7], "Option '--mesh-dims' requires an argument, not the option '-h' (to mean the word '-h' itself: "
                   "--mesh-dims=-h).")
    assert runs[8][0] == 0 and (tmp_path / "--bogus").exists()  # (a word naming no option is a value, as click)


def test_numbers_out_of_range(tmp_path):
    """``--comm-buffer-size -1`` meant the default (256 MB): a usage error naming the range; 0 is a
    buffer a parameter (Paddle's comm_buffer_size_MB 0)."""
    runs = distc(tmp_path, ["shard", "main.ir", "--tensor-fusion", "--comm-buffer-size", "-1"],
                 ["shard", "main.ir", "--tensor-fusion", "--comm-buffer-size=-0.5"],
                 ["shard", "main.ir", "--tensor-fusion", "--comm-buffer-size", "0", "-q"])
    usage(runs[0], "Invalid value for '--comm-buffer-size': -1.0 is not in the range x>=0.")
    usage(runs[1], "Invalid value for '--comm-buffer-size': -0.5 is not in the range x>=0.")
    assert runs[2][0] == 0 and runs[2][1].startswith("{\n")


def test_compressed_inputs(tmp_path):
    """A program stored as gzip or xz (``main.ir.gz``, ``main.ir.xz``; known by the first bytes, so
    also on stdin) is read as its text by every command that reads one, errors located in that
    text (FILE:LINE:COL, the line and a caret); a cut or corrupt archive is an error on the file;
    fmt does not write text in place of a compressed input.  (It was 'a binary file, not PIR text'.)"""
    import gzip
    import lzma

    text = SAMPLE.read_bytes()
    (tmp_path / "main.ir.gz").write_bytes(gzip.compress(text))
    (tmp_path / "main.ir.xz").write_bytes(lzma.compress(text))
    lines = text.decode().splitlines(keepends=True)
    lines[29] = '    (%29) = "pd_op.add" (%1 %2) {} : ()\n'
    (tmp_path / "bad.ir.xz").write_bytes(lzma.compress("".join(lines).encode()))
    (tmp_path / "cut.ir.gz").write_bytes(gzip.compress(text)[:1000])
    corrupt = bytearray(gzip.compress(text))
    corrupt[500] ^= 0xFF
    (tmp_path / "corrupt.ir.gz").write_bytes(bytes(corrupt))
    (tmp_path / "nul.ir.gz").write_bytes(gzip.compress(b"{\n  ab\x00c\n}\n"))
    runs = distc(tmp_path, ["fmt", "main.ir"], ["fmt", "main.ir.gz"], ["fmt", "main.ir.xz"],
                 ["shard", "main.ir", "-q"], ["shard", "main.ir.gz", "-q"], ["shard", "main.ir.xz", "-q", "--rank", "0"],
                 ["diff", "main.ir.gz", "main.ir.xz"], ["opt", "main.ir.xz", "-p", "verify"],
                 ["reshard", "main.ir", "--rank", "1", "-q"], ["reshard", "main.ir.gz", "--rank", "1", "-q"],
                 ["shard", "bad.ir.xz", "-q"], ["shard", "cut.ir.gz"], ["fmt", "corrupt.ir.gz"], ["fmt", "nul.ir.gz"],
                 ["fmt", "main.ir.gz", "-o", "main.ir.gz"])
    assert runs[0][0] == 0 and runs[0][1] == text.decode() and runs[1] == runs[0] and runs[2] == runs[0]
    assert runs[3][0] == 0 and runs[4] == runs[3] and runs[5] == runs[3]
    assert runs[6][0] == 0 and runs[6][1].startswith("same program"), runs[6]
    assert runs[7][0] == 0 and runs[7][1] == text.decode(), runs[7][2]
    assert runs[8][0] == 0 and runs[9][:2] == runs[8][:2] and runs[9][2] == runs[8][2].replace("main.ir:", "main.ir.gz:")
    rc, out, err = runs[10]
    assert rc == 1 and out == "" and err.splitlines()[:3] == [
        "bad.ir.xz:30:29: error: unexpected '%2'; expected ')', ',', '{'", lines[29].rstrip("\n"), " " * 28 + "^"], err
    assert runs[11][:2] == (1, "") and runs[11][2].startswith(
        "cut.ir.gz: error: a gzip file cut short (it ends inside its compressed data)"), runs[11]
    assert runs[12][:2] == (1, "") and runs[12][2].startswith("corrupt.ir.gz: error: a corrupt gzip file ("), runs[12]
    assert runs[13][:2] == (1, "") and runs[13][2].splitlines()[:3] == [
        "nul.ir.gz:2:5: error: a binary file, not PIR text (a NUL byte)", "  ab\ufffdc", "    ^"], runs[13]
    usage(runs[14], "-o 'main.ir.gz' is the input 'main.ir.gz': distc does not overwrite its inputs", "fmt")
    assert gzip.decompress((tmp_path / "main.ir.gz").read_bytes()) == text
    stdin = subprocess.run([sys.executable, "-m", "distc", "fmt", "-"], input=lzma.compress(text), capture_output=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert stdin.returncode == 0 and stdin.stdout == text, stdin.stderr


def test_compressed_outputs(tmp_path):
    """An output named ``*.gz`` / ``*.xz`` (any case) is written compressed, the same bytes on every
    run (gzip without a time), every rank of --all-ranks too; it reads back as the text output; other
    names stay text.  (It was the text under a .gz name.)"""
    import gzip
    import lzma

    runs = distc(tmp_path, ["shard", "main.ir", "--rank", "0", "-q", "-o", "r0.ir"],
                 ["shard", "main.ir", "--rank", "0", "-q", "-o", "r0.ir.gz"],
                 ["shard", "main.ir", "--rank", "0", "-q", "-o", "again.ir.GZ"],
                 ["shard", "main.ir", "--all-ranks", "-q", "-o", "all.r{rank}.ir.xz"],
                 ["shard", "main.ir", "--all-ranks", "-q", "-o", "all.r{rank}.ir"],
                 ["fmt", "r0.ir.gz"])
    assert all(r[0] == 0 for r in runs), runs
    text = (tmp_path / "r0.ir").read_bytes()
    packed = (tmp_path / "r0.ir.gz").read_bytes()
    assert packed[:2] == b"\x1f\x8b" and gzip.decompress(packed) == text
    assert (tmp_path / "again.ir.GZ").read_bytes() == packed  # no time in the header: same bytes
    for rank in range(4):
        xz = (tmp_path / f"all.r{rank}.ir.xz").read_bytes()
        assert xz[:6] == b"\xfd7zXZ\x00" and lzma.decompress(xz) == (tmp_path / f"all.r{rank}.ir").read_bytes()
    assert runs[5][1].encode() == text


def test_a_value_joined_to_its_short_option_is_that_value(tmp_path):
    """review: ``-o-q.ir`` (the value in the option's word, as ``--output=-q.ir``) was refused as 'the
    option -q.ir' since options are not taken as values; 54341e4 wrote '-q.ir', as click does."""
    runs = distc(tmp_path, ["shard", "main.ir", "-q", "-o-q.ir"], ["shard", "main.ir", "-q", "-o--json"],
                 ["shard", "main.ir", "-q"], ["shard", "main.ir", "-q", "-o", "-q.ir"])
    assert [r[0] for r in runs] == [0, 0, 0, 2], runs
    assert (tmp_path / "-q.ir").read_text() == (tmp_path / "--json").read_text() == runs[2][1]
