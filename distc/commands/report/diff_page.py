"""``distc diff A B --html PAGE``: the diff as a page -- the differing ops side by side (A left,
B right; added, removed, changed with their attribute-level changes) and the summary's figures
(collectives per kind, bytes sent, memory per rank) as charts, program by program."""

from __future__ import annotations

import os

from .charts import compare_chart
from .page import environment

MAX_ROWS = 5000  # differing ops shown per program (the text report has them all)
MEMORY_KEYS = (("parameters", "parameters"), ("gradients", "gradients"), ("optimizer_states", "optimizer states"),
               ("total", "memory total"))


def _rows(diffs, describe) -> list[dict]:
    """The page's rows, side by side: a changed op is one row (A's line left, B's right, then each
    change); a run of removed and added ops between two changed ones shares rows, removed ops on
    the left and added ops on the right, each side in its own program's order (as side-by-side
    diffs align them)."""
    def side(d, op):
        return {"kind": d.kind, "op": d.op, "line": op.loc[0] if op.loc else None, "text": describe(op)}

    rows: list[dict] = []
    run: dict[str, list] = {"removed": [], "added": []}

    def flush() -> None:
        left, right = run["removed"], run["added"]
        for i in range(max(len(left), len(right))):
            a = side(left[i], left[i].a) if i < len(left) else None
            b = side(right[i], right[i].b) if i < len(right) else None
            rows.append({"kind": " ".join(x["kind"] for x in (a, b) if x), "a": a, "b": b, "changes": []})
        left.clear()
        right.clear()

    for d in diffs:
        if d.kind in run:
            run[d.kind].append(d)
            continue
        flush()
        rows.append({"kind": d.kind, "a": side(d, d.a), "b": side(d, d.b),
                     "changes": [{"name": c.name, "what": c.what, "a": c.a, "b": c.b} for c in d.changes]})
    flush()
    return rows


def _charts(k: int, sa: dict, sb: dict, names: tuple[str, str]) -> list[str]:
    kinds = sorted(set(sa["by_kind"]) | set(sb["by_kind"]))
    zero = {"count": 0, "bytes_sent": 0}
    out = []
    if kinds:
        out.append(compare_chart(f"p{k}-counts", "collectives per kind (ops)", kinds,
                                 [sa["by_kind"].get(x, zero)["count"] for x in kinds],
                                 [sb["by_kind"].get(x, zero)["count"] for x in kinds], names, as_bytes=False))
        out.append(compare_chart(f"p{k}-bytes", f"bytes sent per kind (rank {sa['rank']} / {sb['rank']})",
                                 kinds + ["total"],
                                 [sa["by_kind"].get(x, zero)["bytes_sent"] for x in kinds] + [sa["bytes_sent"]],
                                 [sb["by_kind"].get(x, zero)["bytes_sent"] for x in kinds] + [sb["bytes_sent"]], names))
    if sa["memory"] or sb["memory"]:
        ma, mb = sa["memory"] or {}, sb["memory"] or {}
        out.append(compare_chart(f"p{k}-memory", "memory per rank", [lab for _, lab in MEMORY_KEYS],
                                 [ma.get(key, 0) for key, _ in MEMORY_KEYS], [mb.get(key, 0) for key, _ in MEMORY_KEYS],
                                 names))
    return out


def diff_page(name_a: str, name_b: str, programs: list[tuple], equal: bool, command: str,
              counts: tuple[int, int]) -> str:
    """``programs``: (DiffResult, (summary A, summary B) or None) for each program pair."""
    from ...analysis.diff.report import describe

    short = (os.path.basename(name_a), os.path.basename(name_b))
    names = short if short[0] != short[1] else (name_a, name_b)
    sections = []
    for k, (res, sums) in enumerate(programs, 1):
        rows = _rows(res.diffs[:MAX_ROWS], describe)
        sections.append({
            "k": k, "equal": res.equal, "counts": res.counts(), "n_a": res.n_a, "n_b": res.n_b, "rows": rows,
            "shown": min(len(res.diffs), MAX_ROWS),
            "hidden": max(0, len(res.diffs) - MAX_ROWS),
            "rings": {a: b for a, b in sorted(res.rings.items()) if a != b},
            "sums": sums, "charts": _charts(k, *sums, names) if sums else [],
            "kinds": sorted(set(sums[0]["by_kind"]) | set(sums[1]["by_kind"])) if sums else []})
    return environment().get_template("diff.html.j2").render(
        a=name_a, b=name_b, names=names, sections=sections, equal=equal, command=command, counts=counts,
        memory_keys=MEMORY_KEYS)
