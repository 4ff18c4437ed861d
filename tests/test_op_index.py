"""analysis.op_index: the index of ops by name knows when the program changed since it was built
(found by review: it compared only the block's end ops and its length, so a library caller who
moved or swapped an op in the middle of MAIN after ``check_main()`` would have had shard-optimizer
use a stale list)."""

from pathlib import Path

from distc.analysis.op_index import OpIndex
from distc.syntax.parser import parse_program

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "mlp_dp2mp2_adamw.ir"


def _prog():
    return parse_program(SAMPLE.read_text(), str(SAMPLE))


def test_fresh_until_the_program_changes():
    prog = _prog()
    idx = OpIndex(prog)
    assert idx.fresh(prog)
    assert idx.fresh(prog)  # asking does not change the answer
    ops = prog.block.ops
    assert idx.named(ops[3].name) and idx.updates()


def test_a_middle_op_moved_is_not_fresh():
    prog = _prog()
    idx = OpIndex(prog)
    block = prog.block
    ops = block.ops
    first, last, count = block.first, block.last, len(block)
    a, b = ops[len(ops) // 2], ops[len(ops) // 2 + 1]
    block.remove(a)
    block.insert_after(b, a)  # the two swapped: same ends, same count
    assert (block.first, block.last, len(block)) == (first, last, count)
    assert not idx.fresh(prog)


def test_a_middle_op_replaced_is_not_fresh():
    prog = _prog()
    idx = OpIndex(prog)
    block = prog.block
    ops = block.ops
    victim = ops[len(ops) // 2]
    other = ops[len(ops) // 3]
    block.remove(other)
    block.insert_before(victim, other)
    assert not idx.fresh(prog)


def test_another_program_is_not_fresh():
    prog, again = _prog(), _prog()
    assert not OpIndex(prog).fresh(again)
