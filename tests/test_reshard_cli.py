"""``distc reshard``: lowering files, the one-reshard explorer, summaries, errors."""

from __future__ import annotations

import sys

from click.testing import CliRunner

from distc.cli import main

from conftest import DATA
from test_reshard_parity import canon_ring_ids

CORPUS = DATA / "corpus/paddle-3.3.1/reshard"
ORACLE = DATA / "oracle/reshard"


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def test_file_mode_equals_opt_pipeline():
    f = ORACLE / "m22_S0S1_to_S1S0.r3.before.ir"
    a = run("reshard", f, "--rank", 3, "-q")
    b = run("opt", f, "-p", "reshard{rank=3}")
    assert a.exit_code == 0 and b.exit_code == 0
    assert a.stdout == b.stdout
    assert canon_ring_ids(a.stdout) == canon_ring_ids((ORACLE / "m22_S0S1_to_S1S0.r3.after.ir").read_text())


def test_file_mode_output_file(tmp_path):
    out = tmp_path / "o.ir"
    r = run("reshard", CORPUS / "m2_S1_to_R.r0.before.ir", "-o", out, "--paddle")
    assert r.exit_code == 0 and r.stdout == ""
    assert canon_ring_ids(out.read_text()) == canon_ring_ids((CORPUS / "m2_S1_to_R.r0.after.ir").read_text())


def test_explorer_defaults_are_paddles_m2_case():
    r = run("reshard", "--from", "p", "--to", "s", "--paddle")
    assert r.exit_code == 0, r.output
    assert canon_ring_ids(r.stdout) == canon_ring_ids((CORPUS / "m2_P_to_S0.r0.after.ir").read_text())
    assert "reduce_scatter" in r.stderr and "[0,1]" in r.stderr and "bytes sent" in r.stderr


def test_explorer_2d_and_rank():
    r = run("reshard", "--from", "s0,s1", "--to", "s1,s0", "--mesh", "2,2", "--shape", "8x12", "--rank", 3,
            "--paddle")
    assert r.exit_code == 0, r.output
    assert canon_ring_ids(r.stdout) == canon_ring_ids((ORACLE / "m22_S0S1_to_S1S0.r3.after.ir").read_text())


def test_explorer_cross_mesh_and_offset_ids():
    r = run("reshard", "--from", "s0", "--to", "s1", "--to-mesh-ids", "2,3", "--rank", 2, "--paddle")
    assert r.exit_code == 0, r.output
    assert canon_ring_ids(r.stdout) == canon_ring_ids((ORACLE / "cross_m2_S0_to_S1.r2.after.ir").read_text())
    r = run("reshard", "--from", "p", "--to", "s1", "--mesh-ids", "4,5,6,7", "--shape", "8x12", "--rank", 6,
            "--paddle", "-q")
    assert r.exit_code == 0, r.output
    assert canon_ring_ids(r.stdout) == canon_ring_ids((ORACLE / "m4567_P_to_S1.r6.after.ir").read_text())


def test_all_ranks_to_stdout_and_files(tmp_path):
    r = run("reshard", "--from", "r", "--to", "p", "--all-ranks")
    assert r.exit_code == 0
    assert "// ----- rank 0 -----" in r.stdout and "// ----- rank 1 -----" in r.stdout
    assert "no communication" in r.stderr
    r = run("reshard", "--from", "s0", "--to", "r", "--all-ranks", "-o", tmp_path / "x.ir", "-q")
    assert r.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.r0.ir", "x.r1.ir"]
    r = run("reshard", "--from", "s0", "--to", "r", "--all-ranks", "-o", tmp_path / "y{rank}.txt", "-q")
    assert (tmp_path / "y1.txt").exists()


def test_explain():
    r = run("reshard", "--from", "p:avg", "--to", "r", "--explain")
    assert r.exit_code == 0
    assert "p:avg on [0,1] -> r on [0,1]" in r.stderr
    assert "all_reduce" in r.stderr and "ring ids: 12=[0,1]" in r.stderr


def test_refusal_is_a_located_error():
    r = run("reshard", "--from", "p:avg", "--to", "s", "--paddle")
    assert r.exit_code == 1
    assert r.stderr.startswith("<explorer>:4:5: error: There is no reshard function that matches")
    assert "partial(0,AVG)" in r.stderr and "Shard(dim=0)" in r.stderr
    assert "only support sum op" in r.stderr


def test_usage_errors():
    assert run("reshard").exit_code == 2
    assert run("reshard", "--from", "s0").exit_code == 2
    assert run("reshard", "--from", "s0,r", "--to", "r").exit_code == 2  # two placements, 1-D mesh
    assert run("reshard", "--from", "x", "--to", "r").exit_code == 2
    assert run("reshard", "--from", "r", "--to", "s0", "--shape", "4xq").exit_code == 2
    assert run("reshard", CORPUS / "m2_P_to_R.r0.before.ir", "--mesh", "2").exit_code == 2
    r = run("reshard", "--from", "r", "--to", "s0", "--mesh", "2,2", "--mesh-ids", "0,1,2")
    assert r.exit_code == 2 and "needs 4 process ids" in r.stderr


def test_missing_file():
    r = run("reshard", "/nonexistent.ir")
    assert r.exit_code == 1 and "no such file" in r.stderr


def test_verify_with_the_simulator():
    r = run("reshard", "--from", "s0,s1", "--to", "s1,s0", "--mesh", "2,2", "--shape", "8x12", "--verify", "-q")
    assert r.exit_code == 0, r.output
    assert "OK" in r.stderr


def test_verify_without_the_simulator(monkeypatch):
    monkeypatch.setitem(sys.modules, "distc.analysis.simulate", None)
    r = run("reshard", "--from", "s0", "--to", "r", "--verify", "-q")
    assert r.exit_code == 1 and "needs the simulator" in r.stderr


def test_coshard_target_with_same_dims_mapping_is_lowered_and_proven():
    from click.testing import CliRunner

    from distc.cli import main

    r = CliRunner().invoke(main, ["reshard", "--from", "r,s0", "--to", "s0,s0", "--mesh", "2,2", "--shape", "8x8",
                                  "--coshard", "--all-ranks", "--verify", "-q"])
    assert r.exit_code == 0 and "OK [r, s0]" in r.output


def test_explorer_rejects_malformed_shapes_and_boolean_partials():
    from click.testing import CliRunner

    from distc.cli import main

    for args in (["--shape", "4x8x"], ["--shape", "4,8"], ["--to", "p:any"]):
        base = ["reshard", "--from", "s0", "--to", "r"]
        if args[0] == "--to":
            base = base[:-2] + args
        else:
            base += args
        assert CliRunner().invoke(main, base).exit_code == 2


def test_explorer_option_errors_are_usage_errors():
    # a shard axis beyond the tensor, a bad dtype, a mesh with the wrong number of ids: exit 2, no '<input>:'
    for extra in (["--from", "s0", "--to", "s3"], ["--from", "s0", "--to", "r", "--dtype", "float7"],
                  ["--from", "s0", "--to", "r", "--mesh", "2", "--mesh-ids", "0,1,2"]):
        r = run("reshard", *extra)
        assert r.exit_code == 2, (extra, r.output)
        assert "<input>" not in r.output and "Traceback" not in r.output
    assert "Shard(dim=3) of a 2-D tensor" in run("reshard", "--from", "s0", "--to", "s3").output


# ------------------------------------------------------------------ co-sharding, right by default
def test_coshard_is_right_by_default_and_paddles_text_under_paddle():
    args = ["reshard", "--from", "r,r", "--to", "s0,s0", "--mesh", "2,2", "--shape", "8x8", "--verify", "-q"]
    r = run(*args)
    assert r.exit_code == 0 and "OK [r, r]" in r.stderr, r.output
    # Paddle lowers by the dims mapping: rank 0 keeps 4x8 where 2x8 is due, and --verify says so
    for flag in ("--paddle", "--no-coshard"):
        r = run(*args, flag)
        assert r.exit_code == 1 and "local shape [4, 8], expected [2, 8]" in r.stderr, r.output
    r = run("reshard", "--from", "r,r", "--to", "s0,s0", "--mesh", "2,2", "--shape", "8x12", "--paddle", "-q")
    assert canon_ring_ids(r.stdout) == canon_ring_ids((CORPUS / "m22_RR_to_S0S0.r0.after.ir").read_text())
    assert run(*args, "--paddle", "--coshard").exit_code == 2


def test_coshard_source_stays_coshard():
    """``--from s0,s0`` is a quarter of the rows on each rank, not Paddle's [r, s0] (a half)."""
    r = run("reshard", "--from", "s0,s0", "--to", "r,r", "--mesh", "2,2", "--shape", "8x8", "--all-ranks",
            "--verify", "-q")
    assert r.exit_code == 0 and "OK [s0, s0]" in r.stderr, r.output
    shard = next(line for line in r.stdout.splitlines() if "dist_op.shard_tensor" in line)
    assert "placements:[Shard(dim=0), Shard(dim=0)]" in shard
    r = run("reshard", "--from", "s0,s0", "--to", "r,r", "--mesh", "2,2", "--shape", "8x12", "--paddle", "-q")
    assert canon_ring_ids(r.stdout) == canon_ring_ids((CORPUS / "m22_S0S0_to_RR.r0.after.ir").read_text())
