"""Align two sequences of hashable keys: which elements of ``a`` and ``b`` are the same element.

Patience diff (as git's ``--patience``): strip the common prefix and suffix, match the keys that
occur exactly once in both ranges in their longest increasing order (these anchors never pair
two repeated ops wrongly), then do the same between consecutive anchors.  A range without any
unique key is aligned by a dynamic-programming LCS when small, else by pairing the k-th
occurrence of a key in A with its k-th in B (longest increasing run again).
The result is a longest-common-subsequence-like list of index pairs, increasing in both.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Hashable, Sequence

DP_CELLS = 250_000  # ranges up to this many cells get an exact LCS


def align(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` with ``a[i] == b[j]``, strictly increasing in ``i`` and in ``j``."""
    out: list[tuple[int, int]] = []
    stack = [(0, len(a), 0, len(b))]
    while stack:
        alo, ahi, blo, bhi = stack.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            out.append((alo, blo))
            alo += 1
            blo += 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi -= 1
            bhi -= 1
            out.append((ahi, bhi))
        if alo == ahi or blo == bhi:
            continue
        anchors = _unique_anchors(a, alo, ahi, b, blo, bhi)
        if not anchors and (ahi - alo) * (bhi - blo) > DP_CELLS:
            anchors = _ordered_anchors(a, alo, ahi, b, blo, bhi)
        if anchors:
            pi, pj = alo, blo
            for i, j in anchors:
                out.append((i, j))
                stack.append((pi, i, pj, j))
                pi, pj = i + 1, j + 1
            stack.append((pi, ahi, pj, bhi))
        elif (ahi - alo) * (bhi - blo) <= DP_CELLS:
            out.extend(_lcs(a, alo, ahi, b, blo, bhi))
    out.sort()
    return out


def _unique_anchors(a, alo, ahi, b, blo, bhi) -> list[tuple[int, int]]:
    """Keys once in a[alo:ahi] and once in b[blo:bhi], longest run increasing in both."""
    pos_a: dict = {}
    for i in range(alo, ahi):
        k = a[i]
        pos_a[k] = -1 if k in pos_a else i
    pos_b: dict = {}
    for j in range(blo, bhi):
        k = b[j]
        if k in pos_a:
            pos_b[k] = -1 if k in pos_b else j
    return _lis(sorted((pos_a[k], j) for k, j in pos_b.items() if j >= 0 and pos_a[k] >= 0))


def _ordered_anchors(a, alo, ahi, b, blo, bhi) -> list[tuple[int, int]]:
    """A large range without unique keys: pair the k-th occurrence of a key in A with its k-th
    occurrence in B (keys occurring as often on both sides first), longest increasing run."""
    occ_a: dict = {}
    for i in range(alo, ahi):
        occ_a.setdefault(a[i], []).append(i)
    occ_b: dict = {}
    for j in range(blo, bhi):
        if b[j] in occ_a:
            occ_b.setdefault(b[j], []).append(j)
    same = [(i, j) for k, js in occ_b.items() if len(js) == len(occ_a[k]) for i, j in zip(occ_a[k], js)]
    run = _lis(sorted(same))
    if run:
        return run
    return _lis(sorted((i, j) for k, js in occ_b.items() for i, j in zip(occ_a[k], js)))


def _lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest subsequence of ``pairs`` (sorted by i, distinct i) increasing in j."""
    if not pairs:
        return []
    # longest increasing subsequence of the j's (patience sorting)
    tails: list[int] = []  # j of the last element of the best run of each length
    tail_idx: list[int] = []
    back: list[int] = []
    for n, (_, j) in enumerate(pairs):
        k = bisect_left(tails, j)
        back.append(tail_idx[k - 1] if k else -1)
        if k == len(tails):
            tails.append(j)
            tail_idx.append(n)
        else:
            tails[k] = j
            tail_idx[k] = n
    run = []
    n = tail_idx[-1]
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    run.reverse()
    return run


def _lcs(a, alo, ahi, b, blo, bhi) -> list[tuple[int, int]]:
    """Exact LCS by dynamic programming (rows of ints; small ranges only)."""
    n, m = ahi - alo, bhi - blo
    bs = b[blo:bhi]
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        ai = a[alo + i]
        row, nxt = table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = nxt[j + 1] + 1 if ai == bs[j] else max(nxt[j], row[j + 1])
    out = []
    i = j = 0
    while i < n and j < m:
        if a[alo + i] == bs[j]:
            out.append((alo + i, blo + j))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return out
