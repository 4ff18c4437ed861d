"""print(parse(s)) == s for every real dump we have, through both parser paths and both printers."""

import pytest

import distc
from distc.analysis.verify import verify_values
from distc.dialects.known_ops import unknown_ops
from distc.syntax.printer import print_program

from conftest import DATA, ir_files

FILES = ir_files("corpus", "oracle")


def _id(p):
    return str(p.relative_to(DATA))


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_roundtrip_fast(path):
    s = path.read_text()
    prog = distc.parse(s, str(path))
    assert str(prog) == s
    assert not unknown_ops(prog)  # every op name of every real dump is one Paddle knows (no warning)
    verify_values(prog)  # and no real dump is refused by the value checks (shapes, meshes, optimizer operands)
    # the canonical printer (every op printed anew, no source lines) gives the same bytes
    assert print_program(prog, canonical=True) == s


@pytest.mark.parametrize("path", ir_files("corpus", "oracle/syntax"), ids=_id)
def test_roundtrip_full_grammar(path):
    s = path.read_text()
    prog = distc.parse(s, str(path), fast=False)
    assert print_program(prog, canonical=True) == s


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


@pytest.mark.parametrize("name", _llm_names())
def test_roundtrip_llm(name):
    # the LLaMA programs (the corpus's llm/ files and the generated ranks), stored gzipped
    import llmdata

    s = llmdata.text(name)
    prog = distc.parse(s, name)
    assert str(prog) == s
    assert not unknown_ops(prog)
    assert print_program(prog, canonical=True) == s
