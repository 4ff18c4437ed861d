"""Paddle's layout of a fused ZeRO buffer (``ShardingOptimizerStage1._fuse_group_param``), as plain
arithmetic shared by the ``tensor-fusion`` pass and the simulator:

* a buffer ``fused@-A-B-...`` holds its parameters in that order, each padded to ``align``
  elements (256 bytes over the dtype size, times the sharding degree);
* rank ``i`` of the sharding group holds elements ``[i*shard, (i+1)*shard)`` of it
  (``shard@fused@-...``), and updates the pieces of the parameters that range covers.
"""

from __future__ import annotations

FUSED = "fused@"
SHARD = "shard@"
SLICE = "slice@"


def padded(numel: int, align: int) -> int:
    """Elements a parameter of ``numel`` elements takes in the buffer (``align`` in elements)."""
    return -(-numel // align) * align


def buffer_names(key: str) -> list[str]:
    """The parameters of a buffer named ``fused@-A-B-...``."""
    return key[len(FUSED) + 1:].split("-") if key.startswith(FUSED + "-") else []


def pieces(sizes: list[int], shard: int, index: int) -> list[tuple[int, int, int]]:
    """(parameter position, begin, end) of each piece rank ``index`` owns, begin/end within its
    shard (``sizes``: the padded sizes, in buffer order)."""
    begin = index * shard
    out, total = [], 0
    for k, n in enumerate(sizes):
        lo = max(total - begin, 0)
        total += n
        hi = min(total - begin, shard)
        if lo < hi:
            out.append((k, lo, hi))
    return out


def piece_of(sizes: list[int], shard: int, index: int, position: int) -> tuple[int, int] | None:
    """Where parameter ``position`` starts and ends within the whole buffer, clipped to rank
    ``index``'s shard (None: the rank holds none of it)."""
    for k, lo, hi in pieces(sizes, shard, index):
        if k == position:
            return index * shard + lo, index * shard + hi
    return None
