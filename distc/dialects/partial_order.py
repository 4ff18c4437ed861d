"""The order Paddle prints partial dims of a dist attr it builds: its partial-status map is a
``paddle::flat_hash_map``, so ``partial(0,..)``, ``partial(1,..)``, ``partial(2,..)`` inserted in that
order print as 0, 2, 1.  (Parsed attrs keep the order the input wrote, see
``TensorDistAttr.partial_order``; this is for attrs distc creates.)"""

from __future__ import annotations

_FIB = 11400714819323198485
_M64 = (1 << 64) - 1


def _log2(n: int) -> int:
    return n.bit_length() - 1


def hash_map_order(keys) -> list[int]:
    """The iteration order of Paddle's partial-status map (``paddle::flat_hash_map``, i.e. ska's
    Robin Hood table with Fibonacci hashing, max load 0.5) after inserting ``keys`` in order.

    Paddle prints partial dims in this order: inserting 0, 1, 2 prints ``partial(0,..),
    partial(2,..),partial(1,..)``; 2, 1 prints ``partial(2,..),partial(1,..)``.
    """
    slots: list = []  # entries (distance, key) or None
    nslots = 0
    shift = 64
    max_lookups = 4
    count = 0

    def index(k: int) -> int:
        return ((k * _FIB) & _M64) >> shift

    def rehash(n: int) -> None:
        nonlocal slots, nslots, shift, max_lookups, count
        n = max(n, 2 * count)  # count / max_load_factor
        size = 2
        while size < n:
            size *= 2
        old = [e for e in slots if e is not None]
        nslots = size
        shift = 64 - _log2(size)
        max_lookups = max(4, _log2(size))
        slots = [None] * (size + max_lookups)
        count = 0
        for _, k in old:
            emplace(k)

    def emplace(k: int) -> None:
        nonlocal count
        if nslots:
            cur = index(k)
            dist = 0
            while slots[cur] is not None and slots[cur][0] >= dist:
                if slots[cur][1] == k:
                    return
                cur += 1
                dist += 1
        else:
            cur, dist = 0, 0
        if nslots == 0 or dist == max_lookups or count + 1 > nslots * 0.5:
            rehash(max(4, 2 * nslots))
            emplace(k)
            return
        item = (dist, k)
        while True:
            if slots[cur] is None:
                slots[cur] = item
                count += 1
                return
            if slots[cur][0] < item[0]:
                slots[cur], item = item, slots[cur]
            item = (item[0] + 1, item[1])
            cur += 1
            if cur >= len(slots):  # pragma: no cover - never for a handful of mesh dims
                rehash(2 * nslots)
                emplace(item[1])
                return

    for k in keys:
        emplace(int(k))
    return [e[1] for e in slots if e is not None]


def ordered_partial(p) -> tuple[tuple[int, str], ...]:
    """Partial status (dict or pairs, in insertion order) in the order Paddle prints it."""
    d = dict(p)
    return tuple((k, d[k]) for k in hash_map_order(list(d)))
