"""Corrupted inputs that reached the reshard lowering as internal errors (exit 70, found by the checks
developer's corruption set, bench/check_answers.py): a dims_mapping that does not fit its value's rank
(an IndexError in nd_mesh's axis walk) and a dist_op.reshard without its operand (an IndexError in
decompose).  Each is now a located error, exit 1, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = (ROOT / "samples" / "mlp_dp2mp2_adamw.ir").read_text()


def _edit(line_no: int, old: str, new: str) -> str:
    lines = SAMPLE.splitlines(keepends=True)
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    return "".join(lines)


CASES = {
    # pd_op.square's operand(0) entry: [0] for its rank-2 operand
    "dims_mapping": (_edit(33, "operand(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[0,-1], "
                           "placements:[Shard(dim=0), Replicate()]}",
                           "operand(0):{mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[0], "
                           "placements:[Shard(dim=0), Replicate()]}"),
                     "33:5: error: dims_mapping [0] does not fit a rank-2 value"),
    # a pd_op.full renamed: a dist_op.reshard without operands
    "arity": (_edit(30, '"pd_op.full"', '"dist_op.reshard"'),
              "30:5: error: 'dist_op.reshard' takes one operand and gives one result (here 0 and 1)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_reshard_layout_is_a_located_error(tmp_path, case):
    text, want = CASES[case]
    src = tmp_path / f"{case}.ir"
    src.write_text(text)
    out = tmp_path / "out.ir"
    r = subprocess.run([sys.executable, "-m", "distc", "shard", str(src), "--rank", "0", "-o", str(out), "-q"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1, r.stderr
    assert f"{src}:{want}" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
