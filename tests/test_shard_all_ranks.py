"""``distc shard --all-ranks / --ranks / -j``: every rank's outputs from one run, each equal to
what ``--rank R`` alone prints; all outputs or none; a failing rank is named."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from distc.cli import main

from conftest import DATA

CORPUS = DATA / "corpus/paddle-3.3.1/stage1"
ORACLE = DATA / "oracle/stage1"
CASES = {
    "dp2mp2": (CORPUS, "mlp_dp2mp2_adamw", 4),
    "dp2mp4": (ORACLE, "mlp_dp2mp4_adamw", 8),
    "dp2mp2x2": (ORACLE, "mlp_dp2mp2x2_adamw", 8),
}
# ranks 0 and 1 lower a relu whose operand lives on ranks 2 and 3 only: --dense fails on them
FAILS_ON_0_AND_1 = """{
    (%0) = "pd_op.data" () {dtype:float32,name:"x",place:Place(undefined:0),shape:[4,8],stop_gradient:[true]} : () -> tensor<4x8xf32>
    (%1) = "dist_op.shard_tensor" (%0) {op_dist_attr:{mesh:{shape:[2],process_ids:[2,3]},result(0):{mesh_shape:[2],process_ids:[2,3],dims_mappings:[-1,-1], placements:[Replicate()]},chunk_id:-1},persistable:[false],stop_gradient:[true]} : (tensor<4x8xf32>) -> pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[2,3],dims_mappings:[-1,-1], placements:[Replicate()]>
    (%2) = "pd_op.relu" (%1) {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},operand(0):{mesh_shape:[2],process_ids:[2,3],dims_mappings:[-1,-1], placements:[Replicate()]},result(0):{mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]},chunk_id:-1},stop_gradient:[true]} : (pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[2,3],dims_mappings:[-1,-1], placements:[Replicate()]>) -> pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], placements:[Replicate()]>
}
"""


def run(*args, code: int = 0):
    r = CliRunner().invoke(main, ["shard", *map(str, args)])
    assert r.exit_code == code, r.stderr + (repr(r.exception) if r.exception else "")
    return r


def inputs(case: str):
    d, name, n = CASES[case]
    return d / f"{name}.s0.r0.before_partition.ir", d / f"{name}.s0.r0.startup_after_remove.ir", n


def llama(tmp_path, case: str):
    import llmdata as L

    return (L.write(tmp_path, "amp", case, "s0", 0, "before_partition"),
            L.write(tmp_path, "amp", case, "s0", 0, "startup_after_remove"), len(L.RANKS[case]))


PARAMS = [pytest.param(case, opts, id=f"{case}-{name}") for case in CASES
          for name, opts in (("stage1-dense", ("--dense",)), ("stage0", ("--stage", "0")))]
PARAMS += [
    # ZeRO-3 on an uneven program (15 and 30 over dp4)
    pytest.param("mlp15_dp4", ("--stage", "3", "--dense"), id="mlp15_dp4-stage3-uneven-dense"),
    # Paddle's AMP path on LLaMA, dp2 x mp4
    pytest.param("llama_dp2mp4", ("--amp", "--axis", "dp", "--mesh-dims", "dp,mp", "--dense"), id="llama_dp2mp4-amp"),
]


@pytest.mark.parametrize("case,opts", PARAMS)
def test_all_ranks_equal_single_rank_outputs(tmp_path, case, opts):
    if case.startswith("llama"):
        (tmp_path / "in").mkdir()
        main_in, startup_in, n = llama(tmp_path / "in", case)
    elif case == "mlp15_dp4":
        main_in = ORACLE / "mlp15_dp4_adamw.s0.r0.before_partition.ir"
        startup_in, n = ORACLE / "mlp15_dp4_adamw.s0.r0.startup_after_remove.ir", 4
    else:
        main_in, startup_in, n = inputs(case)
    out = tmp_path / "out"
    out.mkdir()
    r = run(main_in, *opts, "--all-ranks", "-j", "3", "-o", out / "main.r{rank}.ir",
            "--startup", startup_in, "--startup-out", out / "startup.r{rank}.ir")
    assert sorted(os.listdir(out)) == sorted([f"main.r{k}.ir" for k in range(n)]
                                             + [f"startup.r{k}.ir" for k in range(n)])
    assert "bytes sent per rank:" in r.stderr and f"({n} ranks" in r.stderr
    for k in range(n):
        one, one_s = tmp_path / f"one.{k}.ir", tmp_path / f"one_s.{k}.ir"
        run(main_in, *opts, "--rank", k, "-q", "-o", one, "--startup", startup_in, "--startup-out", one_s)
        assert (out / f"main.r{k}.ir").read_text() == one.read_text(), f"rank {k}"
        assert (out / f"startup.r{k}.ir").read_text() == one_s.read_text(), f"rank {k}"


def test_ranks_subset_and_one_job(tmp_path):
    main_in, _, _ = inputs("dp2mp4")
    run(main_in, "--ranks", "1,3-4", "-j", "1", "-q", "-o", tmp_path / "m{rank}.ir")
    assert sorted(os.listdir(tmp_path)) == ["m1.ir", "m3.ir", "m4.ir"]
    for k in (1, 3, 4):
        run(main_in, "--rank", k, "-q", "-o", tmp_path / "one.ir")
        assert (tmp_path / f"m{k}.ir").read_text() == (tmp_path / "one.ir").read_text()
    # a single rank through --ranks is the same too (no worker process needed)
    run(main_in, "--ranks", "6", "-q", "-o", tmp_path / "x{rank}.ir")
    run(main_in, "--rank", 6, "-q", "-o", tmp_path / "one.ir")
    assert (tmp_path / "x6.ir").read_text() == (tmp_path / "one.ir").read_text()


def test_annotate_only_for_all_ranks_prints_memory_spread(tmp_path):
    main_in, _, n = inputs("dp2mp2")
    r = run(main_in, "--all-ranks", "--annotate-only", "-o", tmp_path / "a{rank}.ir")
    assert len(os.listdir(tmp_path)) == n
    assert "bytes sent" not in r.stderr and "memory per rank" in r.stderr


def test_a_failing_rank_is_named_and_nothing_is_written(tmp_path):
    # (no optimizer op: --stage 0, where that is a warning, not an error)
    src = tmp_path / "in.ir"
    src.write_text(FAILS_ON_0_AND_1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "m2.ir").write_text("old\n")
    r = run(src, "--all-ranks", "--stage", "0", "--dense", "-o", out / "m{rank}.ir", code=1)
    assert "rank 0 failed (and rank 1); no output written" in r.stderr
    assert "is not on rank 0 but its result is used by pd_op.relu" in r.stderr
    assert "in.ir:3:5: error:" in r.stderr
    assert sorted(os.listdir(out)) == ["m2.ir"] and (out / "m2.ir").read_text() == "old\n"  # no temp files
    # the ranks that work, alone
    run(src, "--ranks", "2-3", "--stage", "0", "--dense", "-q", "-o", out / "m{rank}.ir")
    assert sorted(os.listdir(out)) == ["m2.ir", "m3.ir"]
    r = run(src, "--ranks", "1", "--stage", "0", "--dense", "-o", out / "m{rank}.ir", code=1)
    assert "rank 1 failed; no output written" in r.stderr


@pytest.mark.parametrize("args,code,msg", [
    (("--all-ranks", "--rank", "1", "-o", "m{rank}.ir"), 2, "--rank is one rank"),
    (("--all-ranks", "--ranks", "1", "-o", "m{rank}.ir"), 2, "exclude each other"),
    (("--all-ranks",), 2, "pattern with {rank}"),
    (("--all-ranks", "-o", "m.ir"), 2, "pattern with {rank}"),
    (("--ranks", "1-x", "-o", "m{rank}.ir"), 2, "expected ranks like 0-3,6"),
    (("--ranks", "3,9-10", "-o", "m{rank}.ir"), 1, "ranks 9, 10 are in none of the program's meshes"),
    (("--all-ranks", "-j", "0", "-o", "m{rank}.ir"), 2, "-j"),
])
def test_usage(tmp_path, monkeypatch, args, code, msg):
    monkeypatch.chdir(tmp_path)
    main_in, _, _ = inputs("dp2mp2")
    r = run(main_in, *args, code=code)
    assert msg in r.stderr
    assert os.listdir(tmp_path) == []


def test_all_ranks_json_carries_what_one_rank_json_carries(tmp_path):
    """--all-ranks --json: each rank with the fields of `--rank R --json` (parameters, gradients,
    by_group), equal to them, in rank order (whatever -j finished first)."""
    import json

    src = CORPUS / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir"

    def last_json(args):
        r = CliRunner().invoke(main, ["shard", str(src), "--json", *map(str, args)])
        assert r.exit_code == 0, r.output
        return json.loads(r.stderr.strip().splitlines()[-1])

    many = last_json(["--all-ranks", "-j", "2", "-o", tmp_path / "m.r{rank}.ir"])
    assert list(many["ranks"]) == ["0", "1", "2", "3"]
    for r in range(4):
        one = last_json(["--rank", r, "-o", tmp_path / f"o{r}.ir"])
        assert many["ranks"][str(r)] == one["ranks"][str(r)]
        assert set(one["ranks"][str(r)]["memory"]["before"]) == {"parameters", "gradients", "optimizer_states", "total"}
        assert one["ranks"][str(r)]["by_group"]


def test_byte_figures_that_differ_are_not_hidden_by_rounding():
    from distc.commands.shard_report import exact_where_rounding_hides, spread

    assert spread({0: 10240, 1: 10250, 2: 10240}) == \
        "min 10.0 KiB (10240 B) (rank 0), median 10.0 KiB (10240 B), max 10.0 KiB (10250 B) (rank 1)"
    assert spread({0: 10240, 1: 20480}) == "min 10.0 KiB (rank 0), median 15.0 KiB, max 20.0 KiB (rank 1)"
    assert spread({0: 5, 1: 5}) == "5 B on every rank"
    b = exact_where_rounding_hides([9600, 9610, 2048])
    assert (b(9600), b(9610), b(2048)) == ("9.4 KiB (9600 B)", "9.4 KiB (9610 B)", "2.0 KiB")


def test_workers_of_a_quiet_run_send_no_collective_records(tmp_path, monkeypatch):
    """``-q`` shows nothing of the workers' results: they come back without their (and their
    derived ranks') collective records; every output is still written, as with a summary."""
    import pickle

    import distc.commands.shard_ranks as sr

    real = sr._sent

    def spy(res, records, texts):  # (in the worker: what it sends, kept in a file)
        out = real(res, records, texts)
        (tmp_path / f"sent.{os.getpid()}.pkl").write_bytes(pickle.dumps(out))
        return out

    monkeypatch.setattr(sr, "_sent", spy)
    main_ir, _, n = inputs("dp2mp2")
    for quiet in (True, False):
        for f in tmp_path.glob("sent.*.pkl"):
            f.unlink()
        run(main_ir, "--all-ranks", "-o", tmp_path / f"{quiet}.r{{rank}}.ir", *(["-q"] if quiet else []))
        got = [pickle.loads(f.read_bytes()) for f in tmp_path.glob("sent.*.pkl")]
        ranks = [x for g in got for x in (g, *(g.derived or {}).values())]
        assert sorted(x.rank for x in ranks) == list(range(n))
        assert all((x.collectives is None) == quiet for x in ranks)
    for r in range(n):
        assert (tmp_path / f"True.r{r}.ir").read_bytes() == (tmp_path / f"False.r{r}.ir").read_bytes()
