"""Pipeline placement: the LLaMA model of tests/data/oracle/llm with its layers on two meshes (the
embedding and layer 0 on stage 0, layer 1, norm and head on stage 1, the activations moved with
``dist.reshard``), ZeRO stages 0 and 1, printed by Paddle 3.3.1 (``tests/data/oracle/pp``, made by
gen_pp.py): pp2 x dp2 (stage meshes ``[0,1]`` and ``[2,3]``, every rank) and pp2 x dp2 x mp2
(``[[0,1],[2,3]]`` and ``[[4,5],[6,7]]``, ranks 0, 3, 4, 7).

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
    assert len(got) == 16  # 2 meshes x 2 stages x 4 ranks
    assert {(c[1], c[2]) for c in got} == {(m, s) for m in DIMS for s in ("s0", "s1")}
    for config, case, stage, rank in got:
        for snap in ("before_partition", "after_reshard", "dense", "startup_after_remove", "startup_final"):
            assert L.has(config, case, stage, rank, snap, L.PP)


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
    r = CliRunner().invoke(main, ["verify", str(serial), "--ranks", str(tmp_path / f"{case}.{stage}.r{{rank}}.after_reshard.ir")])
    assert r.exit_code == 0, r.stderr
    assert "main: EQUAL" in r.stdout and "ranks [0, 1, 2, 3]" in r.stdout
