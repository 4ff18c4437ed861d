"""The library pipeline, between the passes and the command line: one call runs ``distc shard``'s
whole job (:func:`shard`, :func:`shard_ranks`; :func:`reshard` for ``distc reshard``), :class:`ShardPipeline` its steps (shared work once,
each rank's from that state), :class:`ShardOptions` what to do, :class:`RankResult` and
:class:`ShardResult` what came out.  ``distc.shard`` is :func:`shard`."""

from __future__ import annotations

from .reshard import reshard  # first: it loads the passes before the rest (see tests/test_pipeline_threads.py)
from .results import RankResult, ShardResult
from .shard import Prepared, ShardOptions, ShardPipeline, shard, shard_ranks

__all__ = ["Prepared", "RankResult", "ShardOptions", "ShardPipeline", "ShardResult", "reshard", "shard",
           "shard_ranks"]

