"""Derived rank texts (``distc shard --all-ranks``, :mod:`distc.pipeline.derive`) on the bigger
written models (GPT-2, ViT, PaddleFormers' LLaMA, MoE with ``--moe-all-to-all``): each equal to its
rank's whole lowering.  ``make test`` checks the MLPs, LLaMA, pipeline stages and MoE
(tests/test_derive_ranks.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))

from test_derive_ranks import MODEL_CASES, check, ids  # noqa: E402


@pytest.mark.parametrize("case,opts,least", MODEL_CASES, ids=ids(MODEL_CASES))
def test_derived_ranks_equal_whole_lowerings(case, opts, least):
    check(case, opts, least)
