"""The order in which Paddle prints a block's ``^kw:`` arguments and a block argument's attributes.

PIR keeps both in a ``std::unordered_map<std::string, ...>`` and prints them in its iteration
order, which in libstdc++ is fixed by the keys' ``std::hash`` (``_Hash_bytes``, a MurmurHash2
variant), the prime bucket counts of its rehash policy and the order of insertions.  The map is
emulated here node for node: inserting into an empty bucket puts the node at the front of the
list, into an occupied bucket in front of that bucket's first node; a rehash relinks the nodes
bucket by bucket.  ``Program.clone()`` re-inserts the keys in iteration order, which reorders
them (:func:`cloned`).  Checked against Paddle 3.3.1's job programs (tests/test_sched_parity.py).
"""

from __future__ import annotations

import bisect
from typing import Iterable

_M = (1 << 64) - 1
_MUL = ((0xC6A4A793 << 32) + 0x5BD1E995) & _M
_SEED = 0xC70F6907
# libstdc++'s __prime_list up to the sizes programs reach (every rehash goes through one of these)
_PRIMES = (13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109, 113,
           127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383,
           409, 439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381,
           1493, 1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703,
           5087, 5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173,
           16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411, 30727, 33223, 35933, 38873, 42043,
           45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229, 92203, 99733, 107897, 116731,
           126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897, 256279, 277261,
           299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903, 658753,
           712697, 771049, 834181, 902483, 976369)
_FAST = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def std_hash(key: str) -> int:
    """``std::hash<std::string>`` of libstdc++ on a 64-bit machine."""
    b = key.encode("utf-8")
    n = len(b)
    aligned = n & ~7
    h = (_SEED ^ (n * _MUL)) & _M
    for i in range(0, aligned, 8):
        d = (_shift_mix((int.from_bytes(b[i:i + 8], "little") * _MUL) & _M) * _MUL) & _M
        h = ((h ^ d) * _MUL) & _M
    if n & 7:
        h = ((h ^ int.from_bytes(b[aligned:], "little")) * _MUL) & _M
    h = (_shift_mix(h) * _MUL) & _M
    return _shift_mix(h)


class UnorderedMapOrder:
    """The iteration order of a ``std::unordered_map<std::string, T>`` (libstdc++) as keys are
    inserted and erased."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self.buckets = 1
        self.next_resize = 0
        self.nodes: list[str] = []
        self._hash: dict[str, int] = {}
        for k in keys:
            self.insert(k)

    def _h(self, key: str) -> int:
        h = self._hash.get(key)
        if h is None:
            h = self._hash[key] = std_hash(key)
        return h

    def _next_bkt(self, n: int) -> int:
        if n < len(_FAST):
            self.next_resize = _FAST[n]
            return _FAST[n]
        p = _PRIMES[min(bisect.bisect_left(_PRIMES, n), len(_PRIMES) - 1)]
        self.next_resize = p
        return p

    def _need_rehash(self, n_elt: int, n_ins: int) -> int | None:
        if n_elt + n_ins <= self.next_resize:
            return None
        min_bkts = max(n_elt + n_ins, 0 if self.next_resize else 11)
        if min_bkts >= self.buckets:
            return self._next_bkt(max(min_bkts + 1, self.buckets * 2))
        self.next_resize = self.buckets
        return None

    def _rehash(self, n: int) -> None:
        nxt: dict[str | None, str | None] = {None: None}  # None: the before-begin node
        first_of: dict[int, str | None] = {}  # bucket -> the node before its first node
        bbegin_bkt = 0
        for p in self.nodes:
            b = self._h(p) % n
            if b not in first_of:
                nxt[p] = nxt[None]
                nxt[None] = p
                first_of[b] = None
                if nxt[p] is not None:
                    first_of[bbegin_bkt] = p
                bbegin_bkt = b
            else:
                before = first_of[b]
                nxt[p] = nxt[before]
                nxt[before] = p
        out = []
        c = nxt[None]
        while c is not None:
            out.append(c)
            c = nxt[c]
        self.nodes = out
        self.buckets = n

    def insert(self, key: str) -> None:
        if key in self._hash and key in self.nodes:
            return
        n = self._need_rehash(len(self.nodes), 1)
        if n is not None:
            self._rehash(n)
        b = self._h(key) % self.buckets
        for i, k in enumerate(self.nodes):
            if self._h(k) % self.buckets == b:
                self.nodes.insert(i, key)
                return
        self.nodes.insert(0, key)

    def erase(self, key: str) -> None:
        if key in self.nodes:
            self.nodes.remove(key)

    def __iter__(self):
        return iter(list(self.nodes))


def inserted(keys: Iterable[str]) -> list[str]:
    """The iteration order after inserting ``keys`` in turn into an empty map."""
    return list(UnorderedMapOrder(keys))


def cloned(order: Iterable[str]) -> list[str]:
    """The order of a copy made by inserting a map's keys in its iteration order (what
    ``Program.clone()`` does to a block's kwargs)."""
    return inserted(list(order))


def as_cloned(block) -> None:
    """``block``'s kwargs (and each one's attributes) in the order a ``Program.clone()`` of it
    prints them."""
    kw = [a for a in block.args if a.keyword is not None]
    if not kw:
        return
    by_key = {a.keyword: a for a in kw}
    block.args = [a for a in block.args if a.keyword is None] + [by_key[k] for k in cloned(by_key)]
    for i, a in enumerate(block.args):
        a.index = i
        if a.keyword is not None and len(a.attrs) > 1:
            a.attrs = {k: a.attrs[k] for k in cloned(a.attrs)}
    block.dirty = True
