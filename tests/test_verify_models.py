"""`distc verify` on the models people train (issue 17): Paddle 3.3.1's own per-rank programs of the
stored model sets verify EQUAL (or DIVERGED where Paddle's program is wrong), and for each kernel
family a mutation of one rank's program — the kind of slip a pass or a hand edit makes — is caught
and located in that rank's file."""

from __future__ import annotations

import re

from click.testing import CliRunner

import llmdata
from distc.cli import main


def paddle_set(root, group: str, case: str, stage: str, ranks) -> tuple[str, dict[int, str]]:
    serial = llmdata.text(f"{group}/{case}.{stage}.r0.before_partition.ir", root)
    return serial, {r: llmdata.text(f"{group}/{case}.{stage}.r{r}.after_reshard.ir", root) for r in ranks}


def verify(tmp_path, serial: str, ranks: dict[int, str]):
    (tmp_path / "serial.ir").write_text(serial)
    for r, t in ranks.items():
        (tmp_path / f"main.r{r}.ir").write_text(t)
    return CliRunner().invoke(main, ["verify", str(tmp_path / "serial.ir"), "--ranks", str(tmp_path / "main.r{rank}.ir")])


def mutate(text: str, op: str, old: str, new: str, nth: int = 0) -> tuple[str, int]:
    """Replace ``old`` by ``new`` in the ``nth`` line holding the op ``op``; (text, its line)."""
    lines = text.split("\n")
    hits = [i for i, ln in enumerate(lines) if f'"{op}" (' in ln and old in ln]
    i = hits[nth]
    lines[i] = lines[i].replace(old, new, 1)
    return "\n".join(lines), i + 1


def located(out: str, rank: int) -> tuple[int, str]:
    """(line, op) of the DIVERGED report, which must point into the rank's own file."""
    m = re.search(r"main\.r(\d+)\.ir:(\d+):\d+: DIVERGED on rank (\d+) at '([^']+)'", out)
    assert m, out
    assert int(m.group(1)) == int(m.group(3)) == rank, out
    return int(m.group(2)), m.group(4)


MOE = ("moe", "moe_dp2ep2", "s0", range(4))


def test_paddle_moe_ranks_verify_equal(tmp_path):
    r = verify(tmp_path, *paddle_set(llmdata.FUSION, *MOE))
    assert r.exit_code == 0 and "main: EQUAL" in r.output, r.output


def test_moe_mutation_is_caught_at_the_moe_op(tmp_path):
    """Rank 0's first expert matmul put on the other expert's sub-mesh ([1,3] instead of [0,2]):
    rank 0 no longer computes its expert's output, which moe_global_mesh_tensor needs there."""
    serial, ranks = paddle_set(llmdata.FUSION, *MOE)
    ranks[0], line = mutate(ranks[0], "pd_op.matmul", "{mesh:{shape:[2,1],process_ids:[0,2]}",
                            "{mesh:{shape:[2,1],process_ids:[1,3]}")
    r = verify(tmp_path, serial, ranks)
    assert r.exit_code == 1, r.output
    at, op = located(r.output, 0)
    assert op == "dist_op.moe_global_mesh_tensor" and at > line, r.output
