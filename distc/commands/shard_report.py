"""What ``distc shard`` reports on stderr: per rank the collectives inserted (the reshard pass's
records, totalled by :func:`distc.analysis.cost.totals`) and the memory before and after; for
several ranks one row a rank and the spread across ranks; ``--explain`` (the passes run and what
they decided, ranks that did alike in one block); ``--json`` (one line, the last one distc prints).
Everything comes from the pipeline's results (:class:`distc.pipeline.RankResult`)."""

from __future__ import annotations

from collections.abc import Callable

from ..analysis.cost import human_bytes as human
from ..console import Table, err_console
from ..ir.dist import ranks_text
from ..pipeline import RankResult, ShardPipeline
from ..pipeline.inputs import format_ranks

PER_RANK_ROWS = 16  # above this many ranks the summary groups ranks whose figures are equal


def summary(res: RankResult, stage: int, axis) -> None:
    con = err_console()
    rank, before, after = res.rank, res.memory_before, res.memory_after
    assert before is not None and after is not None
    if res.collectives is not None:
        t = Table(title=f"collectives inserted (rank {rank})")
        t.add_column("kind")
        t.add_column("group")
        t.add_column("count", justify="right")
        t.add_column("bytes sent by this rank", justify="right")
        agg = res.totals(by_group=True)
        for (kind, group), x in agg.items():
            n = x["bytes_sent"]
            t.add_row(kind, ranks_text(group), str(x["count"]),
                      f"{n} B" if n < 1024 else f"{human(n)} ({n} B)")
        if not agg:
            t.add_row("(none)", "", "0", "0")
        con.print(t)
    m = Table(title=f"per-rank memory, rank {rank} (stage {stage}"
              + (" = stage 1, as in Paddle's static mode" if stage == 2 else "")
              + (f", sharding mesh dim {axis}" if axis is not None else "") + ")")
    for col in ("", "before", "after", "saved"):
        m.add_column(col, justify="right" if col else "left")
    for label, b, a in (("parameters", before.params, after.params), ("gradients", before.grads, after.grads),
                        ("optimizer states", before.states, after.states),
                        ("total", before.total, after.total)):
        m.add_row(label, human(b), human(a), human(b - a))
    con.print(m)
    saved = before.states - after.states
    pct = f" ({100 * saved / before.states:.1f}% of optimizer states)" if before.states else ""
    if stage in (1, 2) and not before.states:
        con.print(f"ZeRO-{stage} on rank {rank}: no optimizer states to shard (the optimizer keeps none); total "
                  f"per rank {before.total} -> {after.total} bytes", markup=False)
        return
    if stage == 3:
        saved = before.total - after.total
        pct = f" ({100 * saved / before.total:.1f}%: parameters, gradients and optimizer states)" \
            if before.total else ""
    con.print(f"ZeRO-{stage} saving on rank {rank}: {saved} bytes = {human(saved)}{pct}; "
              f"total per rank {before.total} -> {after.total} bytes", markup=False)


def exact_where_rounding_hides(values) -> Callable[[int], str]:
    """A byte formatter for ``values``: ``human_bytes``, with the exact count beside it wherever two
    different values would print the same (a difference between ranks is never hidden by rounding)."""
    seen: dict[str, set[int]] = {}
    for v in values:
        seen.setdefault(human(v), set()).add(int(v))
    clash = {h for h, vs in seen.items() if len(vs) > 1}
    return lambda v: f"{human(v)} ({int(v)} B)" if human(v) in clash else human(v)


def spread(values: dict[int, int]) -> str:
    import statistics

    lo = min(values, key=lambda r: (values[r], r))
    hi = max(values, key=lambda r: (values[r], -r))
    med = int(statistics.median(values.values()))
    if values[lo] == values[hi]:
        return f"{human(values[lo])} on every rank"
    b = exact_where_rounding_hides([values[lo], med, values[hi]])
    return f"min {b(values[lo])} (rank {lo}), median {b(med)}, max {b(values[hi])} (rank {hi})"


def rank_summary(results: dict[int, RankResult], stage: int, axis) -> None:
    """Per-rank totals (collectives, bytes sent, optimizer memory) and their spread across ranks."""
    con = err_console()
    rows = [{"rank": r, "collectives": x.num_collectives,
             "bytes_sent": x.bytes_sent, "memory_before": x.memory_before.total,  # type: ignore[union-attr]
             "memory_after": x.memory_after.total} for r, x in sorted(results.items())]  # type: ignore[union-attr]
    lowered = rows[0]["collectives"] is not None
    con.print(_rank_table(rows, lowered, stage, axis))
    if lowered:
        con.print("bytes sent per rank: " + spread({x["rank"]: x["bytes_sent"] for x in rows}), markup=False)
    con.print("memory per rank (parameters, gradients, optimizer states) after ZeRO-"
              f"{stage}: " + spread({x["rank"]: x["memory_after"] for x in rows}), markup=False)
    saved = {x["rank"]: x["memory_before"] - x["memory_after"] for x in rows}
    con.print(f"saved per rank: {spread(saved)}", markup=False)


def _rank_table(rows: list[dict], lowered: bool, stage: int, axis):
    """A row a rank; over :data:`PER_RANK_ROWS` ranks, a row for each set of ranks whose figures
    are all equal (``0-7,16-23``), by first rank, and over that many sets the first ones and a
    row counting the rest (``--json`` lists every rank)."""
    cols = ("collectives", "bytes_sent", "memory_before", "memory_after") if lowered else \
        ("memory_before", "memory_after")
    groups: dict[tuple, list[int]] = {}
    for x in rows:
        groups.setdefault(tuple(x[c] for c in cols) + ((x["rank"],) if len(rows) <= PER_RANK_ROWS else ()),
                          []).append(x["rank"])
    grouped = len(rows) > PER_RANK_ROWS
    many = f" in {len(groups)} group{'s' * (len(groups) > 1)} of equal figures" if grouped else ""
    t = Table(title=f"per rank ({len(rows)} ranks{many}, stage {stage}"
              + (f", sharding mesh dim {axis}" if axis is not None else "") + ")")
    t.add_column("ranks" if grouped else "rank", justify="left" if grouped else "right")
    if grouped:
        t.add_column("count", justify="right")
    for col in (("collectives", "bytes sent") if lowered else ()) + ("memory before", "memory after", "saved"):
        t.add_column(col, justify="right")
    items = sorted(groups.items(), key=lambda kv: kv[1][0])
    shown = [dict(zip(cols, key), saved=key[cols.index("memory_before")] - key[cols.index("memory_after")])
             for key, _ in items[:PER_RANK_ROWS]]
    fmt = {k: exact_where_rounding_hides([v[k] for v in shown])
           for k in ("bytes_sent", "memory_before", "memory_after", "saved") if lowered or k != "bytes_sent"}
    for v, (_, ranks) in zip(shown, items):
        cells = [_short_ranks(ranks), str(len(ranks))] if grouped else [str(ranks[0])]
        if lowered:
            cells += [str(v["collectives"]), fmt["bytes_sent"](v["bytes_sent"])]
        cells += [fmt[k](v[k]) for k in ("memory_before", "memory_after", "saved")]
        t.add_row(*cells)
    if len(items) > PER_RANK_ROWS:
        rest = items[PER_RANK_ROWS:]
        t.add_row(f"... {len(rest)} more groups", str(sum(len(r) for _, r in rest)),
                  *([""] * (len(t.columns) - 2)))
    return t


def _short_ranks(ranks: list[int]) -> str:
    """``0-7,16-23``: ranges; past a few, ``0,40,...,3960`` if evenly spaced, else the first
    ranges and the count of the rest."""
    text = format_ranks(ranks)
    parts = text.split(",")
    if len(parts) <= 6:
        return text
    if all(b - a == ranks[1] - ranks[0] for a, b in zip(ranks, ranks[1:])):
        return f"{ranks[0]},{ranks[1]},...,{ranks[-1]}"
    return ",".join(parts[:4]) + f",... ({len(parts) - 4} more ranges)"


def rank_json(res: RankResult) -> dict:
    before, after = res.memory_before, res.memory_after
    assert before is not None and after is not None
    mem = {name: {"parameters": m.params, "gradients": m.grads, "optimizer_states": m.states, "total": m.total}
           for name, m in (("before", before), ("after", after))}
    by_group = [{"kind": kind, "group": list(group), **x} for (kind, group), x in res.totals(by_group=True).items()]
    return {"rank": res.rank, "collectives": res.num_collectives,
            "bytes_sent": res.bytes_sent, "by_group": by_group, "memory": mem, "saved": res.saved}


def summary_json(pipe: ShardPipeline, stage: int, ranks: dict, notes: list[str], ran: list[str] = (),
                 fusion: dict | None = None, extra: dict | None = None) -> None:
    """``--json``: one line on stderr, the last one distc prints."""
    import json
    import sys

    sh = pipe.prepare()
    doc = {"command": "shard", "stage": stage, "sharding_axis": sh.ctx.stats.sharding_axis,
           "pipeline": list(sh.ran) + list(ran), "decisions": list(sh.notes) + list(dict.fromkeys(notes)),
           "warnings": pipe.diagnostics.warnings, **(extra or {}),
           "ranks": {str(r): x for r, x in sorted(ranks.items())}}
    if fusion is not None:
        doc["tensor_fusion"] = fusion
    sys.stderr.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")


def explain(pipe: ShardPipeline, results: dict) -> None:
    """The passes run and what they decided; ranks that did alike share one block."""
    import re

    sh = pipe.prepare()
    con = err_console()
    several = len(results) > 1
    groups: dict[tuple, list[int]] = {}
    for r, res in sorted(results.items()):
        ran, notes = res.ran, res.notes
        if several:  # the rank option is the rank itself (and left out for rank 0)
            ran = [re.sub(r"rank=\d+,?", "", x).replace(",}", "}").replace("{}", "") for x in ran]
            notes = [re.sub(rf"\brank {r}\b", "this rank", n) for n in notes]
        groups.setdefault((tuple(ran), tuple(notes)), []).append(r)
    for (ran, notes), ranks in groups.items():
        prefix = f"rank{'s' * (len(ranks) > 1)} {format_ranks(ranks)}: " if several else ""
        con.print(prefix + "pipeline: " + (", ".join(sh.ran + list(ran)) or "(nothing: stage 0, annotate only)"),
                  markup=False)
        for n in ([] if several else sh.notes) + list(notes):
            con.print("  " + n, markup=False)
    if several and sh.notes:
        con.print("every rank:", markup=False)
        for n in sh.notes:
            con.print("  " + n, markup=False)
