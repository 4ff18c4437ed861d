"""The fast path builds its ops (runs of ordinary lines among them, slot by slot: names.read_run)
as the grammar does, down to what the printer and the passes read besides the structure: every
slot of an Operation set, its source line, location, indentation, comment lines before it, clean
state, and its results' use lists in the same order (passes walk uses in order)."""

import pytest

import distc
from distc.ir.core import Operation
from distc.syntax.parser import FastParser

from conftest import DATA, ir_files, sampled

def _grammar_only(text: str) -> bool:
    """Programs the fast path hands whole to the grammar (test_parser_paths covers them)."""
    return "pd_op.while" in text or "^kw:" in text


SLOTS = [s for s in Operation.__slots__ if s != "__weakref__"]
SMALL = ir_files("corpus", "oracle/syntax")
BIG = ir_files("oracle/stage1")[::10]
# `make test` reads every 6th small program and one big one; `make test-slow` the rest
FILES = sampled([p for p in SMALL + BIG if not _grammar_only(p.read_text())],
                lambda p: p in SMALL[::6] or p in BIG[:1])


def _ops(prog) -> list:
    ops = list(prog.walk())
    at = {id(op): n for n, op in enumerate(ops)}
    return [(op.name, [s for s in SLOTS if not hasattr(op, s)], op.loc, op.indent, list(op.pre), op.dirty, op.src,
             [[(at.get(id(u)), i) for u, i in r.uses] for r in op.results]) for op in ops]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_fast_path_ops_are_the_grammars(path):
    text = path.read_text()
    try:
        full = distc.parse(text, fast=False)
    except distc.DiagnosticError as e:  # an error input: the fast path refuses it the same way
        with pytest.raises(distc.DiagnosticError) as fe:
            FastParser().parse(text, None)
        assert str(fe.value) == str(e)
        return
    fast = FastParser().parse(text, None)
    a, b = _ops(fast), _ops(full)
    # One known difference: an op whose line holds a raw newline inside a string (a joined line) keeps
    # its source on the fast path (clean), where the grammar marks it changed and prints it again;
    # both print the input back byte for byte.
    joined = [n for n, x in enumerate(a) if x[6] and "\n" in x[6]]
    for n in joined:
        assert b[n][5:7] == (True, None)
        a[n] = a[n][:5] + b[n][5:7] + a[n][7:]
    assert a == b
    if joined:
        assert distc.print_program(fast) == distc.print_program(full) == text


def test_a_run_broken_by_a_comment_line_is_read_as_the_grammar_reads_it():
    t = "pd_op.tensor<2xf32>"
    line = '    (%{0}) = "pd_op.relu" (%{1}) {{stop_gradient:[false]}} : (' + t + ') -> ' + t + '\n'
    text = ('{\n    (%0) = "pd_op.data" () {name:"x",stop_gradient:[false]} : () -> ' + t + '\n'
            + "".join(line.format(k, k - 1) for k in range(1, 6))
            + "    // a comment\n" + line.format(6, 5) + line.format(7, 6) + "}\n")
    fp = FastParser()
    fast, full = fp.parse(text, None), distc.parse(text, fast=False)
    assert fp.tails.hits == 6  # (the relu lines after the first: read by runs, on both sides of the comment)
    assert _ops(fast) == _ops(full)
    assert [len(r.uses) for op in fast.ops for r in op.results] == [1] * 7 + [0]
    assert fast.ops[6].pre == ["    // a comment"]
    assert distc.print_program(fast) == text
