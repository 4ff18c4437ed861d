"""Attribute dict bodies read in bulk (distc/syntax/parser/texts.py): the one-regex split of plain
bodies equals the general splitter, and a dict built from a kept skeleton (the text with its
strings emptied) equals the dict read item by item."""

import random
import re

from distc.ir.attrs import StrAttr
from distc.syntax.parser import FastParser
from distc.syntax.parser.fast import op_match
from distc.syntax.parser.leaves import _split_general
from distc.syntax.parser.texts import split_plain

from conftest import ir_files

FILES = ir_files("corpus", "oracle/syntax", "oracle/llm")[::3]


def _bodies():
    out = set()
    for path in FILES:
        for line in path.read_text(errors="replace").splitlines():
            m = op_match(line)
            if m:
                out.add(m[5])
    return sorted(out)


BODIES = _bodies()


def test_plain_split_equals_general_split():
    assert len(BODIES) > 300
    n = 0
    for body in BODIES:
        for text in (body, body[: max(body.find("op_dist_attr:{") - 1, 0)]):
            got = split_plain(text)
            if got is not None:
                n += 1
                assert got == _split_general(text), text
    rnd = random.Random(1)
    vals = 'ab:,"\\[](){}<>_ 1.x'
    for _ in range(20000):
        items = [rnd.choice(["a", "k_1", "B"]) + ":" + "".join(rnd.choice(vals) for _ in range(rnd.randint(0, 8)))
                 for _ in range(rnd.randint(1, 4))]
        text = ",".join(items)
        got = split_plain(text)
        if got is not None:
            n += 1
            assert got == _split_general(text), text
    assert n > 500


def test_skeleton_dicts_equal_item_by_item_dicts():
    warm = FastParser()
    used = 0
    for body in BODIES:
        before = warm.skeletons.hits
        d = warm.attr_dict(body)
        used += warm.skeletons.hits - before
        cold = FastParser()
        cold.skeletons.get = lambda key: None  # item by item only
        assert d == cold.attr_dict(body), body
        assert list(d) == list(cold.attr_dict(body))
    assert used > 50  # the stored dumps do repeat skeletons


def test_skeleton_takes_each_string_of_its_own_item():
    p = FastParser()
    a = p.attr_dict('name:"x",shape:[2,3],stop_gradient:[true]')
    b = p.attr_dict('name:"y",shape:[2,3],stop_gradient:[true]')
    assert p.skeletons.hits == 1
    assert a["name"] == StrAttr("x") and b["name"] == StrAttr("y") and b["shape"] == a["shape"]
    # a string inside a list is not a whole item's value: never a skeleton
    p.attr_dict('a:["u","v"],name:"x"')
    c = p.attr_dict('a:["w","z"],name:"q"')
    assert p.skeletons.hits == 1
    assert str(c["a"]) == '["w","z"]' and c["name"] == StrAttr("q")


def test_lazy_pattern_compiles_at_first_use():
    """The parser's rare patterns are compiled where first used, then are the compiled pattern's methods."""
    from distc.syntax.regex import LazyPattern

    p = LazyPattern(r"(\d+)-(\d+)", re.A)
    assert "match" not in vars(p)
    assert p.fullmatch("12-3").groups() == ("12", "3") and p.fullmatch("12-") is None
    assert isinstance(vars(p)["match"].__self__, re.Pattern)  # (its methods now: no lookup through it again)
    assert [m.group(2) for m in p.finditer("1-2 3-4")] == ["2", "4"] and p.sub("x", "1-2 a") == "x a"
    assert p.pattern == r"(\d+)-(\d+)" and p.flags & re.A
