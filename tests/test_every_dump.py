"""The inventory of stored dumps (tests/dumpsdata.py): every file of the test data is a dump or
named as something else, every container is read, and what it holds; ``distc fmt --check`` on all
of them (340 MB of text) is tests/oracle/test_every_dump.py (make test-oracle)."""

from __future__ import annotations

import collections

import dumpsdata as D


def test_every_file_is_a_dump_or_named_otherwise():
    unknown = [str(p.relative_to(D.ROOT)) for p in D.files() if D.kind(p) == "unknown"]
    assert not unknown, f"neither a dump nor a known other file (name it in dumpsdata.KINDS): {unknown[:10]}"
    for p in D.files():
        if D.kind(p) == "archive":  # besides the programs: Paddle's messages and job lists
            rest = [n for n in D.members(p) if not n.endswith(".ir")]
            assert all(n.endswith(".txt") for n in rest), (p, rest[:5])
        elif D.kind(p) == "store":  # every stored text has a name
            assert D.manifest(p.parent).get(p.name[:-3]), p


def test_the_walk_finds_every_container():
    kinds = collections.Counter(D.kind(p) for p in D.files())
    # the inventory as it stood when this test was written (files are added, rarely removed)
    assert kinds["dump"] >= 1650 and kinds["gz"] >= 45 and kinds["store"] >= 550 and kinds["archive"] >= 14
    dumps = D.stored()
    assert len(dumps) >= 2600
    groups = collections.Counter(D.group(w) for w, _ in dumps.values())
    for g in ("oracle/llm", "oracle/fusion", "oracle/sched", "oracle/models", "oracle/pp", "oracle/stage1",
              "oracle/reshard", "oracle/dumps", "oracle/syntax", "corpus/paddle-3.3.1", "corpus/legacy", "bench/data"):
        assert groups[g], g
    where = [w for w, _ in dumps.values()]
    for part in ("models/mlp.tar.xz:mlp/mlp_dp2mp2_momentum.s0.r0.before_partition.ir",  # <#AttrNull> entries
                 "pfllama.tar.xz:", "pfqwen2.tar.xz:", "oracle/dumps/log_mixed.log"):
        assert any(part in w for w in where), part
    # a store's Paddle messages (a crash text) are not programs
    assert not any(d.startswith(b"CRASH") or b"Segmentation fault" in d[:200] for _, d in dumps.values())
