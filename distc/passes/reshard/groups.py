"""Communication groups and their ring ids: :class:`~distc.dialects.rings.RingAllocator` (Paddle's
``new_group`` numbering); one allocator travels in the pass context (``PassContext.rings``)."""

from __future__ import annotations

from ...dialects.rings import PADDLE_FIRST_RING_ID, RingAllocator

__all__ = ["PADDLE_FIRST_RING_ID", "RingAllocator", "ring_allocator"]


def ring_allocator(pass_ctx=None, *, first: int = PADDLE_FIRST_RING_ID) -> RingAllocator:
    """The allocator shared by every pass of one pipeline run (``PassContext.rings``); ``first``
    numbers its first group if it has handed out none yet."""
    if pass_ctx is None:
        return RingAllocator(first)
    rings = pass_ctx.rings
    if not rings.groups and rings.next_id is None:
        rings.first = first
    return rings
