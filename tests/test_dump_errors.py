"""Broken and odd dumps: cut, corrupted, deeply nested, thousands of programs in one log.  Each
reads in time linear in its size and fails (if it fails) with a located error, never a traceback."""

import gzip

import pytest
from click.testing import CliRunner

from distc.cli import main
from distc.syntax.diagnostics import DiagnosticError
from distc.syntax.parser import full, parse, parse_programs

from conftest import DATA

BIG = DATA.parent.parent / "bench/data/mlp96.s1.r0.after_reshard.ir.gz"  # 3.2 MB, Paddle's


@pytest.fixture
def no_whole_text_grammar(monkeypatch):
    """The grammar may read on from a line, never the whole text again."""
    def refuse(self, text, filename):
        raise AssertionError("the whole text went through the grammar")
    monkeypatch.setattr(full.FullParser, "parse", refuse)


def test_a_big_dump_cut_mid_line_fails_where_it_is_cut(no_whole_text_grammar):
    text = gzip.decompress(BIG.read_bytes()).decode()
    cut = text[: len(text) // 2]
    line = cut.count("\n") + 1
    with pytest.raises(DiagnosticError) as e:
        parse(cut, "cut.ir")
    assert e.value.line == line and e.value.filename == "cut.ir"
    assert e.value.render().splitlines()[1] == cut[cut.rindex("\n") + 1:][:160] or "..." in e.value.render()


def test_a_big_dump_cut_after_a_line_says_end_of_input(no_whole_text_grammar):
    text = gzip.decompress(BIG.read_bytes()).decode()
    cut = text[: text.index("\n", len(text) // 2) + 1]
    with pytest.raises(DiagnosticError) as e:
        parse(cut, "cut.ir")
    assert e.value.message.startswith("unexpected end of input")
    assert e.value.line == cut.count("\n")  # at the end of the last op read


def test_an_odd_line_in_a_dump_is_read_on_from_there(monkeypatch):
    text = (DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s1.r0.after_reshard.ir").read_text()
    k = text.index("\n", len(text) // 2) + 1
    odd = text[:k] + "    // a comment\n" + text[k:].replace(") = \"", ")  =  \"", 1)
    whole = str(parse(odd, fast=False))  # the grammar alone: the odd line printed anew
    calls = []
    real = full.FullParser.parse
    monkeypatch.setattr(full.FullParser, "parse", lambda self, *a: calls.append(1) or real(self, *a))
    assert str(parse(odd)) == whole and not calls
    assert whole.count("\n") == odd.count("\n") and "    // a comment\n" in whole


def test_results_need_their_percent_sign():
    text = ('{\n    (%0) = "pd_op.full" () {dtype:float32,place:Place(cpu),shape:[1],stop_gradient:[true],value:1}'
            ' : () -> tensor<1xf32>\n    (1) = "pd_op.tanh" (%0) {stop_gradient:[true]} : (tensor<1xf32>) -> tensor<1xf32>\n}\n')
    with pytest.raises(DiagnosticError) as e:
        parse(text, "f.ir")
    assert (e.value.line, e.value.col) == (3, 6)


def _nested(depth):
    lines = ["{", '    (%0) = "pd_op.full" () {dtype:bool,place:Place(cpu),shape:[1],stop_gradient:[true],value:true}'
                  " : () -> tensor<1xb>"]
    for k in range(depth):
        lines.append("    " * (k + 1) + f'(%{k + 1}) = "pd_op.if" (%0) {{stop_gradient:[true]}} -> tensor<1xb> {{')
    for k in reversed(range(depth)):
        lines.append("    " * (k + 2) + '() = "cf.yield" (%0) {} : (tensor<1xb>) -> ')
        lines.append("    " * (k + 1) + "}")
    return "\n".join(lines + ["}"]) + "\n"


def test_deep_nesting_is_a_located_error_not_a_crash(tmp_path):
    ok = _nested(100)
    assert str(parse(ok)) == ok
    f = tmp_path / "deep.ir"
    f.write_text(_nested(2000))
    r = CliRunner().invoke(main, ["fmt", str(f)])
    assert r.exit_code == 1
    assert r.output.startswith(f"{f}:104:") and "regions nested more than 100 deep" in r.output


def test_thousands_of_programs_in_a_log_are_located_in_the_file():
    one = (DATA / "oracle/dumps/print_program.log").read_text()
    text = ("I1201 06:00:00.000000 1 log.cc:1] step {k}\n" + one) * 3000
    progs = parse_programs(text, "log")
    assert len(progs) == 3000 and "".join(map(str, progs)) == text
    assert progs[-1].ops[-1].loc == (text.count("\n") - 2, 5)
    bad = text[: -len(one)] + one.replace("(%0) {", "(%7) {")
    with pytest.raises(DiagnosticError) as e:
        parse_programs(bad, "log")
    assert e.value.line == text.count("\n") - 2 and e.value.message == "use of undefined value %7"


def test_a_banner_may_hold_parentheses():
    # 'IR (after lowering) = {' opens a program like 'IR after lowering = {'; a region op's line does not
    one = (DATA / "oracle/dumps/print_program.log").read_text()
    text = "I1201 06:00:00.1 1 pass.cc:1] IR (after lowering) = " + one + "V1201 (x) = " + one
    progs = parse_programs(text)
    assert [len(p.block.ops) for p in progs] == [2, 2] and "".join(map(str, progs)) == text


@pytest.mark.parametrize("text", ["", "\n", "I1201 06:00:00.1 1 a.cc:1] nothing printed\n"])
def test_a_file_without_a_program_says_so(text):
    with pytest.raises(DiagnosticError) as e:
        parse(text, "log")
    assert e.value.message.startswith("no PIR program here") and (e.value.line, e.value.col) == (1, 1)
