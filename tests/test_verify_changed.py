"""The shard pipeline's final check (``analysis.verify.verify_changed``) looks in full only at the
ops the passes created or changed: it must still find every error the full verify finds in a
lowered program — a broken inserted op, a clean op moved under its definer, a stale use — and
pass what the full verify passes."""

from __future__ import annotations

from pathlib import Path

import pytest

import distc
from distc.analysis.verify import verify, verify_changed
from distc.ir.core import Operation
from distc.ir.dist import TensorDistAttr
from distc.ir.types import DistTensorType

ROOT = Path(__file__).resolve().parents[1]


def _lowered(rank: int = 0, **kw) -> distc.Program:
    main = distc.parse((ROOT / "samples/mlp_dp2mp2_adamw.ir").read_text(), "mlp.ir")
    return distc.shard(main, rank=rank, copy=False, **kw).program


def _both_raise(prog: distc.Program, match: str) -> None:
    with pytest.raises(distc.DiagnosticError, match=match) as full:
        verify(prog)
    with pytest.raises(distc.DiagnosticError, match=match) as changed:
        verify_changed(prog)
    assert str(changed.value) == str(full.value)


@pytest.mark.parametrize("kw", [{}, {"stage": 3}, {"stage": 0}, {"annotate_only": True}, {"dense": True}])
def test_passes_what_the_full_verify_passes(kw):
    prog = _lowered(**kw)
    verify(prog)
    verify_changed(prog)
    assert any(op.dirty for op in prog.ops) and (kw.get("dense") or any(not op.dirty for op in prog.ops))


def _inserted(prog: distc.Program) -> Operation:
    """A new op (dirty) reading the first all_gather's result, inserted right after it."""
    ag = next(op for op in prog.ops if op.name == "pd_op.all_gather")
    new = Operation("pd_op.relu", [ag.results[0]], [ag.results[0].type], {})
    prog.block.insert_after(ag, new)
    return new


def test_an_inserted_op_reading_a_value_defined_after_it_is_caught():
    prog = _lowered()
    new = _inserted(prog)
    later = prog.ops[-2].results[0] if prog.ops[-2].results else next(
        r for op in reversed(prog.ops) for r in op.results)
    new.set_operand(0, later)
    _both_raise(prog, "used before it is defined")


def test_an_inserted_op_missing_from_its_operand_use_list_is_caught():
    prog = _lowered()
    new = _inserted(prog)
    v = new.operand(0)
    v.uses.remove((new, 0))  # (what no ir.core call does: a broken pass poking at use lists)
    _both_raise(prog, "missing from its value's use list")


def test_an_inserted_op_with_a_negative_dim_is_caught():
    prog = _lowered()
    new = _inserted(prog)
    t = new.results[0].type
    assert isinstance(t, DistTensorType)
    new.results[0].type = DistTensorType((-2,) + t.shape[1:], t.dtype, t.dist)
    _both_raise(prog, "dim -2 is negative")


def test_an_inserted_op_whose_dist_entry_does_not_fit_is_caught():
    prog = _lowered()
    new = _inserted(prog)
    t = new.results[0].type
    bad = TensorDistAttr(t.dist.mesh, t.dist.dims_mapping + (-1,))
    new.set_attr("op_dist_attr", distc.ir.dist.OperationDistAttr(t.dist.mesh, (t.dist,), (bad,)))
    _both_raise(prog, "does not fit rank")


def test_a_clean_op_moved_before_its_definer_is_caught():
    prog = _lowered()
    clean = next(op for op in prog.ops if not op.dirty and op.operands and op.operand(0) is not None
                 and op.operand(0).owner is not None and op.operand(0).owner.parent is prog.block)
    definer = clean.operand(0).owner
    prog.block.remove(clean)
    prog.block.insert_before(definer, clean)
    assert not clean.dirty
    _both_raise(prog, "used before it is defined")


def _stale_use(prog: distc.Program) -> Operation:
    """The first clean op with a used result, given a stale use of it (an entry whose op does not
    read it there)."""
    clean = next(op for op in prog.ops if not op.dirty and op.results and op.results[0].uses)
    r = clean.results[0]
    other = next(op for op in prog.ops if op.num_operands and op.operand(0) is not None and op.operand(0) is not r)
    r.uses.append((other, 0))
    return clean


def test_a_stale_use_on_a_clean_value_is_caught():
    prog = _lowered()
    _stale_use(prog)
    _both_raise(prog, "stale use")


def test_the_pipeline_checks_a_library_input_first():
    """The library's input was never value-checked by a command's load: check_main does it, so
    the final verify may skip clean ops' value checks."""
    text = (ROOT / "samples/mlp_dp2mp2_adamw.ir").read_text()
    main = distc.parse(text.replace("mesh_shape:[2,2],process_ids:[0,1,2,3]",
                                    "mesh_shape:[2,2],process_ids:[0,1,2,2]", 1), "bad.ir")
    with pytest.raises(distc.DiagnosticError, match="appears twice"):
        distc.shard(main, rank=0)


# -- the first error: the full verify's, whatever else is broken -------------------------------------
# (verify checks the structure of every op before any value: verify_changed did the value checks op by
# op with the structure, and a stale use only at the end, so with several errors it named another)

def _negative_dim(op: Operation) -> None:
    t = op.results[0].type
    op.results[0].type = DistTensorType((-2,) + t.shape[1:], t.dtype, t.dist)


def _moved_before_definer(prog: distc.Program, after: Operation | None = None) -> Operation:
    """A clean op (after ``after``) moved right before the definer of its first operand."""
    ops = prog.ops
    start = ops.index(after) + 1 if after is not None else 0
    clean = next(op for op in ops[start:] if not op.dirty and op.operands and op.operand(0) is not None
                 and op.operand(0).owner is not None and op.operand(0).owner.parent is prog.block
                 and ops.index(op.operand(0).owner) >= start)
    definer = clean.operand(0).owner
    prog.block.remove(clean)
    prog.block.insert_before(definer, clean)
    return clean


def _broken(prog: distc.Program, how: str, after: Operation | None = None) -> Operation:
    """Break ``prog`` one way: an inserted op with a negative dim, a stale use of a clean op's
    result, a clean op (after ``after``) moved before its definer; the op concerned."""
    if how == "value":
        new = _inserted(prog)  # early: right after the first all_gather
        _negative_dim(new)
        return new
    return _stale_use(prog) if how == "stale" else _moved_before_definer(prog, after=after)


@pytest.mark.parametrize("first,then,named", [("value", "moved", "used before it is defined"),
                                              ("value", "stale", "stale use"), ("stale", "moved", "stale use")])
def test_with_two_errors_the_full_verifys_first_is_named(first, then, named):
    prog = _lowered()
    a = _broken(prog, first)
    b = _broken(prog, then, after=a)
    assert then != "moved" or prog.ops.index(a) < prog.ops.index(b)
    _both_raise(prog, named)


def test_two_value_errors_name_the_first():
    prog = _lowered()
    first = _inserted(prog)
    ops = prog.ops
    second = Operation("pd_op.relu", [ops[-2].results[0]], [ops[-2].results[0].type], {})
    prog.block.insert_after(ops[-2], second)
    t = second.results[0].type
    second.results[0].type = DistTensorType((4294967296, 4294967296) + t.shape[2:], t.dtype, t.dist)
    _negative_dim(first)
    _both_raise(prog, "dim -2 is negative")


def test_a_clean_op_whose_dist_entry_does_not_fit_is_caught():
    """A clean op's dist entries are checked at the end too (the input's value check has no such check)."""
    prog = _lowered()
    clean = next(op for op in prog.ops if not op.dirty and op.dist_attr is not None and op.dist_attr.results
                 and isinstance(op.dist_attr.results[0], TensorDistAttr) and not op.dist_attr.results[0].is_empty
                 and isinstance(op.results[0].type, DistTensorType))
    d = clean.dist_attr
    r0 = d.results[0]
    bad = TensorDistAttr(r0.mesh, r0.dims_mapping + (-1,))
    clean.set_attr("op_dist_attr", distc.ir.dist.OperationDistAttr(d.mesh, d.operands, (bad,) + d.results[1:]))
    _both_raise(prog, "does not fit rank")


def test_an_operand_set_by_hand_on_a_clean_op_is_caught():
    """An operand slot set without ir.core (no use moved, the op left clean): the new value lacks
    the use, the old one keeps a stale one, the counts still agree — the full verify's error."""
    prog = _lowered()
    ops = prog.ops
    k = next(i for i, op in enumerate(ops) if i > 0 and not op.dirty and op.num_operands
             and op.operand(0) is not None)
    op, old = ops[k], ops[k].operand(0)
    other = next(r for o in reversed(ops[:k]) for r in o.results if r is not old)
    op._operands[0] = other  # (what no ir.core call does: a broken pass poking at operand slots)
    assert not op.dirty
    _both_raise(prog, "stale use")


def _two_operand_clean(prog: distc.Program) -> tuple[int, Operation]:
    """The first clean one-result op with two present operands (the final verify's inline path)."""
    ops = prog.ops
    k = next(i for i, op in enumerate(ops) if not op.dirty and len(op.results) == 1 and op.num_operands == 2
             and op.operand(0) is not None and op.operand(1) is not None)
    return k, ops[k]


def test_a_second_operand_set_by_hand_to_a_later_value_is_caught():
    """Operand 1 of a clean two-operand op set by hand to a value defined after the op, its use
    moved by hand too (the use lists agree): def-before-use of the second operand."""
    prog = _lowered()
    k, op = _two_operand_clean(prog)
    old = op.operand(1)
    later = next(r for o in prog.ops[k + 1:] for r in o.results)
    op._operands[1] = later
    old.uses.remove((op, 1))
    later.uses = list(later.uses) + [(op, 1)]
    assert not op.dirty
    _both_raise(prog, "operand 1 is used before it is defined")


def test_a_second_operand_missing_from_its_use_list_is_caught():
    prog = _lowered()
    _, op = _two_operand_clean(prog)
    v = op.operand(1)
    v.uses.remove((op, 1))  # (and one stale entry elsewhere, so the counts still agree)
    v.uses.append((op, 0)) if op.operand(0) is not v else None
    assert not op.dirty
    with pytest.raises(distc.DiagnosticError) as full:
        verify(prog)
    with pytest.raises(distc.DiagnosticError) as changed:
        verify_changed(prog)
    assert str(changed.value) == str(full.value)
