"""Peak memory of parse + print stays under 10x the input (issue 11 point 3): on pathological
strings (a 20 MB string attribute took 3.4 GB before) and on the largest real dump of every
test-data folder.  Measured with tracemalloc (Python allocations; the input text itself is not
counted, the output is)."""

import gc
import tracemalloc

import pytest

import distc
from distc.ir.attrs import escape_string
from distc.syntax.parser import clear_caches

from conftest import DATA

MB = 1 << 20


def peak_of_parse_and_print(text: str, fast: bool = True) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        prog = distc.parse(text, fast=fast)
        out = str(prog)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == text
    return peak


def one_string_program(value: str) -> str:
    return ('{\n    (%0) = "pd_op.data" () {dtype:float32,name:"' + escape_string(value)
            + '",place:Place(undefined:0),shape:[2],stop_gradient:[true]} : () -> tensor<2xf32>\n'
            '    (%1) = "pd_op.relu" (%0) {stop_gradient:[true]} : (tensor<2xf32>) -> tensor<2xf32>\n}\n')


PATHOLOGICAL = {
    "plain": "a" * (4 * MB),
    "backslashes": "a\\" * (2 * MB),  # every other character raw '\'; the name ends in one
    "quotes": 'a"' * (2 * MB),  # every quote printed as \"
    "newlines": "abc\n" * MB,  # a million raw newlines: one op over a million lines
    "mixed": '\\"\n\t,}]' * (MB // 2),
}


@pytest.mark.parametrize("kind", PATHOLOGICAL)
def test_pathological_string_under_10x(kind):
    distc.parse(one_string_program("warm up"))
    text = one_string_program(PATHOLOGICAL[kind])
    assert peak_of_parse_and_print(text) < 10 * len(text)


@pytest.mark.parametrize("kind", ["plain", "backslashes", "quotes"])
def test_pathological_string_under_10x_through_the_grammar(kind):
    """The grammar (the path for forms the fast path does not read) backtracks only over quotes
    that a separator follows, not once per character."""
    distc.parse(one_string_program("warm up"), fast=False)
    text = one_string_program(PATHOLOGICAL[kind][: 2 * MB])
    assert peak_of_parse_and_print(text, fast=False) < 10 * len(text)


def _largest_per_folder():
    folders: dict = {}
    for p in DATA.rglob("*.ir"):
        cur = folders.get(p.parent)
        if cur is None or p.stat().st_size > cur.stat().st_size:
            folders[p.parent] = p
    return sorted(folders.values())


# One-time costs of a process (regexes compiled on first use, grammar tables) are paid by a first
# parse; the fast path's caches are then emptied so the measured parse pays for everything it
# keeps.  Tiny files get a fixed allowance: a program's objects are not smaller than a few KiB.
FLOOR = 64 * 1024


@pytest.mark.parametrize("path", _largest_per_folder(), ids=lambda p: str(p.parent.relative_to(DATA)))
def test_largest_real_dump_of_each_folder_under_10x(path):
    text = path.read_text()
    distc.parse(text)
    clear_caches()
    assert peak_of_parse_and_print(text) < 10 * len(text) + FLOOR
