"""`distc verify` on the models people train (issue 17): Paddle 3.3.1's own per-rank programs of the
stored model sets (tests/data/oracle/models: GPT-2, ViT, a LLaMA block with rotary embedding, a
ResNet block; tests/data/oracle/fusion/moe: MoE) verify EQUAL — or DIVERGED where Paddle's program is
wrong (ViT) — and distc's own programs of every stage (``shard --all-ranks --verify``) EQUAL; for
each kernel family a mutation of one rank's program — the kind of slip a pass or a hand edit
makes — is caught and located in that rank's file.

`make test` runs a subset; ``make test-oracle`` every stored set and stage
(tests/oracle/test_verify_sweep.py)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import llmdata
import modelsdata as M
from distc.cli import main


def paddle_set(root, group: str, case: str, stage: str, ranks) -> tuple[str, dict[int, str]]:
    serial = llmdata.text(f"{group}/{case}.{stage}.r0.before_partition.ir", root)
    return serial, {r: llmdata.text(f"{group}/{case}.{stage}.r{r}.after_reshard.ir", root) for r in ranks}


def verify(tmp_path, serial: str, ranks: dict[int, str]):
    (tmp_path / "serial.ir").write_text(serial)
    for r, t in ranks.items():
        (tmp_path / f"main.r{r}.ir").write_text(t)
    return CliRunner().invoke(main, ["verify", str(tmp_path / "serial.ir"), "--ranks", str(tmp_path / "main.r{rank}.ir")])


def mutate(text: str, op: str, old: str, new: str, nth: int = 0) -> tuple[str, int]:
    """Replace ``old`` by ``new`` in the ``nth`` line holding the op ``op``; (text, its line)."""
    lines = text.split("\n")
    hits = [i for i, ln in enumerate(lines) if f'"{op}" (' in ln and old in ln]
    i = hits[nth]
    lines[i] = lines[i].replace(old, new, 1)
    return "\n".join(lines), i + 1


def located(out: str, rank: int) -> tuple[int, str]:
    """(line, op) of the DIVERGED report, which must point into the rank's own file."""
    m = re.search(r"main\.r(\d+)\.ir:(\d+):\d+: DIVERGED on rank (\d+) at '([^']+)'", out)
    assert m, out
    assert int(m.group(1)) == int(m.group(3)) == rank, out
    return int(m.group(2)), m.group(4)


MOE = ("moe", "moe_dp2ep2", "s0", range(4))


def test_paddle_moe_ranks_verify_equal(tmp_path):
    r = verify(tmp_path, *paddle_set(llmdata.FUSION, *MOE))
    assert r.exit_code == 0 and "main: EQUAL" in r.output, r.output


def test_moe_mutation_is_caught_at_the_moe_op(tmp_path):
    """Rank 0's first expert matmul put on the other expert's sub-mesh ([1,3] instead of [0,2]):
    rank 0 no longer computes its expert's output, which moe_global_mesh_tensor needs there."""
    serial, ranks = paddle_set(llmdata.FUSION, *MOE)
    ranks[0], line = mutate(ranks[0], "pd_op.matmul", "{mesh:{shape:[2,1],process_ids:[0,2]}",
                            "{mesh:{shape:[2,1],process_ids:[1,3]}")
    r = verify(tmp_path, serial, ranks)
    assert r.exit_code == 1, r.output
    at, op = located(r.output, 0)
    assert op == "dist_op.moe_global_mesh_tensor" and at > line, r.output


# ------------------------------------------------------------------------------------ model sets
PADDLE_WRONG = {"vit"}  # Paddle's ViT: the cls token's gradient summed over each rank's own rows


def ranks_of(case: str) -> list[int]:
    return list(range(2 if "_dp2_" in case else 4))


def model_set(model: str, case: str, stage: str) -> tuple[str, dict[int, str]]:
    serial = M.get(model, case, stage, 0, "before_partition")
    return serial, {r: M.get(model, case, stage, r, "after_reshard") for r in ranks_of(case)}


def paddle_sets() -> list[tuple[str, str, str]]:
    """(model, case, stage) of every stored set whose ranks Paddle all printed."""
    out = []
    for model in M.models():
        for m, case, r in M.cases(model):
            if r != 0:
                continue
            for st in M.stages(m, case, 0):
                if all(M.has(m, case, st, k, "after_reshard") for k in ranks_of(case)):
                    out.append((m, case, st))
    return out


def shard_verify(tmp_path, model: str, case: str, stage: str):
    src = M.write(tmp_path, model, case, "s0", 0, "before_partition")
    return CliRunner().invoke(main, ["shard", str(src), "--stage", stage[1:], "--all-ranks", "--verify", "-q",
                                     "-o", str(tmp_path / f"{stage}.r{{rank}}.ir")])


QUICK_PADDLE = [("gpt2", "gpt2_dp2mp2_adamw", "s1"), ("vit", "vit_dp2_adamw", "s1"), ("resnet", "resnet_dp4_adamw", "s0")]
QUICK_SHARD = [("gpt2", "gpt2_dp2mp2_adamw", "s3"), ("vit", "vit_dp2mp2_adamw", "s1"), ("llama", "llama_dp2mp2_adamw", "s3"),
               ("resnet", "resnet_dp2_adamw", "s3")]


@pytest.mark.parametrize("model,case,stage", QUICK_PADDLE)
def test_paddle_model_ranks(tmp_path, model, case, stage):
    r = verify(tmp_path, *model_set(model, case, stage))
    if model in PADDLE_WRONG:
        assert r.exit_code == 1, r.output
        # the update of the cls token (ViT's first create_parameter), the first op reading its gradient
        assert located(r.output, 0)[1] == "pd_op.adamw_" and "vi_t_0.w_0" in r.output, r.output
    else:
        assert r.exit_code == 0 and "main: EQUAL" in r.output, r.output


@pytest.mark.parametrize("model,case,stage", QUICK_SHARD)
def test_distc_model_ranks(tmp_path, model, case, stage):
    """distc's programs of a stage (ViT: where Paddle's are wrong, and stage 3, where Paddle fails)."""
    r = shard_verify(tmp_path, model, case, stage)
    assert r.exit_code == 0 and "verify: EQUAL" in r.output, r.output


def test_mixtral_sparse_moe_verifies_and_a_routing_slip_is_caught(tmp_path):
    """A user's Mixtral-style sparse MoE (top-2 of 4 experts: topk, nonzero, gather, index_add;
    tests/data/oracle/mixtral, made by ``distc capture`` of the user's script): Paddle's four rank
    programs of dp2 x mp2 at ZeRO-1 verify EQUAL; rank 1's first topk taking the smallest
    probabilities routes other tokens, which its mp partner then all-reduces with another count:
    reported at the topk (the op that first differs from the serial program), the all_reduce that
    cannot run after it named in the message."""
    serial, ranks = model_set("mixtral", "mixtral_dp2mp2_adamw", "s1")
    r = verify(tmp_path, serial, ranks)
    assert r.exit_code == 0 and "main: EQUAL" in r.output, r.output
    ranks[1], line = mutate(ranks[1], "pd_op.topk", "largest:true", "largest:false")
    r = verify(tmp_path / "m", serial, ranks) if (tmp_path / "m").mkdir() is None else None
    assert r.exit_code == 1 and "DIVERGED on rank 1" in r.output, r.output
    assert located(r.output, 1) == (line, "pd_op.topk"), r.output
    assert "(then pd_op.all_reduce line " in r.output and "with different local shapes" in r.output, r.output


GPT2_MUTATIONS = {
    # family: (rank, op, old, new)
    "norm": (1, "pd_op.layer_norm", "epsilon:1e-05", "epsilon:0.001"),
    "activation": (2, "pd_op.gelu", "approximate:false", "approximate:true"),
    "randomness": (3, "pd_op.dropout", 'mode:"upscale_in_train"', 'mode:"downgrade_in_infer"'),
}


@pytest.mark.parametrize("family", sorted(GPT2_MUTATIONS))
def test_gpt2_mutation_is_caught_and_located(tmp_path, family):
    rank, op, old, new = GPT2_MUTATIONS[family]
    serial, ranks = model_set("gpt2", "gpt2_dp2mp2_adamw", "s1")
    ranks[rank], line = mutate(ranks[rank], op, old, new)
    r = verify(tmp_path, serial, ranks)
    assert r.exit_code == 1, r.output
    assert located(r.output, rank) == (line, op)


MODEL_MUTATIONS = {
    # family: (model, case, stage, rank, op, old, new)
    "index": ("llama", "llama_dp2mp2_adamw", "s1", 1, "pd_op.slice", "axes:[3]", "axes:[2]"),  # rotate-half
    "conv": ("resnet", "resnet_dp2_adamw", "s1", 1, "pd_op.pool2d", 'pooling_type:"max"', 'pooling_type:"avg"'),
    "batch_norm": ("resnet", "resnet_dp2_adamw", "s1", 0, "pd_op.batch_norm_", "epsilon:1e-05", "epsilon:0.001"),
}


@pytest.mark.parametrize("family", sorted(MODEL_MUTATIONS))
def test_model_mutation_is_caught_and_located(tmp_path, family):
    model, case, stage, rank, op, old, new = MODEL_MUTATIONS[family]
    serial, ranks = model_set(model, case, stage)
    ranks[rank], line = mutate(ranks[rank], op, old, new)
    r = verify(tmp_path, serial, ranks)
    assert r.exit_code == 1, r.output
    assert located(r.output, rank) == (line, op)
