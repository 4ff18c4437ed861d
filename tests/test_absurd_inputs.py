"""Absurd and impossible inputs: a located error (exit 1) or a usage error (exit 2), never a
silent wrong program (exit 0) or an internal error (exit 70); huge meshes lowered in linear time
and memory, and reported in lines a log can hold."""

from __future__ import annotations

import random
import re
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
    within 60 MB of Python allocations, and a report whose lines a log can hold."""
    tracemalloc.start()
    try:
        r = run("reshard", "--from", "s0", "--to", "r", "--mesh", "20000", "--shape", "20000x8", "--explain",
                "-o", "/dev/null")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0, r.output
    assert peak < 60e6, f"{peak / 1e6:.1f} MB"
    assert max(map(len, r.stderr.splitlines())) < 300
    assert "all_gather │ [0,1,...,19999] (20000 ranks)" in r.stderr
    assert "s0 on [0,1,...,19999] (20000 ranks) -> r on [0,1,...,19999] (20000 ranks)" in r.stderr


def test_ranks_text_summarises_over_16_ranks():
    assert ranks_text(range(4)) == "[0,1,2,3]"
    assert ranks_text(range(0, 65536, 256)) == "[0,256,...,65280] (256 ranks)"
    assert ranks_text([0, 5, 7] + list(range(100, 120))) == "[0,5,7,...,119] (23 ranks)"


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
    real = sr.fork_each
    monkeypatch.setattr(sr, "fork_each", lambda items, work, jobs: seen.append(jobs) or real(items, work, 1))
    monkeypatch.setattr(sr, "available_memory", lambda: 40 << 20)  # 40 MB free: one worker
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        r = run("shard", ROOT / "samples/mlp_dp2mp2_adamw.ir", "--all-ranks", "-q", "-o", d + "/m{rank}.ir")
    assert r.exit_code == 0 and seen == [1]
