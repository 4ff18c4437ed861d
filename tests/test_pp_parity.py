"""Pipeline placement: the LLaMA model of tests/data/oracle/llm with its layers on two meshes (the
embedding and layer 0 on stage 0, layer 1, norm and head on stage 1, the activations moved with
``dist.reshard``), ZeRO stages 0 and 1, printed by Paddle 3.3.1 (``tests/data/oracle/pp``, made by
gen_pp.py): pp2 x dp2 (stage meshes ``[0,1]`` and ``[2,3]``, every rank) and pp2 x dp2 x mp2
(``[[0,1],[2,3]]`` and ``[[4,5],[6,7]]``, ranks 0, 3, 4, 7); AMP (``--amp``) stage 1 on pp2 x dp2
ranks 0 and 3: each stage's partial squared norms go to stage 0 partial as they are (Paddle's
re-inferred cross-mesh reshard).  Paddle crashes at stage 3; distc's program is proven.

distc from Paddle's stage-0 ``before_partition`` (and each rank's ``startup_after_remove``) gives
Paddle's ``before_partition`` (stage 1), ``after_reshard``, ``dense`` and ``startup_final`` for
every rank stored (ring ids up to renaming), in process and through ``distc shard``; Paddle's own
per-rank programs verify equal (``distc verify``), and so do distc's (``distc shard --verify``).
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import llmdata as L
from distc.cli import main
from test_llm_parity import run_stage
from test_shard_passes import canon

DIMS = {"llama_pp2dp2": ("dp",), "llama_pp2dp2mp2": ("dp", "mp")}
SNAPS = ("before_partition", "after_reshard", "dense", "startup_final")
_NAME = re.compile(r"(\w+)/(\w+)\.(s\d)\.r(\d+)\.after_reshard\.ir$")


def cases() -> list[tuple[str, str, str, int]]:
    out = []
    for name in L.manifest(L.PP):
        m = _NAME.match(name)
        if m:
            out.append((m.group(1), m.group(2), m.group(3), int(m.group(4))))
    return sorted(out)


def test_pp_data_complete():
    got = cases()
    assert len(got) == 18  # 2 meshes x 2 stages x 4 ranks, and AMP stage 1 on ranks 0 and 3 (--more)
    assert {(c[1], c[2]) for c in got if c[0] == "clip"} == {(m, s) for m in DIMS for s in ("s0", "s1")}
    assert [c for c in got if c[0] == "amp"] == [("amp", "llama_pp2dp2", "s1", 0), ("amp", "llama_pp2dp2", "s1", 3)]
    for config, case, stage, rank in got:
        for snap in ("before_partition", "after_reshard", "dense", "startup_after_remove", "startup_final"):
            assert L.has(config, case, stage, rank, snap, L.PP)
    # Paddle crashes at stage 3 (ShardingStage3's eager parameter reshard, on every rank)
    for r in range(4):
        assert L.text(f"clip/llama_pp2dp2.s3.r{r}.error.txt", L.PP).startswith("CRASH: FatalError: `Segmentation fault`")


def _shard_all(tmp_path, stage: str, startup: str):
    """``distc shard --all-ranks --verify`` on pp2 x dp2 (Paddle's stage-0 input) with STARTUP."""
    src = _write(tmp_path, "llama_pp2dp2", "s0", 0, "before_partition")
    r = CliRunner().invoke(main, ["shard", str(src), "--stage", stage, "--all-ranks", "-q", "--verify",
                                  "-o", str(tmp_path / "m.r{rank}.ir"), "--startup", startup,
                                  "--startup-out", str(tmp_path / "s.r{rank}.ir")])
    assert r.exit_code == 0, r.stderr
    return r


def test_pp_stage3_where_paddle_crashes(tmp_path):
    """Stage 3 on pp2 x dp2: Paddle segfaults; distc's programs (main and per-rank startup) are
    proven on every rank."""
    case = "llama_pp2dp2"
    for r in range(4):
        _write(tmp_path, case, "s0", r, "startup_after_remove")
    r = _shard_all(tmp_path, "3", str(tmp_path / f"{case}.s0.r{{rank}}.startup_after_remove.ir"))
    assert "verify: EQUAL" in r.stderr and r.stderr.count("): EQUAL") == 4
    assert "pd_op.all_gather" in (tmp_path / "m.r2.ir").read_text()

@pytest.mark.parametrize("config,case,stage,rank", [pytest.param(*c, id=f"{c[1]}.{c[2]}.r{c[3]}") for c in cases()])
def test_pp_parity(config, case, stage, rank):
    got = run_stage(config, case, rank, stage, root=L.PP, mesh_dims=DIMS[case])
    for snap in SNAPS:
        if snap == "before_partition" and stage == "s0":
            continue
        assert canon(got[snap]) == canon(L.get(config, case, stage, rank, snap, L.PP)), f"{stage} {snap}"


def _write(tmp_path, case, stage, rank, snap):
    p = tmp_path / f"{case}.{stage}.r{rank}.{snap}.ir"
    p.write_text(L.get("clip", case, stage, rank, snap, L.PP))
    return p


@pytest.mark.parametrize("case,rank", [("llama_pp2dp2", 3), ("llama_pp2dp2mp2", 4)])
def test_pp_cli(tmp_path, case, rank):
    """``distc shard FILE --rank R --stage 1 --dense --startup`` on a stage-1 rank."""
    src = _write(tmp_path, case, "s0", rank, "before_partition")
    st = _write(tmp_path, case, "s0", rank, "startup_after_remove")
    r = CliRunner().invoke(main, ["shard", str(src), "--rank", str(rank), "--stage", "1", "--mesh-dims",
                                 ",".join(DIMS[case]), "-q", "--dense", "-o", str(tmp_path / "d.ir"),
                                 "--startup", str(st), "--startup-out", str(tmp_path / "s.ir")])
    assert r.exit_code == 0, r.stderr
    assert canon((tmp_path / "d.ir").read_text()) == canon(L.get("clip", case, "s1", rank, "dense", L.PP))
    assert canon((tmp_path / "s.ir").read_text()) == canon(L.get("clip", case, "s1", rank, "startup_final", L.PP))


@pytest.mark.parametrize("stage", ["s0", "s1"])
def test_paddle_pp_programs_verify_equal(tmp_path, stage):
    """Paddle's own per-rank programs of pp2 x dp2 against its global-view program."""
    case = "llama_pp2dp2"
    for r in range(4):
        _write(tmp_path, case, stage, r, "after_reshard")
    serial = _write(tmp_path, case, stage, 0, "before_partition")
    for r in range(4):
        _write(tmp_path, case, stage, r, "startup_after_remove")
        _write(tmp_path, case, stage, r, "startup_final")
    pat = str(tmp_path / f"{case}.{stage}.r{{rank}}.")
    r = CliRunner().invoke(main, ["verify", str(serial), "--ranks", pat + "after_reshard.ir",
                                  "--startup", pat + "startup_after_remove.ir", "--startup-ranks", pat + "startup_final.ir"])
    assert r.exit_code == 0, r.stderr
    assert "main: EQUAL" in r.stdout and "ranks [0, 1, 2, 3]" in r.stdout
    # each rank's startup program against its own serial one (a {rank} pattern): 4 proofs
    assert r.stdout.count(": EQUAL") == 5 and "ranks [2]): EQUAL" in r.stdout
    # one stage's startup as the serial startup: the other stage's values are not compared, and said
    r = CliRunner().invoke(main, ["verify", str(serial), "--ranks", pat + "after_reshard.ir",
                                  "--startup", pat.replace("{rank}", "0") + "startup_after_remove.ir",
                                  "--startup-ranks", pat + "startup_final.ir"])
    assert "not in the serial startup program, not compared" in r.stdout and "rank(s) [2, 3]" in r.stdout


def test_pp_startup_per_rank_pattern(tmp_path):
    """Every rank at once: ``--startup 'F.r{rank}...'`` gives each rank its own startup input
    (Paddle's ``startup_after_remove`` is per pipeline stage); all equal to Paddle, and proven."""
    case = "llama_pp2dp2"
    for r in range(4):
        _write(tmp_path, case, "s0", r, "startup_after_remove")
    r = _shard_all(tmp_path, "1", str(tmp_path / f"{case}.s0.r{{rank}}.startup_after_remove.ir"))
    assert "verify: EQUAL" in r.stderr and "verify startup (rank 3): EQUAL" in r.stderr
    for k in range(4):
        assert canon((tmp_path / f"m.r{k}.ir").read_text()) == canon(L.get("clip", case, "s1", k, "after_reshard", L.PP))
        assert (tmp_path / f"s.r{k}.ir").read_text() == L.get("clip", case, "s1", k, "startup_final", L.PP)


@pytest.mark.parametrize("args", [["--all-ranks", "-o", "m.r{rank}.ir", "--startup-out", "s.r{rank}.ir"],
                                  ["--rank", "2", "-o", "m.ir", "--startup-out", "s.ir"]])
def test_pp_other_stage_startup_is_an_error(tmp_path, args):
    """Stage 0's startup program for a rank of stage 1 (it initialises none of that rank's
    states): an error naming the rank and the way out, and nothing written (was: rank 2's startup
    program initialised stage 0's parameters, with a warning only)."""
    case = "llama_pp2dp2"
    src = _write(tmp_path, case, "s0", 0, "before_partition")
    st = _write(tmp_path, case, "s0", 0, "startup_after_remove")
    args = [str(tmp_path / a) if "." in a else a for a in args]
    r = CliRunner().invoke(main, ["shard", str(src), "--stage", "1", "-q", "--startup", str(st), *args])
    assert r.exit_code == 1, r.stderr
    assert "initialises none of the 44 optimizer states rank 2 reads" in r.stderr
    assert "{rank}" in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.glob("m*.ir")) and not list(tmp_path.glob("s.*ir"))


@pytest.mark.parametrize("stage", ["0", "1"])
def test_pp_one_startup_of_every_stage(tmp_path, stage):
    """Paddle's startup program before RemovePasses (every stage's values, the same on every rank)
    as the one startup input: each rank keeps its own part (on-mesh by type, dense values by the
    main program's name), byte for byte Paddle's ``startup_final``, and proven."""
    st = _write(tmp_path, "llama_pp2dp2", "s0", 0, "startup_before_remove")
    r = _shard_all(tmp_path, stage, str(st))
    assert "verify startup: EQUAL" in r.stderr
    for k in range(4):
        assert (tmp_path / f"s.r{k}.ir").read_text() == L.get("clip", "llama_pp2dp2", f"s{stage}", k, "startup_final", L.PP)
