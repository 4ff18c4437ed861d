"""Passes over PIR programs, one a file.  ``load_passes()`` imports them so they register."""

from __future__ import annotations

import importlib

PASS_MODULES = [
    "distc.passes.verify_pass",
    "distc.passes.shard_optimizer",
    "distc.passes.partition",
    "distc.passes.remove_other_rank",
    "distc.passes.dist_to_dense",
    "distc.passes.shard_startup",
    "distc.passes.reshard_pass",
    "distc.passes.gradient_merge",
    "distc.passes.pipeline_fthenb",
    "distc.passes.pipeline_1f1b",
    "distc.passes.check_chunk_id",
    "distc.passes.pipeline_vpp",
    "distc.passes.pipeline_zero_bubble",
    "distc.passes.tensor_fusion",
]


def load_passes() -> None:
    for m in PASS_MODULES:
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            if e.name != m:
                raise
