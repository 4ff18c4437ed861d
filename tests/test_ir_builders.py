"""The IR's fast paths for passes (issue 23's pass time): ``core.new_op`` makes what
``Operation(...)`` makes; ``core.ops_with_attr`` finds what asking each op finds, on parsed ops left
unread, read, edited (a key set, deleted, set again) and new; ``InsertPoint.insert`` links as
``Block.append`` / ``insert_before`` do."""

from __future__ import annotations

import pytest

import distc
from distc.ir import attrs as A
from distc.ir.builder import InsertPoint
from distc.ir.core import Operation, new_op, ops_with_attr
from distc.ir.types import DenseTensorType
from distc.syntax.printer import print_program

from conftest import DATA

MLP = DATA.parents[1] / "samples" / "mlp_dp2mp2_adamw.ir"
T = DenseTensorType((2,), "f32", "pd_op.tensor")
SLOTS = [s for s in Operation.__slots__ if s != "__weakref__"]


def _state(op: Operation) -> dict:
    d = {s: getattr(op, s) for s in SLOTS if s not in ("results", "_operands")}
    d["results"] = [(r._type, r.uses, r.name, r.op is op) for r in op.results]
    d["_operands"] = list(op._operands)
    return d


@pytest.mark.parametrize("n_operands,n_results", [(0, 1), (1, 1), (2, 1), (1, 0), (1, 3), (3, 2)])
def test_new_op_is_what_the_constructor_makes(n_operands, n_results):
    src = Operation("pd_op.data", (), (T,), {})
    other = Operation("pd_op.data", (), (T,), {})
    operands = [src, other, None][:n_operands]
    operands = [None if v is None else v.results[0] for v in operands]
    attrs = {"k": A.BoolAttr(True)}
    a = Operation("pd_op.x", operands, (T,) * n_results, attrs, sig="results")
    a.indent = "  "
    b = new_op("pd_op.x", operands, (T,) * n_results, attrs, "results", "  ")
    sa, sb = _state(a), _state(b)
    assert sa == sb and b._attrs is attrs
    for v in {id(v): v for v in operands if v is not None}.values():  # the same uses, in the same order
        assert [i for u, i in v.uses if u is a] == [i for u, i in v.uses if u is b] == \
            [i for i, w in enumerate(operands) if w is v]


def _naive(ops, key):
    return [(i, op.attr(key)) for i, op in enumerate(ops) if op.has_attr(key)]


KEYS = ["stop_gradient", "ring_id", "multi_precision", "op_dist_attr", "op_role", "parameter_name", "nothing"]


def _program(edit: bool):
    prog = distc.parse(MLP.read_text(), str(MLP))
    if edit:  # read some, edit others (set, delete, delete then set), add a new op
        unread = [op for op in prog.all_ops() if op._attrs is None]
        unread[0].attrs
        unread[1].set_attr("ring_id", A.IntAttr(7))
        unread[2].del_attr("stop_gradient")
        unread[3].del_attr("op_role")
        unread[3].set_attr("op_role", A.IntAttr(1))
        unread[4].set_attr("multi_precision", A.BoolAttr(True))
        unread[5].set_attr("nothing", A.BoolAttr(True))
        unread[5].del_attr("nothing")
        prog.block.append(Operation("pd_op.y", [], [T], {"ring_id": A.IntAttr(3)}))
    return prog


@pytest.mark.parametrize("edit", [False, True], ids=["as-parsed", "edited"])
@pytest.mark.parametrize("key", KEYS)
def test_ops_with_attr_finds_what_each_op_says(key, edit):
    ops = _program(edit).all_ops()  # (asked first: the naive scan reads the dicts of the ops it asks)
    if edit:
        assert any(op._attrs is None and op._edits for op in ops) and any(op._attrs is not None for op in ops)
    else:
        assert sum(op._attrs is None for op in ops) > 10  # (the parser leaves most attribute texts unread)
    got = [(ops.index(op), v) for op, v in ops_with_attr(ops, key)]
    assert got == _naive(_program(edit).all_ops(), key)
    if key == "ring_id":
        assert [i for i, _ in got] == ([] if not edit else [got[0][0], len(ops) - 1])
    assert ops_with_attr([], key) == []


def test_insert_point_links_as_the_block_does():
    prog = distc.parse(MLP.read_text(), str(MLP))
    block = prog.block
    first, last = block.first, block.last
    a = InsertPoint.before(last).insert(Operation("pd_op.a", [], [T], {}))
    b = InsertPoint.at_end(block).insert(Operation("pd_op.b", [], [T], {}))
    c = InsertPoint.at_start(block).insert(Operation("pd_op.c", [], [T], {}))
    ops = block.ops
    assert ops[0] is c and ops[1] is first and ops[-3:] == [a, last, b] and len(block) == len(ops)
    assert a.indent == last.indent and b.indent == last.indent and c.indent == first.indent
    assert a.parent is block and a.prev is last.prev.prev and a.next is last
    with pytest.raises(ValueError):
        InsertPoint(block, Operation("pd_op.z", [], [T], {})).insert(Operation("pd_op.d", [], [T], {}))
    with pytest.raises(ValueError):
        InsertPoint.at_end(block).insert(a)  # already in a block
    print_program(prog)


def test_retype_is_the_type_setter_without_the_comparison():
    a = Operation("pd_op.data", (), (T,), {})
    user = Operation("pd_op.relu", [a.results[0]], (T,), {})
    user.dirty = a.dirty = False
    a.results[0].type = T  # (equal: nothing changes)
    assert not user.dirty and not a.dirty
    t2 = DenseTensorType((3,), "f32", "pd_op.tensor")
    a.results[0].retype(t2)
    assert a.results[0].type is t2 and user.dirty and a.dirty
