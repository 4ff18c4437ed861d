"""`distc diff` on dense programs (Paddle's ``dense`` dumps, no mesh on any type): collectives sized
from the program's own ``nranks`` and rings, never a wrong 0 B; a dense program against a
dist-typed one is compared with the dist-typed one's dense form for its rank, and says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.cli import main

STAGE1 = Path(__file__).parent / "data/corpus/paddle-3.3.1/stage1"
PAIRS = sorted(STAGE1.glob("*.after_reshard.ir"))


def distc(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def test_dense_collectives_are_sized_like_the_dist_typed_program():
    s0, s1 = (STAGE1 / f"mlp_dp2mp2_adamw.s{s}.r0.{{}}.ir" for s in (0, 1))
    code, dist, _ = distc("diff", str(s0).format("after_reshard"), str(s1).format("after_reshard"), "--json")
    code2, dense, _ = distc("diff", str(s0).format("dense"), str(s1).format("dense"), "--json")
    assert code == code2 == 1
    dist, dense = json.loads(dist), json.loads(dense)
    for side in "ab":
        assert dense["summary"][side]["by_kind"] == dist["summary"][side]["by_kind"]
        assert dense["summary"][side]["bytes_sent"] == dist["summary"][side]["bytes_sent"] == 2560
        assert dense["summary"][side]["unsized"] == 0
    code, text, _ = distc("diff", str(s0).format("dense"), str(s1).format("dense"))
    assert "(0 B)" not in text.replace("reduce_scatter                          0 (0 B)", "")
    assert re.search(r"all_reduce +5 \(2\.3 KiB\) +1 \(128 B\)", text), text


def test_a_ring_no_op_sizes_is_unknown_not_zero(tmp_path):
    """An all_reduce without nranks on a ring no all_gather/reduce_scatter sizes: its bytes are
    unknown, said in the row and in bytes sent (and `unsized` in JSON), not counted as 0."""
    text = (STAGE1 / "mlp_dp2mp2_adamw.s0.r0.dense.ir").read_text()
    assert text.count("ring_id:14") > 1
    a = tmp_path / "a.r0.ir"
    a.write_text(text.replace("ring_id:14", "ring_id:99", 1))  # the first all_reduce: a ring of its own
    code, out, err = distc("diff", STAGE1 / "mlp_dp2mp2_adamw.s0.r0.dense.ir", a)
    assert code == 1, err
    row = next(line for line in out.splitlines() if line.strip().startswith("all_reduce"))
    assert "2.3 KiB" in row and "4 of unknown size" not in row and "+ 1 of unknown size" in row, row
    sent = next(line for line in out.splitlines() if line.strip().startswith("bytes sent"))
    assert sent.endswith("+ 1 collective of unknown group size"), sent
    doc = json.loads(distc("diff", STAGE1 / "mlp_dp2mp2_adamw.s0.r0.dense.ir", a, "--json")[1])
    assert doc["summary"]["b"]["unsized"] == 1 and doc["summary"]["b"]["by_kind"]["all_reduce"]["unsized"] == 1
    assert doc["summary"]["a"]["unsized"] == 0
    assert doc["summary"]["b"]["bytes_sent"] < doc["summary"]["a"]["bytes_sent"]  # the known part only


@pytest.mark.parametrize("dist", PAIRS, ids=lambda p: p.name.split(".")[0] + "." + p.name.split(".")[1])
def test_dense_against_its_dist_typed_program_is_the_same_and_says_dense(dist):
    """Paddle's dense program is its dist2dense of after_reshard: equal, both ways, with a note."""
    dense = Path(str(dist).replace(".after_reshard.", ".dense."))
    for a, b in ((dist, dense), (dense, dist)):
        code, out, err = distc("diff", a, b)
        assert code == 0, out + err
        assert out.startswith(f"note: {dense} is a dense program (no dist types), {dist} is dist-typed: "
                              f"compared {dist}'s dense form for rank 0 (file name;"), out
        assert "same program" in out
    doc = json.loads(distc("diff", dense, dist, "--json")[1])
    assert doc["dense"] == {"dense": "a", "converted": "b", "rank": 0, "rank_from": "file name"}


def test_dense_against_another_stage_reports_only_the_real_differences():
    """stage-0 dist-typed program vs stage-1 dense: the same 48 differences as dense vs dense
    (not every op changed), lines in the input files."""
    s0 = STAGE1 / "mlp_dp2mp2_adamw.s0.r0.after_reshard.ir"
    s1d = STAGE1 / "mlp_dp2mp2_adamw.s1.r0.dense.ir"
    code, out, _ = distc("diff", s0, s1d)
    assert code == 1
    assert "48 differences: 31 added, 5 removed, 12 changed ops" in out
    assert "op_dist_attr" not in out
    assert f"changed pd_op.data \"linear_0.w_0.dist_moment2_0\" at {s0}:4, {s1d}:4" in out
    _, dd, _ = distc("diff", STAGE1 / "mlp_dp2mp2_adamw.s0.r0.dense.ir", s1d)
    assert "48 differences: 31 added, 5 removed, 12 changed ops" in dd


def test_the_html_page_says_unknown_too(tmp_path):
    text = (STAGE1 / "mlp_dp2mp2_adamw.s0.r0.dense.ir").read_text()
    a = tmp_path / "a.r0.ir"
    a.write_text(text.replace("ring_id:14", "ring_id:99", 1))
    page = tmp_path / "d.html"
    code, _, err = distc("diff", STAGE1 / "mlp_dp2mp2_adamw.s0.r0.dense.ir", a, "--html", page)
    assert code == 1, err
    html = page.read_text()
    assert "+ 1 of unknown size" in html and "+ 1 collective(s) of unknown group size" in html
