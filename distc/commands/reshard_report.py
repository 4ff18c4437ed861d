"""What ``distc reshard`` reports on stderr: the communication each rank does and (``--explain``)
which function lowered what -- as text, or as one JSON object (``--json``).  With more than
:data:`PER_RANK_ROWS` ranks the per-rank rows are summarised (a 512-rank run prints a few lines):
equal rows of different ranks become one row naming the ranks, bytes per rank become a spread.
Each rank's part is its :class:`distc.pipeline.RankResult` (records, steps, notes, rings)."""

from __future__ import annotations

import json

from ..analysis.cost import human_bytes
from ..ir.dist import layout_name, ranks_text
from ..pipeline.inputs import format_ranks
from .shard_report import PER_RANK_ROWS, spread


def _group(ranks) -> str:
    return ranks_text(ranks)


def collective_rows(res) -> list[dict]:
    rows = []
    for c in res.collectives:
        rows.append({"op": c.op.split(".", 1)[-1], "group": list(c.ranks), "ring_id": c.ring_id,
                     "local_shape": list(c.local_shape), "dtype": c.dtype, "nbytes": c.nbytes,
                     "bytes_sent": c.moved if c.runs else 0, "runs": c.runs, "function": c.function})
    return rows


def _buffer(row: dict) -> str:
    if not row["runs"]:
        return "(rank not in group)"
    shape = "x".join(map(str, row["local_shape"])) or "scalar"
    return f"{shape}x{row['dtype']} ({human_bytes(row['nbytes'])})"


def summary(con, results: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    rows = {r: collective_rows(res) for r, res in results.items()}
    several = len(results) > 1
    only = "" if several else f" (rank {next(iter(results))})"
    if not any(rows.values()):
        con.print(Text("no communication: every rank only computes locally" + only))
        return
    table = Table(title="communication" + only + (f", {len(results)} ranks" if several else ""), title_justify="left")
    if len(results) <= PER_RANK_ROWS:
        cols = (["rank"] if several else []) + ["op", "group", "ring", "buffer", "bytes sent", "function"]
        for c in cols:
            table.add_column(c, justify="right" if c in ("rank", "ring", "bytes sent") else "left")
        for r, rs in rows.items():
            for x in rs:
                cells = [x["op"], _group(x["group"]), str(x["ring_id"]), _buffer(x),
                         human_bytes(x["bytes_sent"]) if x["runs"] else "-", x["function"]]
                table.add_row(*(Text(c) for c in ([str(r)] if several else []) + cells))
    else:  # one row per kind of step: which ranks do it, over how many groups
        for c in ("op", "ranks", "groups", "buffer", "bytes sent (each)", "function"):
            table.add_column(c, justify="right" if c.startswith("bytes") else "left")
        agg: dict[tuple, tuple[set, set]] = {}
        for r, rs in rows.items():
            for x in rs:
                ranks, groups = agg.setdefault((x["op"], _buffer(x), x["bytes_sent"], x["function"]), (set(), set()))
                ranks.add(r)
                groups.add(tuple(x["group"]))
        for (op, buf, sent, fn), (ranks, groups) in agg.items():
            sizes = {len(g) for g in groups}
            gtext = _group(next(iter(groups))) if len(groups) == 1 else \
                f"{len(groups)} groups of {'/'.join(map(str, sorted(sizes)))}"
            table.add_row(*(Text(c) for c in (op, format_ranks(ranks), gtext, buf, human_bytes(sent), fn)))
    con.print(table)
    total = {r: sum(x["bytes_sent"] for x in rs) for r, rs in rows.items()}
    if len(results) <= PER_RANK_ROWS:
        con.print(Text("bytes sent per rank: " + ", ".join(f"rank {r}: {human_bytes(b)}" for r, b in total.items())))
    else:
        con.print(Text("bytes sent per rank: " + spread(total)))


def decisions(res) -> list[dict]:
    out = []
    for s in res.steps:
        fn = s.function
        out.append({"line": s.loc[0] if s.loc else None, "from": layout_name(s.src),
                    "to": layout_name(s.dst), "function": fn,
                    "origin": "paddle" if s.paddle else ("distc" if fn[:1] != "(" else ""),
                    "skipped": list(s.tried),
                    "inserted": [n.split(".", 1)[-1] for n in s.ops]})
    return out


def _rings(res) -> list:
    return sorted((res.rings or {}).items())


def _ring_table(res) -> str:
    rings = _rings(res)
    if len(rings) > PER_RANK_ROWS:  # (Paddle makes a ring for every group of a mesh dim: 256 on 256x256)
        shown = [f"{i}={_group(g)}" for i, g in rings[:3]] + ["...", f"{rings[-1][0]}={_group(rings[-1][1])}"]
        return f"ring ids ({len(rings)} rings; --json lists them): " + ", ".join(shown)
    return "ring ids: " + ", ".join(f"{i}={_group(g)}" for i, g in rings) if rings else ""


def _explain_lines(res) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    steps = decisions(res)
    if not steps:
        lines.append(("no dist_op.reshard to lower", ""))
    for s in steps:
        where = f"line {s['line']}: " if s["line"] else ""
        lines.append((f"{where}{s['from']} -> {s['to']}", "bold"))
        origin = {"paddle": " (Paddle 3.3.1)", "distc": " (distc extension)"}.get(s["origin"], "")
        lines.append((f"  lowered by: {s['function']}{origin}", ""))
        lines.extend((f"  skipped: {t}", "") for t in s["skipped"])
        if s["inserted"]:
            lines.append(("  inserted: " + ", ".join(s["inserted"]), ""))
    lines.extend((f"note: {n}", "") for n in res.notes)
    return lines


def explain(con, results: dict) -> None:
    """One block per set of ranks that lowered alike (one block for a single rank)."""
    from rich.text import Text

    for part in (_explain_lines, lambda res: [(t, "")] if (t := _ring_table(res)) else []):
        groups: dict[tuple, list[int]] = {}
        for r, res in results.items():
            groups.setdefault(tuple(part(res)), []).append(r)
        items = list(groups.items())
        if len(results) > PER_RANK_ROWS and len(items) > 1 and part is not _explain_lines:
            con.print(Text(f"ring ids: {len(items)} different tables over {len(results)} ranks (--json lists "
                           "each rank's)"))
            continue
        if len(items) > PER_RANK_ROWS:
            con.print(Text(f"{len(items) - 2} more sets of ranks lowered differently (--json lists every rank)"))
            items = items[:2]
        for lines, ranks in items:
            if len(results) == 1:
                head = ""
            else:
                head = f"rank{'s' if len(ranks) > 1 else ''} {format_ranks(ranks)}: "
            for text, style in lines:
                con.print(Text(text if text.startswith("  ") else head + text, style=style))


def to_json(results: dict, warnings: list[str] = ()) -> str:
    doc = {"command": "reshard", "ranks": {}, "warnings": list(warnings)}
    for r, res in results.items():
        rows = collective_rows(res)
        doc["ranks"][str(r)] = {"collectives": rows, "bytes_sent": sum(x["bytes_sent"] for x in rows),
                                "decisions": decisions(res), "notes": list(res.notes),
                                "ring_ids": {str(i): list(g) for i, g in _rings(res)}}
    return json.dumps(doc, separators=(",", ":"))
