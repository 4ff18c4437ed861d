"""Ops whose attribute text the parser leaves unread (issue 23): the dict is built on first use and
equals the one read at once; ``op_dist_attr`` is read alone; an op whose operands or types change
prints its attribute text as read; the print style knows about unsorted texts left unread; the
programs of a file are found in one scan."""

import gc

import pytest

import distc
from distc.ir import attrs as A
from distc.ir.types import DistTensorType
from distc.syntax.parser import collector_off, parse_programs
from distc.syntax.parser.fast import op_match
from distc.syntax.parser.programs import normalize_newlines, program_core, program_spans
from distc.syntax.parser.texts import item_span
from distc.syntax.printer import print_program

from conftest import DATA, ir_files

FILES = ir_files("corpus", "oracle/syntax") + ir_files("oracle/stage1")[::10] + ir_files("oracle/reshard")[::25]
MLP = DATA.parents[1] / "samples" / "mlp_dp2mp2_adamw.ir"


def _line(name, i, extra=""):
    return (f'    (%{i}) = "pd_op.data" () {{dtype:float32,name:"{name}"{extra},place:Place(cpu),shape:[2],'
            f'stop_gradient:[true]}} : () -> tensor<2xf32>\n')


@pytest.mark.parametrize("path", FILES[::4], ids=lambda p: str(p.relative_to(DATA)))
def test_unread_dicts_equal_dicts_read_at_once(path):
    text = path.read_text()
    lazy = distc.parse(text)
    eager = distc.parse(text, fast=False)
    a, b = list(lazy.walk()), list(eager.walk())
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x._attrs is None:  # left unread: op_dist_attr alone first, then the whole dict
            assert x.dist_attr == y.dist_attr
            assert x._attrs is None
            for key in ("op_role", "name", "nope", "process_ids", "shape"):
                assert x.attr(key) == y.attr(key)
        assert dict(x.attrs) == dict(y.attrs)
        assert list(x.attrs) == list(y.attrs)
    assert print_program(lazy) == text
    assert print_program(lazy, canonical=True) == print_program(eager, canonical=True)


def test_ops_are_left_unread_and_read_on_demand():
    text = "{\n" + "".join(_line(f"x{i}", i) for i in range(4)) + "}\n"
    prog = distc.parse(text)
    ops = prog.ops
    assert ops[0]._attrs is not None  # the first of its skeleton is read
    assert all(op._attrs is None for op in ops[1:])  # the others differ only in a string
    assert ops[2].attr("op_dist_attr") is None and ops[2].dist_attr is None
    assert ops[2].attr("missing", 7) == 7 and ops[2]._attrs is None
    assert ops[2].attr("name") == A.StrAttr("x2") and ops[2]._attrs is not None
    ops[3].set_attr("name", A.StrAttr("renamed"))
    assert ops[3].attr("shape") == ops[0].attr("shape")
    out = str(prog)
    assert 'name:"renamed"' in out and out.replace('"renamed"', '"x3"') == text


def test_attributes_set_on_an_unread_op_are_edits_of_its_line():
    """set_attr/del_attr on a parsed op keep the rest of its attribute text unread; the printer
    replaces those items in its text (sorted or not), and the dict read later has them."""
    for order in ("sorted", "unsorted"):
        extra = ",zz:1,aa:2" if order == "unsorted" else ""  # (keys out of order: new ones go last)
        text = "{\n" + "".join(_line(f"x{i}", i, extra) for i in range(5)) + "}\n"
        prog = distc.parse(text)
        ops = prog.ops
        assert all(op._attrs is None for op in ops[1:])
        ops[1].set_attr("name", A.StrAttr("y,1"))  # replaced in place
        ops[2].set_attr("mid", A.BoolAttr(True))  # a new key: in the printer's order
        ops[3].del_attr("shape")
        ops[3].set_attr("dtype", A.StrAttr("f16"))
        ops[4].del_attr("place")
        ops[4].set_attr("place", A.IntAttr(3))  # (deleted then set again: it moves to the end)
        assert [op._attrs is None for op in ops[1:]] == [True, True, False, False]  # (del_attr asks has_attr)
        assert ops[1].attr("name") == A.StrAttr("y,1") and not ops[3].has_attr("shape")
        assert ops[2].attr("mid") == A.BoolAttr(True) and ops[2].attr("shape") == ops[0].attr("shape")
        out = str(prog)
        assert out == print_program(prog, canonical=True)
        assert 'name:"y,1"' in out and "mid:true" in out and ',shape:' not in out.splitlines()[4]
        assert list(ops[3].attrs) == [k for k in ops[0].attrs if k != "shape"]  # (read now: with the edits)
        assert ops[3].attr("dtype") == A.StrAttr("f16")
        assert str(prog) == print_program(prog, canonical=True)
        clone = prog.clone()
        clone.ops[2].set_attr("mid", A.BoolAttr(False))
        assert ops[2].attr("mid") == A.BoolAttr(True) and str(clone) != str(prog)


def test_retyped_op_prints_its_attribute_text_as_read():
    """Partition retypes values and renames operands but leaves most ops' attributes alone: the
    op is printed anew from its attribute text, with the new types."""
    text = MLP.read_text()
    prog = distc.parse(text)
    op = next(o for o in prog.ops if o.name == "pd_op.matmul")
    v = op.results[0]
    t = v.type
    assert isinstance(t, DistTensorType)
    at = op_match(op.src)[5]
    v.type = t.with_shape(tuple(d * 2 for d in t.shape))  # changes the type's text
    out = print_program(prog)
    line = next(ln for ln in out.splitlines() if f"(%{v.name}) = " in ln)
    assert "{" + at + "} : (" in line
    assert str(v.type) in line
    assert out.count("\n") == text.count("\n")


def test_unsorted_texts_left_unread_make_the_style_unsorted():
    text = "{\n" + "".join(_line(f"x{i}", i, extra=",aaa:1") for i in range(3)) + "}\n"
    prog = distc.parse(text)
    assert prog.ops[2]._attrs is None
    assert prog.style.sorted_attrs is False
    assert prog.style == distc.parse(text, fast=False).style
    sorted_text = "{\n" + "".join(_line(f"x{i}", i) for i in range(3)) + "}\n"
    assert distc.parse(sorted_text).style.sorted_attrs is True


def test_item_span_is_the_whole_item():
    body = ('name:"a,op_dist_attr:{x}",op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},'
            'result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1]},chunk_id:-1},op_role:0')
    i, j = item_span(body, "op_dist_attr")
    assert body[i:j] == ('op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):{mesh_shape:[2],'
                         'process_ids:[0,1],dims_mappings:[-1]},chunk_id:-1}')
    assert item_span('name:"op_dist_attr:{}"', "op_dist_attr") == (-1, -1)
    assert item_span("op_dist_attr:{mesh:{shape:[1]}", "op_dist_attr")[1] == -1  # (unbalanced: never left unread)
    deep = "op_dist_attr:" + "{a:" * 7 + "1" + "}" * 7 + ",b:1"  # (deeper than its regular expression)
    assert item_span(deep, "op_dist_attr") == (0, len(deep) - 4)
    assert [body[slice(*item_span(body, k))] for k in ("name", "op_role")] == ['name:"a,op_dist_attr:{x}"', "op_role:0"]
    assert item_span(body, "role") == (-1, -1) and item_span("a:[1,{b:2}],c:1", "a") == (0, -1)
    # the text the value had (the printer's op_dist_attr read from that line): its end without the
    # brace matching, where the text goes on with it; anything else: found as without it
    was = body[i + 13:j]
    assert item_span(body, "op_dist_attr", was) == (i, j) == item_span(body, "op_dist_attr", "{mesh:{x}}")
    assert item_span(deep, "op_dist_attr", deep[13:-4]) == (0, len(deep) - 4)


def test_program_spans_give_each_core_on_the_way():
    texts = [p.read_text() for p in ir_files("corpus")]
    texts.append("log line\n" + texts[0] + "more log\n" + texts[0] + "tail\n")
    texts += ["no program here\n", "{\n    (%0) = \"pd_op.x\" () {} : () -> tensor<f32>\n"]
    for text in texts:
        text = normalize_newlines(text)[0]
        cores: list = []
        spans = program_spans(text, cores)
        assert cores == [program_core(text, s, e) for s, e in spans]
    assert len(parse_programs(texts[len(texts) - 3])) == 2


def test_collector_off_leaves_the_new_objects_old_and_collectable():
    was = gc.isenabled()
    gc.enable()
    try:
        with collector_off():
            assert not gc.isenabled()
            junk = [[i] for i in range(1000)]
            cyc = []
            cyc.append(cyc)
        assert gc.isenabled() and gc.get_freeze_count() == 0
        assert gc.get_count()[0] < 100  # no scan of the thousand lists is pending
        del cyc, junk
        assert gc.collect() >= 1  # the cycle made meanwhile is still found by a full collection
    finally:
        if not was:
            gc.disable()


def test_an_edit_of_a_key_only_a_value_holds_is_a_new_item():
    """review: ``dims_mappings`` set on an unread op replaced the one inside its op_dist_attr (``item_span``
    found ``,dims_mappings:`` in a nested dict): the line printed the layout changed and no such item."""
    body = ('name:"x{[(",op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):{mesh_shape:[2],'
            'process_ids:[0,1],dims_mappings:[-1], placements:[Replicate()]},chunk_id:-1},op_role:0')
    for key in ("dims_mappings", "process_ids", "mesh_shape", "chunk_id", "placements"):
        assert item_span(body, key) == (-1, -1)
    more = body + ",chunk_id:3"
    assert more[slice(*item_span(more, "chunk_id"))] == "chunk_id:3"
    assert item_span('a:"{",b:1', "b") == (6, 9)
    want = next(o for o in distc.parse(MLP.read_text()).walk() if o.name == "pd_op.data" and o._attrs is None).attrs
    prog = distc.parse(MLP.read_text())
    op = next(o for o in prog.walk() if o.name == "pd_op.data" and o._attrs is None)
    op.set_attr("dims_mappings", A.IntAttr(5))
    printed = distc.parse(print_program(prog))
    again = next(o for o in printed.walk() if o.attr("dims_mappings") is not None)
    assert again.attrs == {**want, "dims_mappings": A.IntAttr(5)}
