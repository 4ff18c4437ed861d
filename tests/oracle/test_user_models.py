"""Models a user brought, captured from their own unmodified training script with ``distc capture``
(tests/data/oracle/MODEL/: the script, the commands, MODEL.tar.xz packed by pack_captures.py):

- ``bert``: a BERT-style encoder (word / position / token-type embeddings, post-LN
  ``paddle.nn.TransformerEncoder`` with GELU and dropout 0.1, a padding mask, an MLM head tied to
  the vocab-parallel word embedding, a tanh pooler and classifier, cross entropy with
  ``ignore_index``), placed by ``dist.shard_layer``; AdamW with a weight-decay filter, global-norm
  clip and a warm-up learning rate.

For every rank and stage Paddle printed, distc gives Paddle's programs from the stage-0 capture
(annotate-only, after reshard, dense, startup); Paddle's rank programs verify EQUAL; where Paddle
refused the script's stage (``error.txt``), ``distc shard --all-ranks --verify`` proves distc's.
Minutes: ``make test-oracle``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

import modelsdata as M  # noqa: E402
from test_models import run_stage  # noqa: E402
from test_shard_passes import canon  # noqa: E402
from test_verify_models import ranks_of, shard_verify, verify  # noqa: E402

USER_MODELS = ["bert", "mixtral"]


def stage_sets(kind: str) -> list[tuple[str, str, str]]:
    """(model, case, stage): ``printed`` where Paddle printed every rank's program, ``refused``
    where it refused the stage on some rank."""
    out = []
    for model in USER_MODELS:
        for _, case, rank in M.cases(model):
            if rank != 0:
                continue
            for st in ("s0", "s1", "s2", "s3"):
                printed = all(M.has(model, case, st, r, "after_reshard") for r in ranks_of(case))
                refused = any(M.error(model, case, st, r) for r in ranks_of(case))
                if (kind == "printed" and printed) or (kind == "refused" and refused):
                    out.append((model, case, st))
    return out


@pytest.mark.parametrize("model,case,rank", [(m, c, r) for m in USER_MODELS for _, c, r in M.cases(m)
                                              if M.stages(m, c, r)])  # (refused at every stage: below)
def test_user_model_parity(model, case, rank):
    for stage in M.stages(model, case, rank):
        got = run_stage(model, case, rank, stage)
        for snap, text in got.items():
            if not M.has(model, case, stage, rank, snap.split("(")[0]):
                continue  # (startup_final from s3 when Paddle's stage-3 startup exists)
            want = M.get(model, case, stage, rank, snap.split("(")[0])
            assert canon(text) == canon(want), f"{stage} {snap}"


@pytest.mark.parametrize("model", USER_MODELS)
def test_user_model_prints_back(model):
    from distc.syntax.parser import parse

    for name, data in M.archive(model).items():
        if name.endswith(".ir"):
            text = data.decode("utf-8")
            assert str(parse(text, name)) == text, name


@pytest.mark.parametrize("model,case,stage", stage_sets("printed"))
def test_user_model_paddle_ranks_verify(tmp_path, model, case, stage):
    serial = M.get(model, case, "s0", 0, "before_partition")
    r = verify(tmp_path, serial, {k: M.get(model, case, stage, k, "after_reshard") for k in ranks_of(case)})
    assert r.exit_code == 0 and "main: EQUAL" in r.output, r.output


@pytest.mark.parametrize("model,case,stage", stage_sets("refused"))
def test_user_model_refusals_are_proven(tmp_path, model, case, stage):
    r = shard_verify(tmp_path, model, case, stage)
    assert r.exit_code == 0 and "verify: EQUAL" in r.output, r.output
