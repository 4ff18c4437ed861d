"""``distc shard`` on LLaMA training programs against Paddle 3.3.1's own files
(tests/data/oracle/llm: both configurations, dp4 / dp2 x mp2 / dp2 x mp4, stages 0-3, every rank;
rank 0 of dp2 x mp2 and dp4 is the shared corpus, byte for byte).

From Paddle's plain data-parallel program ``CASE.s0.rR.before_partition`` (and its
``startup_after_remove``), for every stage Paddle has a program for:

* shard-optimizer (``--annotate-only``)   == ``CASE.sN.rR.before_partition``
* + partition + reshard{rank}              == ``after_reshard``
* + remove-other-rank + dist-to-dense      == ``dense``
* shard-startup                            == ``startup_final``
  (stage 3: from Paddle's stage-3 ``startup_after_remove``, which already creates the
  parameters sharded; from the stage-0 one distc slices them, checked in test_llm_cli.py)

``amp/`` takes the AMP path (``amp=True``, ``--amp`` on the command line).  Stage 2 is run as
stage 2 (distc says it is stage 1) and compared with Paddle's stage-2 files.  Ring ids up to a
consistent renaming.  The pipeline runs in process (one parse per input, cloned per stage) to keep
the ~90 cases fast; the command line itself is tested on the same data in test_llm_cli.py.
"""

from __future__ import annotations

import functools

import pytest

import llmdata as L
from distc.passes.base import PassContext, PassManager
from distc.passes.dist_to_dense import DistToDensePass
from distc.passes.partition import PartitionPass
from distc.passes.remove_other_rank import RemoveOtherRankPass
from distc.passes.reshard_pass import ReshardPass
from distc.passes.shard_optimizer import ShardOptimizerPass
from distc.passes.shard_startup import persistable_layouts, shard_startup
from distc.syntax.parser import parse
from test_shard_passes import canon


@functools.lru_cache(maxsize=8)
def _parsed(config: str, case: str, rank: int, snap: str, stage: str = "s0", root=L.LLM):
    return parse(L.get(config, case, stage, rank, snap, root), f"{config}/{case}.{stage}.r{rank}.{snap}.ir")


def _stages(config: str, case: str, rank: int) -> list[str]:
    return [s for s in ("s0", "s1", "s2", "s3") if L.has(config, case, s, rank, "after_reshard")]


def params():
    return [pytest.param(c, case, r, id=f"{c}/{case}.r{r}") for c, case, r in L.cases()]


def run_stage(config: str, case: str, rank: int, stage: str, root=L.LLM, mesh_dims=None) -> dict[str, str]:
    """distc's four programs for one stage (``root``: another store of the same scheme)."""
    prog = _parsed(config, case, rank, "before_partition", "s0", root).clone()
    ctx = PassContext()
    out = {}
    n = int(stage[1])
    if n >= 1:
        PassManager([ShardOptimizerPass(stage=n, axis="dp", mesh_dims=mesh_dims or L.MESH_DIMS[case],
                                        amp=config in L.AMP_CONFIGS)]).run(prog, ctx)
        out["before_partition"] = str(prog)
    layouts = persistable_layouts(prog)
    plays = persistable_layouts(prog, params=True)
    PassManager([PartitionPass(), ReshardPass(rank=rank)]).run(prog, ctx)
    out["after_reshard"] = str(prog)
    PassManager([RemoveOtherRankPass(rank=rank), DistToDensePass(rank=rank)]).run(prog, ctx)
    out["dense"] = str(prog)
    src = "s3" if n == 3 else "s0"  # see the module docstring
    sprog = parse(L.get(config, case, src, rank, "startup_after_remove", root), "startup")
    shard_startup(sprog, layouts, rank, ctx, params=plays)
    out["startup_final"] = str(sprog)
    out["notes"] = "\n".join(ctx.notes)
    return out


@pytest.mark.parametrize("config,case,rank", params())
def test_llm_parity(config, case, rank):
    stages = _stages(config, case, rank)
    assert "s0" in stages
    for stage in stages:
        got = run_stage(config, case, rank, stage)
        for snap in ("before_partition", "after_reshard", "dense", "startup_final"):
            if snap == "before_partition" and stage == "s0":
                continue
            want = L.get(config, case, stage, rank, snap)
            assert canon(got[snap]) == canon(want), f"{stage} {snap}"
        if stage == "s2":
            assert "stage 2 = stage 1" in got["notes"]


def test_llm_data_complete():
    """Every (config, mesh, stage, rank) is there: programs, or Paddle's error where it fails."""
    n_prog = n_err = 0
    for config in L.CONFIGS:
        for case, ranks in L.RANKS.items():
            for stage in ("s0", "s1", "s2", "s3"):
                for r in ranks:
                    err = L.error(config, case, stage, r)
                    if err is None:
                        for snap in ("before_partition", "after_reshard", "dense", "startup_after_remove",
                                     "startup_final"):
                            assert L.has(config, case, stage, r, snap), (config, case, stage, r, snap)
                        n_prog += 1
                    else:
                        n_err += 1
                        if stage == "s3":
                            assert "mp" in L.MESH_DIMS[case] and "Sharded by two different mesh dimension" in err
                        else:
                            assert config == "amp" and stage == "s2" and "embedding_grad" in err
    assert n_prog + n_err == 2 * 4 * 16
    # Paddle fails stage 3 wherever mp shards parameters, and stage 2 under AMP everywhere
    assert n_err == 2 * 12 + 16
    corpus = [n for n, (_, c) in L.manifest().items() if c]
    assert len(corpus) == 48


def test_stage2_is_stage1_in_paddle():
    """Paddle's stage-2 programs are its stage-1 programs, byte for byte (clip, every rank)."""
    m = L.manifest()
    same = 0
    for name, (h, _) in m.items():
        if name.startswith("clip/") and ".s2." in name:
            assert m[name.replace(".s2.", ".s1.")][0] == h, name
            same += name.split("/")[1].split(".")[0] in L.RANKS  # the three meshes (and dp2, --more)
    assert same == 16 * 5
