"""``distc verify`` of fused ZeRO rank files as ``distc shard --tensor-fusion --all-ranks -o``
saved them (the seed program, 64x16: one AdamW update of an mp-sharded embedding on a [2,2] mesh).

Its fused ``reduce_scatter``/``all_gather`` carry the whole [2,2] mesh with ``nranks`` 2 and no
other op names their ring's group: ``shard --verify`` proves them with each rank's ring table, but
``distc verify`` of the saved files said ``DIVERGED on rank 0 at 'pd_op.data'`` ("cannot tell which
sub-mesh is the group"), 0 values compared, of programs distc had printed and proven.  Now the
group comes from what all the files say (:mod:`distc.analysis.simulate.groups`: the ranks using the
ring, the partial mesh dims of what it reduces), said in a note; a corrupted file still diverges,
at its line; and where the files do not tell the group, the proof is "not provable" (exit 4, JSON
status ``not-provable``), neither DIVERGED nor EQUAL."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from distc.cli import main
from test_fusion_seed import small_seed

NOTE = ("note: ring 12: no file names its group; taken as the sub-mesh along mesh dim 0 of [2, 2] on ranks "
        "[0, 1, 2, 3] ([0, 2], [1, 3]): ")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def saved(tmp_path, *args):
    """The seed (SERIAL) and its fused rank files, as ``distc shard ... --all-ranks -o`` writes them."""
    m = tmp_path / "seed.ir"
    m.write_text(small_seed())
    r = run("shard", m, "--tensor-fusion", *args, "--all-ranks", "-j", "1", "-q", "-o", tmp_path / "r{rank}.ir")
    assert r.exit_code == 0, r.output
    return m


def verify(tmp_path, m, *args):
    return run("verify", m, "--ranks", tmp_path / "r{rank}.ir", *args)


def edit(path, old: str, new: str) -> int:
    """Replace the first ``old`` in the file by ``new``; the line it is on (1-based)."""
    text = path.read_text()
    at = text.index(old)
    path.write_text(text[:at] + new + text[at + len(old):])
    return text.count("\n", 0, at) + 1


@pytest.mark.parametrize("args", [[], ["--stage", "3"], ["--amp"], ["--overlap", "--release-gradients"]])
def test_saved_fused_files_verify_equal(tmp_path, args):
    m = saved(tmp_path, *args)
    r = verify(tmp_path, m)
    assert r.exit_code == 0, r.output
    assert re.match(r"main: EQUAL: 28 values \(\d+ numbers\) compared on ranks \[0, 1, 2, 3\]", r.output), r.output
    assert "DIVERGED" not in r.output
    assert NOTE + "what it reduces is partial on mesh dim(s) [0]" in r.output
    r = verify(tmp_path, m, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["status"], doc["exit"], doc["main"]["status"], doc["main"]["values_compared"]) == ("equal", 0, "equal", 28)
    assert len(doc["main"]["assumed"]) == 1 and "not_provable" not in doc["main"]


def test_corrupted_fused_file_diverges_at_its_line(tmp_path):
    m = saved(tmp_path)
    good = (tmp_path / "r2.ir").read_text()
    # rank 2's AdamW beta1 0.5, not 0.9: the constant's own line
    line = edit(tmp_path / "r2.ir", "value:(Double)0.9}", "value:(Double)0.5}")
    r = verify(tmp_path, m)
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"main: {tmp_path / 'r2.ir'}:{line}:5: DIVERGED on rank 2 at 'pd_op.full'"), r.output
    # rank 2 cuts the other rank's shard of the reduced gradients (its view of the buffer at 0, not
    # 256): its own update is wrong (then every rank's parameter, through the all-gather)
    (tmp_path / "r2.ir").write_text(good)
    edit(tmp_path / "r2.ir", "{begin_idx:(Int64)256,end_idx:(Int64)512,", "{begin_idx:(Int64)0,end_idx:(Int64)256,")
    adamw = 1 + good[:good.index('"pd_op.adamw_"')].count("\n")
    r = verify(tmp_path, m, "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    d = doc["main"]["divergence"]
    assert doc["status"] == "diverged" and (d["rank"], d["op"], d["line"]) == (2, "pd_op.adamw_", adamw), d
    assert d["file"] == str(tmp_path / "r2.ir") and "slice@embedding_0.w_0.dist_moment" in d["value"]


def test_a_group_no_file_tells_is_not_provable(tmp_path):
    """The gradients not partial in any file (nothing says which dim the ring sums over) and ring
    12 on every rank: [0,2] or [0,1]?  Not provable, exit 4, where and why; never DIVERGED or EQUAL."""
    m = saved(tmp_path)
    for k in range(4):
        p = tmp_path / f"r{k}.ir"
        p.write_text(p.read_text().replace(", partial(0,SUM)", ""))
    rs = 1 + (tmp_path / "r0.ir").read_text().split('"pd_op.reduce_scatter"')[0].count("\n")
    r = verify(tmp_path, m)
    assert r.exit_code == 4, r.output
    assert r.output.startswith(
        f"main: not provable: {tmp_path / 'r0.ir'}:{rs}:5: rank 0, 'pd_op.reduce_scatter': ring_id 12, nranks 2 on "
        "mesh [2, 2]: the group could be [0, 2] (mesh dim 0), [0, 1] (mesh dim 1) (no 1-D collective names the ring, "
        "no ring table was given, every rank uses it"), r.output
    assert "DIVERGED" not in r.output and "EQUAL" not in r.output and "Traceback" not in r.output
    r = verify(tmp_path, m, "--json")
    assert r.exit_code == 4
    doc = json.loads(r.stdout)
    assert (doc["status"], doc["exit"], doc["main"]["status"], doc["main"]["divergence"]) == \
        ("not-provable", 4, "not-provable", None)
    u = doc["main"]["not_provable"]
    assert (u["rank"], u["op"], u["line"], u["file"]) == (0, "pd_op.reduce_scatter", rs, str(tmp_path / "r0.ir"))


def _renumber(tmp_path, ring_of: dict[int, int]) -> None:
    """Each rank's ring 12 numbered ``ring_of[rank]`` (Paddle's numbering: one id a group, job-wide)."""
    for k, ring in ring_of.items():
        p = tmp_path / f"r{k}.ir"
        p.write_text(p.read_text().replace("ring_id:(Int32)12,", f"ring_id:(Int32){ring},"))


def test_ring_users_and_partial_dims_agree(tmp_path):
    """Paddle numbers each group once for the job (its fused dp2×mp2 programs: ring 12 on ranks 0
    and 2 only, 13 on 1 and 3): the ranks using a ring are its group, as the partial dims say."""
    m = saved(tmp_path)
    _renumber(tmp_path, {1: 13, 3: 13})
    r = verify(tmp_path, m)
    assert r.exit_code == 0, r.output
    assert ("note: ring 12: no file names its group; taken as the sub-mesh along mesh dim 0 of [2, 2] on ranks "
            "[0, 2] ([0, 2]): the ranks using ring 12 ([0, 2]) are whole sub-meshes along mesh dim(s) [0] only and "
            "what it reduces is partial on mesh dim(s) [0]") in r.output, r.output


def test_ring_users_against_partial_dims_is_not_provable(tmp_path):
    """Ring 12 on ranks 0 and 1 only (the mp sub-mesh), but the gradients it sums are partial on
    the dp dim: the files contradict each other -- not provable (exit 4), both reasons said."""
    m = saved(tmp_path)
    _renumber(tmp_path, {2: 13, 3: 13})
    r = verify(tmp_path, m)
    assert r.exit_code == 4, r.output
    assert "main: not provable: " in r.output and "the group could be [0, 2] (mesh dim 0), [0, 1] (mesh dim 1) (" \
        "the ranks using ring 12 ([0, 1]) are whole sub-meshes along mesh dim(s) [1] only; what it reduces is partial " \
        "on mesh dim(s) [0])" in r.output, r.output
