"""What ``distc diff`` prints: one entry per differing op (its line in A and/or B, the
attribute-level changes), then a summary per program -- collectives and bytes one rank sends,
per-rank memory of parameters, gradients and optimizer states -- as text or as JSON."""

from __future__ import annotations

import os
import re

from ...ir.core import Operation, Program
from ..cost import collectives_in, human_bytes, totals
from ..memory import optimizer_memory
from .compare import DiffResult, OpDiff, short_type, vname

_RANK_RE = re.compile(r"(?:^|[._\-])r(?:ank)?[_\-]?(\d+)(?=[._\-]|$)")
_BANNER_RE = re.compile(r"^// -+ rank (\d+) -+$", re.M)
SHOWN_ATTRS = ("ring_id", "nranks", "peer", "root", "name")


def infer_rank(prog: Program, path: str | None, given: int | None) -> tuple[int, str]:
    """The rank a per-rank file is for: ``--rank``, else a ``// ----- rank N -----`` banner before
    the program (``reshard --all-ranks`` output), else a ``.rN.``/``rankN`` in the file name,
    else the lowest rank of the program's meshes (0 for a program without any)."""
    if given is not None:
        return given, "--rank"
    m = _BANNER_RE.search(getattr(prog, "head", "") or "")
    if m:  # a program of reshard --all-ranks output: '// ----- rank 3 -----'
        return int(m.group(1)), "its banner"
    if path:
        m = _RANK_RE.search(os.path.basename(path))
        if m:
            return int(m.group(1)), "file name"
    for op in prog.walk():
        d = op.dist_attr
        if d is not None and d.mesh.process_ids:
            return min(d.mesh.process_ids), "lowest rank of the first mesh"
    return 0, "default"


def summary(prog: Program, rank: int, how: str) -> dict:
    by_kind = totals(collectives_in(prog, rank))  # (a program from anywhere: its ops scanned)
    mem = optimizer_memory(prog, rank)
    return {
        "rank": rank, "rank_from": how, "ops": sum(1 for _ in prog.walk()),
        "collectives": sum(t["count"] for t in by_kind.values()),
        "bytes_sent": sum(t["bytes_sent"] for t in by_kind.values()),
        # collectives whose group size the program does not say (a dense op without nranks, on a
        # ring no other op sizes): left out of bytes_sent, never counted as 0 bytes
        "unsized": sum(t.get("unsized", 0) for t in by_kind.values()),
        "by_kind": by_kind,
        "memory": ({"parameters": mem.params, "gradients": mem.grads, "optimizer_states": mem.states,
                    "total": mem.total} if mem.rows else None),
    }


def describe(op: Operation) -> str:
    """``(%5) = pd_op.all_gather(%3) {nranks:2, ring_id:12} -> 8x256xf32[r]``: one line."""
    res = ", ".join(vname(r) for r in op.results)
    args = ", ".join(vname(v) for v in op.operands)
    attrs = ", ".join(f"{k}:{op.attrs[k]}" for k in SHOWN_ATTRS if k in op.attrs)
    types = ", ".join(short_type(r.type) for r in op.results)
    return (f"({res}) = " if res else "") + f"{op.name}({args})" + (f" {{{attrs}}}" if attrs else "") \
        + (f" -> {types}" if types else "")


def _line(op: Operation | None) -> int | None:
    return op.loc[0] if op is not None and op.loc else None


def _named(op: Operation | None) -> str:
    a = op.attrs.get("name") if op is not None else None
    return f" {a}" if a is not None and type(a).__name__ == "StrAttr" else ""


def _where(d: OpDiff, name_a: str, name_b: str) -> str:
    parts = []
    if d.a is not None:
        parts.append(f"{name_a}:{_line(d.a) or '?'}")
    if d.b is not None:
        parts.append(f"{name_b}:{_line(d.b) or '?'}")
    return ", ".join(parts)


def render_text(res: DiffResult, name_a: str, name_b: str, sums: tuple[dict, dict] | None) -> str:
    out: list[str] = []
    for d in res.diffs:
        if d.kind == "changed":
            out.append(f"changed {d.op}{_named(d.a)} at {_where(d, name_a, name_b)}")
            out.extend(f"    {c}" for c in d.changes)
        else:
            sign = "+" if d.kind == "added" else "-"
            out.append(f"{d.kind} {d.op} at {_where(d, name_a, name_b)}")
            out.append(f"  {sign} {describe(d.a or d.b)}")  # type: ignore[arg-type]
    c = res.counts()
    if res.equal:
        out.append(f"same program up to value names{'' if res.exact_rings else ' and ring ids'}"
                   f" ({res.n_a} ops{_rings_note(res)})")
    else:
        out.append(f"{len(res.diffs)} differences: {c['added']} added, {c['removed']} removed, "
                   f"{c['changed']} changed ops ({name_a}: {res.n_a} ops, {name_b}: {res.n_b} ops)")
    if sums is not None and not res.equal:
        out.extend(_summary_lines(name_a, name_b, *sums))
    return "\n".join(out) + "\n"


def _rings_note(res: DiffResult) -> str:
    moved = {a: b for a, b in res.rings.items() if a != b}
    if not moved:
        return ""
    return "; ring ids renamed: " + ", ".join(f"{a}->{b}" for a, b in sorted(moved.items()))


def _summary_lines(name_a: str, name_b: str, sa: dict, sb: dict) -> list[str]:
    if os.path.basename(name_a) != os.path.basename(name_b):  # column heads: the file names
        name_a, name_b = os.path.basename(name_a), os.path.basename(name_b)
    rank_a = f"rank {sa['rank']}" + ("" if sa["rank_from"] == "--rank" else f" ({sa['rank_from']})")
    rank_b = f"rank {sb['rank']}" + ("" if sb["rank_from"] == "--rank" else f" ({sb['rank_from']})")
    rows: list[tuple[str, str, str]] = [("", name_a, name_b), ("per rank", rank_a, rank_b),
                                        ("ops", str(sa["ops"]), str(sb["ops"])),
                                        ("collectives", str(sa["collectives"]), str(sb["collectives"]))]
    for kind in sorted(set(sa["by_kind"]) | set(sb["by_kind"])):
        ka = sa["by_kind"].get(kind, {"count": 0, "bytes_sent": 0})
        kb = sb["by_kind"].get(kind, {"count": 0, "bytes_sent": 0})
        rows.append((f"  {kind}", _kind_cell(ka), _kind_cell(kb)))
    rows.append(("bytes sent", _sent_cell(sa), _sent_cell(sb)))
    ma, mb = sa["memory"], sb["memory"]
    if ma or mb:
        for key, label in (("parameters", "parameters"), ("gradients", "gradients"),
                           ("optimizer_states", "optimizer states"), ("total", "memory total")):
            rows.append((label, _bytes(ma[key]) if ma else "-", _bytes(mb[key]) if mb else "-"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return ["summary"] + [f"  {r[0]:<{w0}}  {r[1]:>{w1}}  {r[2]}" for r in rows]


def _kind_cell(t: dict) -> str:
    """``5 (2.3 KiB)``; ``5 (size unknown)`` or ``5 (128 B + 2 of unknown size)`` where the
    program does not say a group's size (a dense program's all_reduce without nranks)."""
    unsized = t.get("unsized", 0)
    if not unsized:
        return f"{t['count']} ({human_bytes(t['bytes_sent'])})"
    if unsized == t["count"]:
        return f"{t['count']} (size unknown)"
    return f"{t['count']} ({human_bytes(t['bytes_sent'])} + {unsized} of unknown size)"


def _sent_cell(s: dict) -> str:
    unsized = s.get("unsized", 0)
    if not unsized:
        return _bytes(s["bytes_sent"])
    n = f"{unsized} collective{'s' if unsized > 1 else ''} of unknown group size"
    if unsized == s["collectives"]:
        return f"unknown ({n})"
    return f"{_bytes(s['bytes_sent'])} + {n}"


def _bytes(n: int) -> str:
    return human_bytes(n) + (f" ({n} B)" if n >= 1024 else "")


def to_json(res: DiffResult, name_a: str, name_b: str, sums: tuple[dict, dict] | None) -> dict:
    def entry(d: OpDiff) -> dict:
        e = {"kind": d.kind, "op": d.op, "a_line": _line(d.a), "b_line": _line(d.b)}
        if d.kind == "changed":
            e["changes"] = [{"what": c.what, "name": c.name, "a": c.a, "b": c.b} for c in d.changes]
        else:
            e["text"] = describe(d.a or d.b)  # type: ignore[arg-type]
        return e

    return {
        "a": name_a, "b": name_b, "equal": res.equal, "exact_rings": res.exact_rings,
        "ignored_attrs": list(res.ignored), "ops": {"a": res.n_a, "b": res.n_b}, "counts": res.counts(),
        "rings": {str(a): b for a, b in sorted(res.rings.items())},
        "differences": [entry(d) for d in res.diffs],
        "summary": {"a": sums[0], "b": sums[1]} if sums is not None else None,
    }
