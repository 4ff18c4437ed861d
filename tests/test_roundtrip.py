"""print(parse(s)) == s for every real dump we have, through both parser paths and both printers
(the full grammar's: tests/test_parser_paths.py)."""

import re

import pytest

import distc
from distc.analysis.verify import verify_values
from distc.dialects.known_ops import unknown_ops
from distc.ir.attrs import BoolAttr
from distc.ir.core import Operation
from distc.syntax.printer import print_program

from conftest import DATA, first_of_each, ir_files, sampled

FILES = ir_files("corpus", "oracle")
# make test: the shared corpus, the syntax and dump cases whole; of Paddle's rank files
# (oracle/reshard, oracle/stage1: 1,326 files, 12.6 MB) one rank of each case, stage and snapshot;
# every file: make test-slow
ONE_RANK = first_of_each(FILES, lambda p: (p.parent, re.sub(r"\.r\d+\.", ".", p.name)))


def _id(p):
    return str(p.relative_to(DATA))


@pytest.mark.parametrize("path", sampled(FILES, lambda p: p.parent.name not in ("reshard", "stage1")
                                         or "corpus" in p.parts or p in ONE_RANK), ids=_id)
def test_roundtrip_fast(path):
    s = path.read_text()
    prog = distc.parse(s, str(path))
    assert str(prog) == s
    assert not unknown_ops(prog)  # every op name of every real dump is one Paddle knows (no warning)
    verify_values(prog)  # and no real dump is refused by the value checks (shapes, meshes, optimizer operands)
    # the canonical printer (every op printed anew, no source lines) gives the same bytes
    assert print_program(prog, canonical=True) == s
    _held_to_the_full_printer_renumbered(prog)


def _held_to_the_full_printer_renumbered(prog):
    """With a new op before all others every numbered value takes the next number: each op that
    did not change prints as its source line with its values renamed (a substitution on its
    text), which must be the bytes the full printer gives (every op printed anew)."""
    first = next((op for op in prog.walk() if op.results), None)
    if first is None:
        return 0
    new = Operation("pd_op.full", (), [first.results[0].type], {})
    prog.block.prepend(new)
    renamed = str(prog)
    assert renamed == print_program(prog, canonical=True)
    new.erase()
    # parsed ops changed in part print the text of what did not change: the full printer's bytes
    ops = [op for op in prog.walk() if op.src is not None]
    retyped = 0
    types = list({str(r.type): r.type for op in ops for r in op.results}.values())  # (distinct)
    dists = list({str(d): d for op in ops[::7] if (d := op.dist_attr) is not None}.values())[:5]
    for k, op in enumerate(ops):
        if k % 5 == 1:
            op.dirty = True  # (nothing changed: every piece copied)
        elif k % 5 == 2:
            op.set_attr("m_new", BoolAttr(k % 2 == 0))  # an item more, in the printer's key order
            if k % 3 == 2 and dists and op.dist_attr is not None:
                op.dist_attr = dists[k % len(dists)]  # an item replaced (partition's op_dist_attr)
            elif k % 3 == 1 and op.attr("stop_gradient") is not None:
                op.set_attr("stop_gradient", BoolAttr(True))
                op.del_attr("m_new")
        elif k % 5 == 3 and op.attrs:
            op.del_attr(next(iter(op.attrs)))  # one item less
        elif k % 5 == 4 and op.results and len(types) > 1:
            r = op.results[0]
            r.type = next(t for t in types[k % len(types):] + types if str(t) != str(r.type))  # retyped, and its uses
            retyped += 1
    assert str(prog) == print_program(prog, canonical=True)
    return retyped


def test_corpus_is_all_there():
    # 124 reshard cases (108 pairs + 16 errors), 48 stage1 snapshots, 5 legacy, 1 seed
    assert len(list((DATA / "corpus/paddle-3.3.1/reshard").glob("*.before.ir"))) == 108
    assert len(list((DATA / "corpus/paddle-3.3.1/reshard").glob("*.error.txt"))) == 16
    assert len(list((DATA / "corpus/paddle-3.3.1/stage1").glob("*.ir"))) == 48
    assert len(list((DATA / "corpus/legacy").glob("*.ir"))) == 5


def _llm_names():
    import llmdata

    seen, out = set(), []
    for name, (h, _) in sorted(llmdata.manifest().items()):
        if name.endswith(".ir") and h not in seen:  # each distinct stored program once
            seen.add(h)
            out.append(name)
    return out


def _llm_kind(name):
    """clip/llama_dp2mp2.s1.r0.dense.ir -> ((config, snapshot), (case, snapshot))"""
    config, rest = name.split("/")
    case, snapshot = rest.split(".")[0], rest.split(".")[-2]
    return (config, snapshot), (case, snapshot)


LLM = _llm_names()
# make test: the first program of each (config, snapshot) and of each (case, snapshot), 125 of 436
# distinct programs (24 of 103 MB); every one: make test-slow
LLM_KINDS = first_of_each(LLM, lambda n: _llm_kind(n)[0]) | first_of_each(LLM, lambda n: _llm_kind(n)[1])


@pytest.mark.parametrize("name", sampled(LLM, LLM_KINDS.__contains__))
def test_roundtrip_llm(name):
    # the LLaMA programs (the corpus's llm/ files and the generated ranks), stored gzipped
    import llmdata

    s = llmdata.text(name)
    prog = distc.parse(s, name)
    assert str(prog) == s
    assert not unknown_ops(prog)
    assert print_program(prog, canonical=True) == s
