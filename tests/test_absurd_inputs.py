"""Absurd and impossible inputs: a located error (exit 1) or a usage error (exit 2), never a
silent wrong program (exit 0) or an internal error (exit 70); huge meshes lowered in linear time
and memory, and reported in lines a log can hold."""

from __future__ import annotations

import random
import re
import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.cli import main
from distc.ir.dist import ProcessMesh, ranks_text

ROOT = Path(__file__).resolve().parent.parent
MAIN = (ROOT / "samples/mlp_dp2mp2_adamw.ir").read_text()


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def explorer(shape: str = "6x8", mesh: str = "[2],process_ids:[0,1]") -> str:
    """The program the reshard explorer builds for s0 -> r (a dist_op.reshard), with another
    global shape (``AxB``) or mesh (``[S],process_ids:[...]``)."""
    m = f"mesh_shape:{mesh}"
    dims = shape.replace("x", ",")
    t_s = f"pd_dist.tensor<{shape}xf32, {m},dims_mappings:[0,-1], placements:[Shard(dim=0)]>"
    t_r = f"pd_dist.tensor<{shape}xf32, {m},dims_mappings:[-1,-1], placements:[Replicate()]>"
    od = "op_dist_attr:{mesh:{shape:" + mesh + "}"
    return ("{\n"
            f'    (%0) = "pd_op.data" () {{dtype:float32,name:"x",place:Place(undefined:0),shape:[{dims}],'
            f"stop_gradient:[true]}} : () -> tensor<{shape}xf32>\n"
            f'    (%1) = "dist_op.shard_tensor" (%0) {{{od},result(0):{{{m},dims_mappings:[0,-1], '
            f"placements:[Shard(dim=0)]}},chunk_id:-1}},persistable:[false],stop_gradient:[true]}} : "
            f"(tensor<{shape}xf32>) -> {t_s}\n"
            f'    (%2) = "dist_op.reshard" (%1) {{{od},operand(0):{{{m},dims_mappings:[0,-1], placements:'
            f"[Shard(dim=0)]}},result(0):{{{m},dims_mappings:[-1,-1], placements:[Replicate()]}},chunk_id:-1}},"
            f"stop_gradient:[true]}} : ({t_s}) -> {t_r}\n}}\n")


def test_the_explorer_program_is_the_explorers():
    r = run("reshard", "--from", "s0", "--to", "r", "--shape", "6x8", "-q")
    lowered = run("reshard", "-", "-q", input=explorer())
    assert r.exit_code == 0 and lowered.exit_code == 0 and r.stdout == lowered.stdout


@pytest.mark.parametrize("text,says", [
    (explorer(shape="-6x8"), "dim -6 is negative (-1, an unknown dim, is the only negative dim)"),
    (explorer(shape="9223372036854775808x8"), "dim 9223372036854775808 is beyond int64"),
    (explorer(shape="4294967296x4294967296"), "18446744073709551616 elements, beyond int64"),
    (explorer(mesh="[0],process_ids:[]"), "a mesh of no ranks (mesh_shape:[0],process_ids:[])"),
    (explorer(mesh="[2],process_ids:[1,1]"), "process id 1 appears twice in mesh_shape:[2],process_ids:[1,1]"),
    (MAIN.replace("process_ids:[0,1,2,3]", "process_ids:[0,1,1,3]"), "process id 1 appears twice"),
    (explorer(mesh="[2],process_ids:[0,9223372036854775808]"), "process ids are from 0 to int64's largest"),
])
@pytest.mark.parametrize("cmd", [["reshard", "--rank", "0"], ["opt", "-p", "partition"], ["shard"], ["verify"]])
def test_impossible_shapes_and_meshes_are_located_errors(tmp_path, text, says, cmd):
    f = tmp_path / "p.ir"
    f.write_text(text)
    args = [cmd[0], f, *cmd[1:]] + (["--ranks", tmp_path / "r{rank}.ir"] if cmd[0] == "verify" else [])
    r = run(*args)
    assert r.exit_code == 1, r.output
    assert re.search(rf"{re.escape(str(f))}:\d+:\d+: error: .*{re.escape(says)}", r.stderr), r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("operand,role", [(0, "param: the parameter"), (1, "grad: its gradient"),
                                          (4, "moment2: an optimizer state")])
def test_an_optimizer_update_without_its_operands_is_an_error(tmp_path, operand, role):
    lines = MAIN.split("\n")
    i = next(k for k, x in enumerate(lines) if '"pd_op.adamw_"' in x)
    head, _, rest = lines[i].partition('"pd_op.adamw_" (')
    ops_, _, tail = rest.partition(")")
    names = ops_.split(", ")
    names[operand] = "<<NULL VALUE>>"
    types_at = tail.index(" : (") + 4
    depth, cut, k = 0, [types_at], types_at
    while len(cut) <= operand + 1:  # the operand's type: <<NULL TYPE>>
        c = tail[k]
        depth += (c == "<") - (c == ">")
        if c == "," and depth == 0:
            cut.append(k + 2)
        k += 1
    tail = tail[:cut[operand]] + "<<NULL TYPE>>" + tail[cut[operand + 1] - 2:]
    lines[i] = head + '"pd_op.adamw_" (' + ", ".join(names) + ")" + tail
    f = tmp_path / "p.ir"
    f.write_text("\n".join(lines))
    for cmd in (["shard", f, "-q"], ["opt", f, "-p", "shard-optimizer"], ["verify", f, "--ranks", tmp_path / "r{rank}.ir"]):
        r = run(*cmd)
        assert r.exit_code == 1, r.output
        assert f"{f}:{i + 1}:5: error: 'pd_op.adamw_': operand {operand} ({role}) is <<NULL VALUE>>" in r.stderr


def test_optional_operands_paddle_leaves_null_are_fine():
    # adamw_'s moment2_max (no amsgrad), master weight and skip_update; momentum_'s master weight
    assert '"pd_op.adamw_" (%20, %49, %16, %3, %2, <<NULL VALUE>>, %1, %0, <<NULL VALUE>>, <<NULL VALUE>>' in MAIN
    assert run("shard", ROOT / "samples/mlp_dp2mp2_adamw.ir", "-q", "-o", "/dev/null").exit_code == 0


def test_huge_rank_lists_and_explorer_options():
    r = run("shard", ROOT / "samples/mlp_dp2mp2_adamw.ir", "--ranks", "0-99999999999999999999", "-o", "o{rank}")
    assert r.exit_code == 1 and "ranks 4-99999999999999999999 are in none of the program's meshes" in r.stderr
    for opt in (["--mesh", "99999999999999999999"], ["--shape", "99999999999999999999x8"],
                ["--mesh-ids", "0,99999999999999999999"], ["--mesh", "2048,1024"]):
        r = run("reshard", "--from", "s0", "--to", "r", *opt)
        assert r.exit_code == 2 and "Invalid value" in r.stderr, r.output


def test_reshard_all_ranks_writes_every_rank_of_the_program(tmp_path):
    """A program on ranks 0-3 whose one reshard is on [0,1]: ranks 2 and 3 get their programs too
    (an earlier run's r2/r3 files are replaced, not left stale beside the new ones)."""
    lines = explorer().split("\n")
    four = lines[2].replace("(%1)", "(%9)").replace("[2],process_ids:[0,1]", "[4],process_ids:[0,1,2,3]")
    lines.insert(3, four)
    f = tmp_path / "p.ir"
    f.write_text("\n".join(lines))
    for r in range(4):
        (tmp_path / f"p.r{r}.ir").write_text("stale\n")
    assert run("reshard", f, "--all-ranks", "-q", "-o", tmp_path / "p.r{rank}.ir").exit_code == 0
    for r in range(4):
        text = (tmp_path / f"p.r{r}.ir").read_text()
        assert text.startswith("{") and ("pd_op.all_gather" in text or r >= 2)


# ------------------------------------------------------------------------ huge meshes
def _reference_sub_meshes(mesh: ProcessMesh, dim: int) -> list:
    seen: dict = {}
    for r in mesh.process_ids:
        m = mesh.sub_mesh(dim, r)
        seen.setdefault(m.process_ids, m)
    return list(seen.values())


def test_sub_meshes_and_split_mesh_are_slices_of_the_ids():
    from distc.passes.reshard.util import split_mesh

    rnd = random.Random(3)
    for shape in [(4,), (2, 3), (3, 2, 4), (1, 5), (2, 1, 3), (2, 2, 2, 2)]:
        n = 1
        for s in shape:
            n *= s
        ids = list(range(10, 10 + n))
        rnd.shuffle(ids)
        m = ProcessMesh(shape, tuple(ids))
        for d in range(len(shape)):
            assert m.sub_meshes(d) == _reference_sub_meshes(m, d)
            groups = [[r for r in ids if m.coord(r)[d] == k] for k in range(shape[d])]
            assert [list(p.process_ids) for p in split_mesh(m, d)] == groups


def test_lowering_on_a_mesh_of_20000_ranks_is_linear_in_memory():
    """S0 -> R on a 1-D mesh of 20,000 ranks (was quadratic: ProcessMesh.sub_meshes per rank):
    within 30 MB of Python allocations, and a report whose lines a log can hold."""
    tracemalloc.start()
    try:
        r = run("reshard", "--from", "s0", "--to", "r", "--mesh", "20000", "--shape", "20000x8", "--explain",
                "-o", "/dev/null")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0, r.output
    assert peak < 30e6, f"{peak / 1e6:.1f} MB"  # (13.5 MB: one mesh object for every value on it)
    assert max(map(len, r.stderr.splitlines())) < 300
    assert "all_gather │ [0,1,...,19999] (20000 ranks)" in r.stderr
    assert "s0 on [0,1,...,19999] (20000 ranks) -> r on [0,1,...,19999] (20000 ranks)" in r.stderr


@pytest.mark.parametrize("src,dst,mesh,shape,says", [
    ("s0", "r", "100000", "100000x8", "all_gather │ [0,1,...,99999] (100000 ranks)"),
    ("s0,r", "r,r", "256,256", "1024x1024", "all_gather │ [0,256,...,65280] (256 ranks)"),
    ("p,r", "r,r", "256,256", "1024x1024", "all_reduce │ [0,256,...,65280] (256 ranks)"),
    ("r,r", "s0,s1", "256,256", "1024x1024", "no communication: every rank only computes locally"),
])
def test_a_reshard_on_100000_ranks_or_256x256_takes_seconds(src, dst, mesh, shape, says):
    """The whole command (build, parse, lower, print) on a 1-D mesh of 100,000 ranks and a 2-D
    mesh of 256 x 256 in well under 20 s of CPU (about 0.5 s on this machine; quadratic lowering
    took minutes on 100,000 ranks), in this process's CPU time (not the wall clock: the machine
    is shared)."""
    t0 = time.process_time()
    r = run("reshard", "--from", src, "--to", dst, "--mesh", mesh, "--shape", shape, "-o", "/dev/null")
    cpu = time.process_time() - t0
    assert r.exit_code == 0, r.output
    assert says in r.stderr, r.stderr
    assert cpu < 20, f"{cpu:.1f} s of CPU"


def test_ranks_text_summarises_over_16_ranks():
    assert ranks_text(range(4)) == "[0,1,2,3]"
    assert ranks_text(range(0, 65536, 256)) == "[0,256,...,65280] (256 ranks)"
    assert ranks_text([0, 5, 7] + list(range(100, 120))) == "[0,5,7,...,119] (23 ranks)"


def test_shard_summaries_over_16_ranks_group_equal_ranks(tmp_path):
    """18 ranks (dp 6 x mp 3, uneven ZeRO shards): one row for each set of ranks whose figures
    are equal, named by ranges; over 16 sets, the first 16 and a row counting the rest."""
    from rich.console import Console
    from distc.commands.shard_report import _rank_table

    ids = ",".join(map(str, range(18)))
    f = tmp_path / "m18.ir"
    f.write_text(MAIN.replace("shape:[2,2],process_ids:[0,1,2,3]", f"shape:[6,3],process_ids:[{ids}]"))
    r = run("shard", f, "--all-ranks", "-o", tmp_path / "m.r{rank}.ir")
    assert r.exit_code == 0, r.output
    assert "per rank (18 ranks in 6 groups of equal figures, stage 1, sharding mesh dim 0)" in r.stderr
    assert re.search(r"│ 2,5,8,11 +│ +4 │ +11 │ +3\.2 KiB │", r.stderr), r.stderr
    assert re.search(r"│ 0-1,3-4,6-7,9-10 +│ +8 │", r.stderr)
    assert "bytes sent per rank: min 3.1 KiB (rank 14), median 3.3 KiB, max 3.4 KiB (rank 0)" in r.stderr

    rows = [{"rank": k, "collectives": 3, "bytes_sent": 100 * (k % 40), "memory_before": 10, "memory_after": 5}
            for k in range(4000)]
    con = Console(width=120, record=True)
    con.print(_rank_table(rows, True, 1, 0))
    text = con.export_text()
    assert "per rank (4000 ranks in 40 groups of equal figures" in text
    assert re.search(r"│ 0,40,\.\.\.,3960 +│ +100 │ +3 │ +0 B │", text) and "1,41,...,3961" in text
    assert re.search(r"│ \.\.\. 24 more groups +│ +2400 │", text)
    assert len(text.splitlines()) == 16 + 6 and max(map(len, text.splitlines())) < 120


def test_default_jobs_are_bounded_by_free_memory(monkeypatch):
    """--all-ranks forks a worker per core only while free memory holds them (about 9x the
    program each: a 200 MB program on a machine with 1 GB free gets one worker)."""
    import distc.commands.shard_ranks as sr

    monkeypatch.setattr(sr.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(sr, "available_memory", lambda: 1 << 30)
    assert sr.default_jobs() == 8 and sr.default_jobs(200 << 20) == 1 and sr.default_jobs(1 << 20) == 8
    monkeypatch.setattr(sr, "available_memory", lambda: 8 << 30)
    assert sr.default_jobs(200 << 20) == 4
    seen = []
    import distc.workers as wk  # (run_ranks imports fork_each from there when it runs)

    real = wk.fork_each
    monkeypatch.setattr(wk, "fork_each", lambda items, work, jobs: seen.append(jobs) or real(items, work, 1))
    monkeypatch.setattr(sr, "available_memory", lambda: 40 << 20)  # 40 MB free: one worker
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        r = run("shard", ROOT / "samples/mlp_dp2mp2_adamw.ir", "--all-ranks", "-q", "-o", d + "/m{rank}.ir")
    assert r.exit_code == 0 and seen == [1]
