"""`distc verify` on every stored model set (issue 17): Paddle 3.3.1's own per-rank programs of every
stage it printed (GPT-2, ViT, the LLaMA block, the ResNet block: tests/data/oracle/models; MoE:
tests/data/oracle/fusion/moe) verify EQUAL, or DIVERGED where Paddle's program is wrong (ViT's cls
token; MoE's all-to-all way back under FLAGS_enable_moe_utils), and ``distc shard --all-ranks
--verify`` from each stage-0 program gives EQUAL at stages 0-3 (where Paddle refuses too).  Minutes:
``make test-oracle``; ``make test`` runs a part (tests/test_verify_models.py, tests/test_moe.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

import llmdata  # noqa: E402
import modelsdata as M  # noqa: E402
from test_verify_models import PADDLE_WRONG, model_set, paddle_set, paddle_sets, shard_verify, verify  # noqa: E402

MOE = [("s0", 0), ("s1", 0), ("s0u", 1), ("s1u", 1)]  # (variant, exit): u = FLAGS_enable_moe_utils


@pytest.mark.parametrize("model,case,stage", paddle_sets())
def test_paddle_ranks(tmp_path, model, case, stage):
    r = verify(tmp_path, *model_set(model, case, stage))
    assert r.exit_code == (1 if model in PADDLE_WRONG else 0), r.output


@pytest.mark.parametrize("model,case", [(m, c) for m, c, r in M.cases() if r == 0])
@pytest.mark.parametrize("stage", ["s0", "s1", "s2", "s3"])
def test_distc_ranks(tmp_path, model, case, stage):
    r = shard_verify(tmp_path, model, case, stage)
    assert r.exit_code == 0 and "verify: EQUAL" in r.output, r.output


@pytest.mark.parametrize("variant,want", MOE)
def test_paddle_moe_ranks(tmp_path, variant, want):
    r = verify(tmp_path, *paddle_set(llmdata.FUSION, "moe", "moe_dp2ep2", variant, range(4)))
    assert r.exit_code == want, r.output


@pytest.mark.parametrize("stage", ["2"])
@pytest.mark.parametrize("a2a", [False, True])
def test_distc_moe_ranks(tmp_path, stage, a2a):
    """distc's MoE programs at stage 2 (stages 0, 1 and 3: tests/test_moe.py), main and per-rank
    startup programs, with and without --moe-all-to-all."""
    from click.testing import CliRunner

    from distc.cli import main

    for r in range(4):
        (tmp_path / f"startup.r{r}.ir").write_text(
            llmdata.text(f"moe/moe_dp2ep2.s0.r{r}.startup_after_remove.ir", llmdata.FUSION))
    src = tmp_path / "main.ir"
    src.write_text(llmdata.text("moe/moe_dp2ep2.s0.r0.before_partition.ir", llmdata.FUSION))
    r = CliRunner().invoke(main, ["shard", str(src), "--stage", stage, *(["--moe-all-to-all"] if a2a else []),
                                  "--all-ranks", "-q", "--verify", "-o", str(tmp_path / "m.r{rank}.ir"),
                                  "--startup", str(tmp_path / "startup.r{rank}.ir"),
                                  "--startup-out", str(tmp_path / "s.r{rank}.ir")])
    assert r.exit_code == 0 and "verify: EQUAL" in r.output, r.output
