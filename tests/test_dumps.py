"""Dumps of forms found nowhere else in the test data, all printed by Paddle 3.3.1
(tests/data/oracle/dumps, made by gen_dumps.py): nested control flow, pylayers, every dtype, hostile
strings, empty programs, to_static and inference programs, 3-D meshes, Partial(MAX/AVG), several
meshes, ``print(program)`` output and logs mixing programs with other lines.  Each reads and prints
back byte for byte through both parser paths and both printers, and through ``distc fmt``/``opt``."""

import gzip

import pytest
from click.testing import CliRunner

from distc.cli import main
from distc.syntax.parser import parse_programs
from distc.syntax.printer import print_program

from conftest import DATA

DUMPS = DATA / "oracle/dumps"
FILES = sorted(p for p in DUMPS.iterdir() if p.name.endswith((".ir", ".log", ".ir.gz")))


def _text(path):
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.name.endswith(".gz") else raw).decode("utf-8")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_dump_roundtrips(path):
    text = _text(path)
    for fast in (True, False):
        progs = parse_programs(text, str(path), fast=fast)
        assert "".join(map(str, progs)) == text
        assert "".join(print_program(p, canonical=True) for p in progs) == text


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix != ".gz"], ids=lambda p: p.name)
def test_dump_through_the_cli(path, tmp_path):
    text = path.read_text()
    r = CliRunner().invoke(main, ["fmt", str(path)])
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == text.encode()
    progs = parse_programs(text, str(path))
    for k, prog in enumerate(progs, 1):
        extra = ["--program", str(k)] if len(progs) > 1 else []
        r = CliRunner().invoke(main, ["opt", str(path), "-p", "verify", *extra])
        assert r.exit_code == 0, r.output
        assert r.stdout == str(prog)


def test_the_dumps_are_there():
    names = {p.name for p in FILES}
    assert len(FILES) >= 38
    for n in ("log_mixed.log", "ir_printing_passes.log", "print_program.log", "dtypes.ir",
              "while_nested.ir", "dist_mesh3d.r0.after_reshard.ir.gz", "strings_hostile.ir"):
        assert n in names


def test_bytes_that_are_not_utf8_are_a_located_error(tmp_path):
    f = tmp_path / "bad.ir"
    f.write_bytes(b'{\n    (%0) = "pd_op.data" () {name:"x\xff"} : () -> tensor<2xf32>\n}\n')
    for args, name, kw in (([str(f)], str(f), {}), (["-"], "<stdin>", {"input": f.read_bytes()})):
        r = CliRunner().invoke(main, ["fmt", *args], **kw)
        assert r.exit_code == 1
        lines = r.output.splitlines()
        assert lines[0] == f"{name}:2:36: error: not UTF-8 text (byte 0xff: invalid start byte in UTF-8)"
        assert lines[2] == " " * 35 + "^"
        assert "Traceback" not in r.output


def test_block_argument_attributes_keep_their_order():
    # Paddle prints a block argument's attributes in their own order (not sorted like an op's)
    text = (DUMPS / "engine_pipeline.r0.job1.ir").read_text()
    assert "{place:Place(cpu),persistable:true}" in text
    (prog,) = parse_programs(text)
    assert print_program(prog, canonical=True) == text


def test_minus_zero_stays_minus_zero():
    text = (DUMPS / "attrs_varied.ir").read_text()
    assert "value:-0}" in text
    (prog,) = parse_programs(text)
    assert print_program(prog, canonical=True) == text


def test_reshard_on_a_3d_mesh_dump_equals_paddle():
    """dist_mesh3d.ir: [R,S0,S1] -> [S2,R,P:max] -> [R,R,R] on a 2x2x2 mesh, lowered for rank 0 as
    Paddle did (its concat rule prints a Partial(MAX) input as replicated)."""
    import distc
    from distc.analysis.diff import diff_programs
    from distc.passes.reshard import lower_program

    prog = distc.parse((DUMPS / "dist_mesh3d.ir").read_text(), "dist_mesh3d.ir")
    lower_program(prog, 0, paddle_only=True)
    paddle = gzip.decompress((DUMPS / "dist_mesh3d.r0.after_reshard.ir.gz").read_bytes()).decode()
    assert diff_programs(distc.parse(paddle, "paddle"), distc.parse(str(prog), "distc")).equal
