"""The stage-3 warning (tests/test_stage3_warning.py) over every stored stage-0 program, rank 0:
where Paddle 3.3.1 printed a stage-3 program distc says nothing (19 on Dec 2), and where Paddle's
stage-3 refusal is its SPMD rule meeting one tensor axis split over two mesh dims distc warns once
(9); where Paddle refuses in its embedding rule (``Multiple Tensor Axes [a,k] is sharded by same
mesh dimension [0]``: the new user's BERT dp2 x mp2 and the vocab-parallel LLaMA
``clip/llama_vp_dp2mp2``) distc warns once with Paddle's message.  Minutes: ``make test-oracle``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

import llmdata as L  # noqa: E402
import modelsdata as M  # noqa: E402
from distc.passes import load_passes  # noqa: E402
from distc.passes.base import REGISTRY, PassContext, PassManager  # noqa: E402
from distc.syntax.parser import parse  # noqa: E402

load_passes()


def _warnings(text: str, mesh_dims, amp: bool) -> list[str]:
    ctx = PassContext()
    PassManager([REGISTRY["shard-optimizer"](stage=3, axis="dp", mesh_dims=mesh_dims, amp=amp)]).run(  # type: ignore[call-arg]
        parse(text, "main.ir"), ctx)
    return [w for w in ctx.diagnostics.warnings if "warning: ZeRO stage 3: Paddle 3.3.1 fails" in w]


def _cases():
    """(name, stage-0 text, mesh dims, amp, Paddle's stage-3 outcome: 'printed', its error, or None)."""
    for m in M.models() + ["bert", "mixtral"]:
        for _, case, r in M.cases(m):
            if r == 0:
                yield (f"{m}/{case}", M.get(m, case, "s0", 0, "before_partition"), M.mesh_dims(case), False,
                       "printed" if M.has(m, case, "s3", 0, "after_reshard") else M.error(m, case, "s3", 0))
    for more in (False, True):
        for c, case, r in L.cases(more):
            if r == 0:
                yield (f"{c}/{case}", L.get(c, case, "s0", 0, "before_partition"), L.MESH_DIMS[case],
                       c in L.AMP_CONFIGS,
                       "printed" if L.has(c, case, "s3", 0, "after_reshard") else L.error(c, case, "s3", 0))


def test_warned_where_paddle_fails_its_spmd_rule_and_only_there():
    printed, rule, other = [], [], []
    for name, text, mesh_dims, amp, paddle in _cases():
        ws = _warnings(text, mesh_dims, amp)
        if paddle == "printed":
            printed.append((name, len(ws)))
        elif paddle and "two different mesh dimension" in paddle:
            rule.append((name, len(ws)))
        elif paddle and "Multiple Tensor Axes" in paddle:
            other.append((name, len(ws), all(w.split("'pd_op.embedding': ")[-1].split(")")[0] in paddle for w in ws)))
    assert len(printed) >= 19 and all(n == 0 for _, n in printed), printed
    assert len(rule) >= 9 and all(n == 1 for _, n in rule), rule
    assert sorted(other) == [("bert/bert_dp2mp2_adamw", 1, True), ("clip/llama_vp_dp2mp2", 1, True)], other
