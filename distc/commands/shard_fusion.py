"""``distc shard --tensor-fusion``'s summary: the fused buffers (count, bytes, each rank's shard),
which rank updates which parameter (or which part of it), and the bytes each rank sends against
the unfused ZeRO-1 program of the same input (built on the side by the library pipeline)."""

from __future__ import annotations

from ..analysis.cost import human_bytes
from ..console import Table, err_console
from ..ir.core import Program
from ..ir.dist import ranks_text
from ..ir.records import replace


def unfused(program: Program, ranks: list[int], options) -> dict[int, tuple[int, int]]:
    """rank -> (collectives, bytes sent) of plain ZeRO at the same stage (``options`` without fusion)."""
    from ..pipeline import shard_ranks

    opts = replace(options, tensor_fusion=False, overlap=False, release_gradients=False,
                   comm_buffer_mb=256, annotate_only=False, dense=False)
    res = shard_ranks(program, ranks, options=opts)
    return {r: ((x.num_collectives or 0), x.bytes_sent or 0) for r, x in res.items()}


def summary_json(results: dict, base: dict[int, tuple[int, int]] | None, stage: int = 1) -> dict:
    """The fusion part of ``--json``: per rank its buffers and the unfused bytes."""
    out = {}
    for r, x in sorted(results.items()):
        if x.fusion is None:
            continue
        d = dict(x.fusion)
        if base and r in base:
            d[f"unfused_zero{3 if stage == 3 else 1}"] = {"collectives": base[r][0], "bytes_sent": base[r][1]}
        out[str(r)] = d
    return out


def print_summary(results: dict, base: dict[int, tuple[int, int]] | None, stage: int = 1) -> None:
    con = err_console()
    # the buffers of the ranks shown, each once (a sub-mesh's buffer, e.g. a MoE expert's, is on
    # its ranks only), in rank order
    bufs: dict[tuple, dict] = {}
    for _, x in sorted(results.items()):
        for b in (x.fusion or {}).get("buffers", []):
            bufs.setdefault((tuple(b["group"]), tuple(b["parameters"])), b)
    if not bufs:
        return
    groups = list(dict.fromkeys(tuple(b["group"]) for b in bufs.values()))
    t = Table(title=f"fused buffers ({len(bufs)}, sharding group " + ", ".join(ranks_text(g) for g in groups) + ")")
    cols = ["buffer"] + (["group"] if len(groups) > 1 else []) + ["parameters", "elements", "bytes",
                                                                   "shard per rank", "align"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("parameters", "group") else "right")
    for b in bufs.values():
        names = b["parameters"]
        shown = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
        t.add_row(str(b["buffer"]), *([ranks_text(tuple(b["group"]))] if len(groups) > 1 else []), shown,
                  str(b["elements"]), human_bytes(b["bytes"]), human_bytes(b["shard_bytes"]), f"{b['align_bytes']} B")
    con.print(t)
    o = Table(title="who updates each parameter (rank: elements of its piece)")
    o.add_column("parameter")
    o.add_column("updated on")
    for b in bufs.values():
        for name, who in b["owners"].items():
            o.add_row(name, ", ".join(f"{r}: {n}" for r, n in who))
    con.print(o)
    s = Table(title=f"bytes sent per rank: tensor fusion vs unfused ZeRO-{1 if stage == 2 else stage}")
    for col in ("rank", "collectives", "bytes sent", "unfused collectives", "unfused bytes sent"):
        s.add_column(col, justify="right")
    for r, x in sorted(results.items()):
        b = (base or {}).get(r)
        s.add_row(str(r), str((x.num_collectives or 0)), human_bytes(x.bytes_sent or 0),
                  "" if b is None else str(b[0]), "" if b is None else human_bytes(b[1]))
    con.print(s)
