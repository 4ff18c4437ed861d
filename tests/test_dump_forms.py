"""Every dump form people have, byte for byte through `distc fmt` (issue 10 point 4): files holding
several programs, Paddle's `"`-only string escaping (raw backslashes, newlines, tabs), a zero-result
signature ending in `->` with or without a space, CRLF files.  Inputs are Paddle's own prints
(tests/data/oracle/syntax, made by gen_syntax.py) or built from them the way Paddle prints."""

import pytest
from click.testing import CliRunner

import distc
from distc.cli import main
from distc.ir.attrs import StrAttr, escape_string
from distc.syntax.parser import parse_program, parse_programs
from distc.syntax.printer import print_program

from conftest import DATA

SYN = DATA / "oracle/syntax"
GLOG = SYN / "glog_print_ir.log"  # Executor run with FLAGS_print_ir: two programs after banners
STRINGS = SYN / "strings_raw.ir"
STAGE1 = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s1.r0.before_partition.ir"


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def fmt_bytes(path, *extra):
    r = run("fmt", path, *extra)
    assert r.exit_code == 0, r.output
    return r.stdout_bytes


def roundtrips(text):
    for fast in (True, False):
        progs = parse_programs(text, fast=fast)
        assert "".join(map(str, progs)) == text
        assert "".join(print_program(p, canonical=True) for p in progs) == text
    return progs


# ------------------------------------------------------------------------------ several programs
def print_ir_after_all_log():
    """`distc opt --print-ir-after-all` writes: '// ----- IR after P -----', a program, again."""
    text = STAGE1.read_text()
    return "// ----- IR after verify -----\n" + text + "// ----- IR after verify -----\n" + text


def test_glog_log_roundtrips_through_fmt():
    text = GLOG.read_text()
    progs = roundtrips(text)
    assert len(progs) == 2
    assert progs[1].ops[0].name == "data(phi_kernel)"
    assert fmt_bytes(GLOG) == text.encode()


def test_comment_separated_programs_roundtrip(tmp_path):
    text = print_ir_after_all_log() + "\n// trailing note\n"
    f = tmp_path / "log.ir"
    f.write_text(text)
    assert len(roundtrips(text)) == 2
    assert fmt_bytes(f) == text.encode()
    assert fmt_bytes(f, "--program", 2) == ("// ----- IR after verify -----\n" + STAGE1.read_text()
                                           + "\n// trailing note\n").encode()


def test_several_programs_is_a_located_error_listing_them():
    r = run("opt", GLOG, "-p", "verify")
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0] == f"{GLOG}:9:1: error: this file holds 2 programs; choose one with --program K"
    assert lines[1] == "IR after lowering = {"
    assert "note: program 1: lines 1-7" in lines and "note: program 2: lines 9-15" in lines
    assert "Traceback" not in r.output


def test_program_k_addresses_one_program():
    text = GLOG.read_text()
    r = run("opt", GLOG, "--program", "1", "-p", "verify")
    assert r.exit_code == 0 and r.output == text[: text.index("}\n") + 2]
    p2 = parse_program(text, str(GLOG), 2)
    assert str(p2) == text[text.index("}\n") + 2:]
    assert p2.ops[0].loc == (10, 5)  # line numbers of the file, not of the program
    r = run("opt", GLOG, "--program", "3", "-p", "verify")
    assert r.exit_code == 1 and "--program 3: the file holds 2 program(s)" in r.output


def test_error_in_second_program_is_located_in_the_file():
    text = GLOG.read_text().replace('kernel_name:"relu"', 'kernel_name:"relu",,')
    with pytest.raises(distc.DiagnosticError) as e:
        parse_programs(text, "log")
    assert e.value.line == 13 and e.value.render().startswith("log:13:")


# ------------------------------------------------------------------------------ strings
def test_paddle_strings_are_read_raw():
    text = STRINGS.read_text()
    prog = roundtrips(text)[0]
    names = [op.attrs["name"].value for op in prog.ops if op.name == "pd_op.data"]
    assert names == ["dir\\", 'say "hi\\"', "two\nlines\tand tab", "C:\\tmp\\n"]
    assert fmt_bytes(STRINGS) == text.encode()
    assert all(op.src is not None for op in distc.parse(text).ops)  # the fast path read them all


NAMES = ["x\\", "\\", "\\\\", '"', '\\"', 'x",b:"y', 'a"}', "x\\,k:1", 'q"uo\\"te', "C:\\dir\\", "tab\there",
         "line\nbreak\n", "}\n{", "]", ",", "é\\ü"]


@pytest.mark.parametrize("name", NAMES)
def test_any_name_reads_back(name):
    base = STRINGS.read_text().split("\n")
    line = base[1].replace('name:"dir\\"', f'name:"{escape_string(name)}"')
    text = "\n".join([base[0], line, base[-2], ""])  # '{', the op, '}'
    for fast in (True, False):
        prog = distc.parse(text, fast=fast)
        assert prog.ops[0].attrs["name"] == StrAttr.of(name)
        assert prog.ops[0].attrs["name"].value == name
        assert str(prog) == text and print_program(prog, canonical=True) == text


def test_backslash_before_closing_quote_with_more_strings_after():
    text = ('{\n    (%0) = "pd_op.data" () {a:"x\\",b:"y",c:["p\\","q\\"]} : () -> tensor<2xf32>\n}\n')
    for fast in (True, False):
        attrs = distc.parse(text, fast=fast).ops[0].attrs
        assert attrs["a"].value == "x\\" and attrs["b"].value == "y"
        assert [e.value for e in attrs["c"].elements] == ["p\\", "q\\"]


# ------------------------------------------------------------------------------ '->' and CRLF
def test_zero_result_signature_with_and_without_space():
    text = (SYN / "if_else.ir").read_text()
    assert text.count(") -> \n") == 2  # Paddle's cf.yield lines end in '-> '
    bare = text.replace(") -> \n", ") ->\n")
    for t in (text, bare):
        for fast in (True, False):
            assert str(distc.parse(t, fast=fast)) == t


@pytest.mark.parametrize("path", sorted(SYN.glob("*.ir")) + [GLOG, STAGE1], ids=lambda p: p.name)
def test_crlf_files_keep_crlf(path, tmp_path):
    text = path.read_text().replace("\n", "\r\n")
    f = tmp_path / path.name
    f.write_bytes(text.encode())
    assert fmt_bytes(f) == text.encode()
    for p in parse_programs(text):
        assert p.style.newline == "\r\n"


def test_crlf_everywhere_after_passes_and_in_errors(tmp_path):
    lf = STAGE1.read_text()
    f = tmp_path / "crlf.ir"
    f.write_bytes(lf.replace("\n", "\r\n").encode())
    g = tmp_path / "lf.ir"
    g.write_text(lf)
    pipe = "shard-optimizer{axis=0},partition,reshard{rank=0}"
    a, b = run("opt", f, "-p", pipe), run("opt", g, "-p", pipe)
    assert a.exit_code == b.exit_code == 0
    assert a.stdout_bytes == b.stdout_bytes.replace(b"\n", b"\r\n")
    assert b"\n" not in a.stdout_bytes.replace(b"\r\n", b"")
    bad = lf.replace("pd_op.data", "pd_op.data\" junk", 1).replace("\n", "\r\n")
    f.write_bytes(bad.encode())
    r = run("fmt", f)
    assert r.exit_code == 1 and f"{f}:2:" in r.output and "\r" not in r.output
    r = run("fmt", "-", input=lf.replace("\n", "\r\n").encode())
    assert r.exit_code == 0 and r.stdout_bytes == lf.replace("\n", "\r\n").encode()


# `<#AttrNull>`: Paddle prints it for an op_dist_attr entry of a value without a dist attr (the
# velocity of momentum_ outside shard_optimizer; RoPE's concat of in-program arange values)
NOWRAP = DATA / "oracle/stage1/mlp_dp2mp2_momentum_nowrap.s0.r0.before_partition.ir"


def test_attr_null_entries_read_as_empty_and_print_back():
    text = NOWRAP.read_text()
    assert "result(2):{<#AttrNull>}" in text
    (prog,) = roundtrips(text)
    moms = [op for op in prog.walk() if op.name == "pd_op.momentum_"]
    assert moms
    for op in moms:
        assert op.num_results == len(op.dist_attr.results) == 3
        null = op.dist_attr.results[2]
        assert null.is_empty and null.format() == "<#AttrNull>"
    assert fmt_bytes(NOWRAP, "--check") == b""


def test_attr_null_inside_a_vector_entry():
    # built the way Paddle prints it: one vector element without a dist attr
    text = (SYN / "attr_null_vector.ir").read_text()
    (prog,) = roundtrips(text)
    concat = [op for op in prog.walk() if op.name == "pd_op.concat"][0]
    vec, scalar = concat.dist_attr.operands
    assert [e.format() for e in vec.items] == ["mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1]",
                                               "<#AttrNull>"]
    assert scalar.is_empty and scalar.format() == "<#AttrNull>"


def test_opener_with_a_comment_after_a_first_program(tmp_path):
    """`{ // Kernel Dialect` opens the second program of a file (it was read as the first one's tail
    text): two programs, both parser paths, byte for byte; `--program 2` is the kernel program."""
    text = GLOG.read_text()
    first, second = text[: text.index("}\n") + 2], text[text.index("IR after lowering = {\n") + 22:]
    log = first + "\n{ // Kernel Dialect\n" + second
    progs = roundtrips(log)
    assert len(progs) == 2 and progs[1].ops[0].name == "data(phi_kernel)"
    f = tmp_path / "k.ir"
    f.write_text(log)
    assert fmt_bytes(f) == log.encode()
    assert fmt_bytes(f, "--program", 2).startswith(b"\n{ // Kernel Dialect\n")
    alone = "{ // Kernel Dialect\n" + second
    (prog,) = roundtrips(alone)
    assert prog.ops[0].name == "data(phi_kernel)"
