"""Communication groups and their ring ids, allocated the way Paddle 3.3.1 does.

Paddle's ``new_process_group(ranks)`` caches groups by the exact *list* of ranks it is given (the
key is ``'_'.join(ranks)``): the group type (``p2p`` or collective) is not part of the key.  So a
send/recv pair between ranks 0 and 2 (``[0,2]``) and an all-gather over the sorted group ``[0,2]``
share one ring id, while the reverse p2p group ``[2,0]`` is a different group with its own id.
Ids are handed out in creation order; in a fresh Paddle process the first group gets 12
(``_new_ring_id()`` + number of groups + 1), which is where :class:`RingAllocator` starts by
default, so a program lowered in one go gets the ring ids a fresh Paddle process would print.
"""

from __future__ import annotations

from ..ir.records import field, record

PADDLE_FIRST_RING_ID = 12


@record
class RingAllocator:
    """Deterministic ring ids: one per distinct rank list, reused for the whole program.

    ``get([0, 2])`` returns the id of group ``[0, 2]``, creating it if needed.  ``groups`` maps the
    rank tuples to ids in creation order; :meth:`ranks_of` goes the other way.
    """

    first: int = PADDLE_FIRST_RING_ID
    groups: dict[tuple[int, ...], int] = field(default_factory=dict)
    reserved: set[int] = field(default_factory=set)  # ids the program already uses: skipped
    next_id: int | None = None

    def get(self, ranks) -> int:
        key = tuple(int(r) for r in ranks)
        rid = self.groups.get(key)
        if rid is None:
            rid = self.first if self.next_id is None else self.next_id
            while rid in self.reserved:
                rid += 1
            self.next_id = rid + 1
            self.groups[key] = rid
        return rid

    def ranks_of(self, ring_id: int) -> tuple[int, ...] | None:
        for k, v in self.groups.items():
            if v == ring_id:
                return k
        return None

    def table(self) -> list[tuple[int, tuple[int, ...]]]:
        return sorted((v, k) for k, v in self.groups.items())
