"""`--program K` on shard, reshard and verify: files holding several programs (GLOG logs: a program,
a `// ...` comment line, another program) are addressable; without it, a located error lists them."""

import pathlib

from click.testing import CliRunner

from distc.cli import main

DATA = pathlib.Path(__file__).parent / "data"
RESHARD = DATA / "corpus/paddle-3.3.1/reshard"
SAMPLE = pathlib.Path(__file__).parent.parent / "samples/mlp_dp2mp2_adamw.ir"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


BANNER = "// ----- the next program -----\n"  # a comment before a program prints with it


def two(tmp_path, first: pathlib.Path, second: pathlib.Path) -> pathlib.Path:
    f = tmp_path / "log.ir"
    f.write_text(first.read_text() + BANNER + second.read_text())
    return f


def test_reshard_program_k(tmp_path):
    a, b = RESHARD / "m2_P_to_R.r0.before.ir", RESHARD / "m2_S0_to_R.r0.before.ir"
    log = two(tmp_path, a, b)
    r = run("reshard", log, "--rank", "0", "-q")
    assert r.exit_code == 1 and "holds 2 programs" in r.output and "--program K" in r.output
    for k, single in ((1, a), (2, b)):
        got = run("reshard", log, "--program", k, "--rank", "0", "-q")
        want = run("reshard", single, "--rank", "0", "-q")
        assert got.exit_code == 0 and got.output == (BANNER if k == 2 else "") + want.output
    assert run("reshard", log, "--program", 2, "--all-ranks", "--verify", "-q").exit_code == 0
    r = run("reshard", log, "--program", 3, "--rank", "0")
    assert r.exit_code == 1 and "holds 2 program" in r.output


def test_shard_and_verify_program_k(tmp_path):
    log = two(tmp_path, RESHARD / "m2_P_to_R.r0.before.ir", SAMPLE)
    assert run("shard", log, "--rank", "0", "-q").exit_code == 1
    got = run("shard", log, "--program", 2, "--rank", "1", "-q")
    assert got.exit_code == 0 and got.output == BANNER + run("shard", SAMPLE, "--rank", "1", "-q").output
    out = tmp_path / "r{rank}.ir"
    r = run("shard", log, "--program", 2, "--all-ranks", "-q", "-o", out, "--verify")
    assert r.exit_code == 0, r.output
    assert run("verify", log, "--program", 2, "--ranks", out).exit_code == 0
    assert run("verify", log, "--ranks", out).exit_code == 1
