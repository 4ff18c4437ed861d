"""The report's charts as SVG, drawn by pygal from plain data (no browser, no script in the page).

Every drawn bar, cell or job carries its figures as ``data-*`` attributes (rank, part, bytes ...)
and a ``<title>`` the browser shows on hover, so a test (or a reader's script) can check a chart
against the ``--json`` summary.  pygal's own tooltip script (loaded from the network) and its
configuration script are left out; chart ids are fixed, so the same input gives the same page.
"""

from __future__ import annotations


from ...analysis.cost import human_bytes as human
from ...ir.records import record

MEMORY_PARTS = (("parameters", "parameters"), ("gradients", "gradients"),
                ("optimizer_states", "optimizer states"), ("activations", "activations (model)"))
PART_COLORS = {"parameters": "#4e79a7", "gradients": "#f28e2b", "optimizer_states": "#59a14f",
               "activations": "#b7b7b7"}
JOB_COLORS = {"forward": "#4e79a7", "backward": "#e15759", "backward_b": "#e15759", "backward_w": "#f1a3a5",
              "optimizer": "#59a14f", "send": "#edc948", "recv": "#edc948"}
IDLE_COLOR = "rgba(0,0,0,0.06)"
A_B_COLORS = ("#9c9c9c", "#4e79a7")  # diff pages: A grey, B blue
PER_RANK_BARS = 16  # over this many ranks, ranks alike share a bar (as the text summaries merge rows)
HEAT_CELLS = 32  # over this many ranks, the heat map shows blocks of ranks


def bytes_label(n: int) -> str:
    """``2.2 KiB (2272 B)``; exact bytes alone below 1 KiB."""
    return human(n) + (f" ({n} B)" if abs(n) >= 1024 else "")


def _style(colors: tuple[str, ...]):
    from pygal.style import Style

    return Style(background="white", plot_background="white", foreground="#333", foreground_strong="#111",
                 foreground_subtle="#999", opacity=".9", opacity_hover="1", transition="0ms",
                 font_family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif",
                 guide_stroke_color="#bbb", major_guide_stroke_color="#999", label_font_size=11, major_label_font_size=11, legend_font_size=12, title_font_size=14,
                 colors=colors or ("#4e79a7",))


def _quiet(root):
    """pygal's comments (a date) and scripts out: the page stays the same for the same input."""
    for parent in [root, *root.iter()]:
        for child in list(parent):
            if not isinstance(child.tag, str) or child.tag in ("script", "{http://www.w3.org/2000/svg}script"):
                parent.remove(child)
    return root


class _Chart:
    """A pygal chart whose drawn values (``g.bar``/``g.dots``, each with its ``<title>``) get their
    figures as ``data-*`` attributes, in drawing order (checked against the titles)."""

    def __init__(self, kind: str, chart_id: str, colors: tuple[str, ...] = (), **config) -> None:
        import pygal

        cfg = dict(js=[], disable_xml_declaration=True, width=640, height=300, margin=8, spacing=8,
                   legend_at_bottom=True, legend_box_size=10, explicit_size=True, truncate_legend=-1,
                   truncate_label=-1, style=_style(colors), classes=["pygal-chart", "distc-chart"])
        cfg.update(config)
        self.chart = getattr(pygal, kind)(**cfg)
        self.chart.uuid = chart_id  # the <svg id> (pygal draws a random one)
        self.chart.add_xml_filter(_quiet)
        self.chart.add_xml_filter(self._label)
        self.data: list[tuple[str, dict]] = []  # (title, data attributes) of each drawn value

    def add(self, title: str, values: list) -> None:
        """``values``: (pygal value dict with a ``tooltip``, {data attribute: value}) or None (a gap)."""
        self.chart.add(title, [v if v is None else v[0] for v in values])
        self.data += [(v[0]["tooltip"], v[1]) for v in values if v is not None]

    def _label(self, root):
        def title(g):
            return next((c.text for c in g if isinstance(c.tag, str) and c.tag.endswith("title")), None)

        # a gap (None) of a stacked chart is drawn too, without a title: not a value
        drawn = [g for g in root.iter() if g.get("class") in ("bar", "dots") and title(g) is not None]
        if len(drawn) != len(self.data):
            raise AssertionError(f"chart {self.chart.uuid}: {len(drawn)} drawn, {len(self.data)} values")
        for g, (want, attrs) in zip(drawn, self.data):
            if title(g) != want:
                raise AssertionError(f"chart {self.chart.uuid}: drawn {title(g)!r}, expected {want!r}")
            for k, v in attrs.items():
                g.set(f"data-{k}", str(v))
        return root

    def render(self) -> str:
        return self.chart.render(is_unicode=True)


def _axis_max(values: list[int]) -> int:
    return max([*values, 1])


# ------------------------------------------------------------------------------------ memory
def group_name(ranks: list[int]) -> str:
    """``0,2`` as distc shard's tables print a group; a long one as ranges (``0-511``)."""
    from ..shard_ranks import format_ranks

    return ",".join(map(str, ranks)) if len(ranks) <= 8 else format_ranks(ranks)


def axis_label(ranks: list[int], name: str, width: int = 18) -> str:
    """A rank group's name on an axis: short enough for the chart (the data attributes and hover
    titles keep the whole name)."""
    text = f"rank{'s' * (len(ranks) > 1)} {name}"
    return text if len(text) <= width else f"{len(ranks)} ranks {name[:width - 12]}…"


def rank_groups(ranks: list[int], key, many: int = PER_RANK_BARS) -> list[list[int]]:
    """Up to ``many`` ranks: one group a rank.  Above, ranks alike (equal ``key(rank)``) share one
    bar, as the text summaries merge equal rows of many ranks."""
    if len(ranks) <= many:
        return [[r] for r in ranks]
    groups: dict = {}
    for r in ranks:
        groups.setdefault(key(r), []).append(r)
    return sorted(groups.values())


def memory_chart(chart_id: str, memory: dict[int, dict[str, int]], title: str, y_max: int | None = None,
                 stage: int | None = None, width: int = 640, height: int = 300, legend: bool = True,
                 x_title: str | None = None) -> str:
    """Per-rank memory as stacked bars, one bar a rank (over 16 ranks: one bar for the ranks alike,
    ``data-rank`` then names them, e.g. ``0-255``), one segment a part (parameters, gradients,
    optimizer states, activations); ``y_max`` gives several charts one scale."""
    from ..shard_ranks import format_ranks

    ranks = sorted(memory)
    parts = [(k, label) for k, label in MEMORY_PARTS if any(memory[r].get(k) for r in ranks)] or \
        list(MEMORY_PARTS[:3])
    groups = rank_groups(ranks, lambda r: tuple(memory[r].get(k, 0) for k, _ in parts))
    names = [format_ranks(g) for g in groups]
    top = y_max or _axis_max([sum(memory[r].get(k, 0) for k, _ in parts) for r in ranks])
    chart = _Chart("StackedBar", chart_id, tuple(PART_COLORS[k] for k, _ in parts), title=title,
                   width=width, height=height, range=(0, top), value_formatter=human, show_legend=legend,
                   max_scale=6, x_title=x_title,
                   x_labels=[n if x_title else axis_label(g, n) for g, n in zip(groups, names)],
                   x_label_rotation=-40 if len(groups) > 8 else 0, show_minor_x_labels=len(groups) <= 32)
    extra = {"stage": stage} if stage is not None else {}
    for k, label in parts:
        chart.add(label, [({"value": memory[g[0]].get(k, 0),
                            "tooltip": f"rank{'s' * (len(g) > 1)} {n}: {label} {bytes_label(memory[g[0]].get(k, 0))}"},
                           {"rank": n, "part": k, "bytes": memory[g[0]].get(k, 0), **extra})
                          for g, n in zip(groups, names)])
    return chart.render()


def stage_charts(stages: dict[int, dict[int, dict[str, int]]], chosen: int) -> list[tuple[int, str]]:
    """Stages 0-3 side by side on one scale: ``[(stage, svg)]``."""
    top = _axis_max([sum(v for k, v in m.items() if k in PART_COLORS) for per in stages.values() for m in per.values()])
    return [(s, memory_chart(f"stage-{s}", per, f"ZeRO stage {s}" + (" (chosen)" if s == chosen else ""),
                             y_max=top, stage=s, width=300, height=250, legend=False, x_title="rank"))
            for s, per in sorted(stages.items())]


# ---------------------------------------------------------------------------------- traffic
def _ramp(frac: float) -> str:
    """White to dark blue (``frac`` 0..1), the heat map's colour scale."""
    lo, hi = (0xf7, 0xfb, 0xff), (0x08, 0x30, 0x6b)
    f = min(max(frac, 0.0), 1.0) ** 0.5  # square root: small flows stay visible next to big ones
    return "#" + "".join(f"{round(a + (b - a) * f):02x}" for a, b in zip(lo, hi))


def heat_map(chart_id: str, ranks: list[int], traffic: dict[int, dict[int, int]], many: int = HEAT_CELLS) -> str:
    """Rank x rank: a row per sending rank, a column per receiving rank, the colour the bytes sent
    (every cell drawn; 0 B pale grey).  Over ``many`` ranks, blocks of neighbouring ranks (rows
    and columns ``0-15`` ...): a cell is what one block sends the other."""
    from ..shard_ranks import format_ranks

    size_of = -(-len(ranks) // many) if len(ranks) > many else 1
    blocks = [ranks[i:i + size_of] for i in range(0, len(ranks), size_of)]
    names = [format_ranks(b) for b in blocks]
    cells = [[sum(traffic.get(s, {}).get(d, 0) for s in bs for d in bd) for bd in blocks] for bs in blocks]
    top = max([b for row in cells for b in row] + [1])
    size = max(220, min(640, 40 * len(blocks) + 80))
    chart = _Chart("Dot", chart_id, ("#08306b",) * max(len(blocks), 1), title="bytes sent, row to column",
                   width=size + 60 + 20 * (size_of > 1), height=size, show_legend=False,
                   x_labels=[n if len(n) <= 12 else n[:11] + "…" for n in names],
                   x_title="to rank", y_title="from rank", show_x_guides=False, show_y_guides=False,
                   x_labels_major_count=16, show_minor_x_labels=len(blocks) <= 32,
                   x_label_rotation=-40 if size_of > 1 else 0)
    for src, row in zip(names, cells):
        chart.add(axis_label(blocks[names.index(src)], src) if size_of == 1 else src,
                  [({"value": 1, "formatter": lambda _v, b=b: bytes_label(b),
                     "color": _ramp(b / top) if b else "#eeeeee",
                     "tooltip": f"rank {src} -> rank {dst}: {bytes_label(b)}"},
                    {"from": src, "to": dst, "bytes": b}) for dst, b in zip(names, row)])
    return chart.render()


def group_chart(chart_id: str, groups: list[dict]) -> str:
    """Collectives per group and kind: bytes sent by the group's ranks together, a bar each."""
    groups = groups[::-1]  # pygal draws the first bar at the bottom: the list reads top down
    label = {id(g): f"{g['kind']} [{group_name(g['group'])}]" for g in groups}
    chart = _Chart("HorizontalBar", chart_id, ("#76b7b2",), title="bytes sent per group and kind (all its ranks)",
                   height=max(160, 26 * len(groups) + 80), show_legend=False, value_formatter=human, max_scale=6,
                   x_labels=[label[id(g)] if len(label[id(g)]) <= 32 else label[id(g)][:31] + "…" for g in groups])
    chart.add("bytes", [({"value": g["bytes_sent"],
                          "tooltip": f"{label[id(g)]}: {g['count']} ops a rank, "
                                     f"{bytes_label(g['bytes_sent'])} sent by its ranks"},
                         {"kind": g["kind"], "group": ",".join(map(str, g["group"])), "count": g["count"],
                          "bytes": g["bytes_sent"]}) for g in groups])
    return chart.render()


# --------------------------------------------------------------------------------- timeline
@record(frozen=True)
class Job:
    """One job of a rank's pipeline schedule: its type (forward, backward, optimizer ...), the
    micro-batch, when it starts and ends (modelled time units), and how long it waits inside (a
    receive whose send comes later: not busy)."""

    job: str
    micro_batch: int
    start: float
    end: float
    idle: float = 0.0


def bubble_fraction(schedule: dict[int, list[Job]]) -> float:
    """The idle share of the ranks' time over the step (from 0, or an earlier first start, to the
    last job's end): between jobs, and waiting inside them."""
    end = max((j.end for jobs in schedule.values() for j in jobs), default=0.0)
    start = min([0.0] + [j.start for jobs in schedule.values() for j in jobs])
    span = (end - start) * len(schedule)
    busy = sum(j.end - j.start - j.idle for jobs in schedule.values() for j in jobs)
    return 0.0 if span <= 0 else max(0.0, 1 - busy / span)


def job_letter(job: str) -> str:
    """F forward, B backward (its input-gradient part too), W weight gradient, O optimizer, R/S
    receive/send jobs."""
    return {"backward_w": "W"}.get(job.rstrip("0123456789"), job[:1].upper())


def job_color(job: str) -> str:
    """Forward blue, backward red (its weight-gradient part pale), optimizer green, send/recv yellow."""
    name = job.rstrip("0123456789")
    for prefix, color in (("recv", JOB_COLORS["recv"]), ("send", JOB_COLORS["send"])):
        if name.startswith(prefix):
            return color
    return JOB_COLORS.get(name, "#af7aa1")


def _segments(jobs: list[Job], t0: float) -> list[tuple[float, Job | None]]:
    """A rank's jobs in time order with the idle gaps between them (None)."""
    at, out = t0, []
    for j in sorted(jobs, key=lambda j: j.start):
        if j.start > at:
            out.append((j.start - at, None))
        out.append((j.end - j.start, j))
        at = max(at, j.end)
    return out


def timeline_chart(chart_id: str, name: str, schedule: dict[int, list[Job]], bubble: float | None = None) -> str:
    """Per rank a row of jobs in time, micro-batch by micro-batch (``F0``, ``B0`` ...); idle time
    (the bubbles) drawn as pale segments."""
    from ..shard_ranks import format_ranks

    t0 = min((j.start for jobs in schedule.values() for j in jobs), default=0.0)
    groups = rank_groups(sorted(schedule), lambda r: tuple(sorted(schedule[r], key=lambda j: j.start)))
    names = {g[0]: format_ranks(g) for g in groups}  # ranks with the same jobs share a row (over 16)
    labels = {g[0]: axis_label(g, names[g[0]]) for g in groups}
    ranks = [g[0] for g in groups][::-1]  # pygal draws the first row at the bottom: rank 0 on top
    rows = {r: _segments(schedule[r], t0) for r in ranks}
    depth = max(map(len, rows.values()), default=0)
    span = max((j.end for jobs in schedule.values() for j in jobs), default=t0) - t0
    tiny = span / 40  # a job shorter than this is drawn without its label (they would overlap)
    chart = _Chart("HorizontalStackedBar", chart_id, ("#4e79a7",) * max(1, depth),
                   title=f"{name}: bubble {100 * (bubble_fraction(schedule) if bubble is None else bubble):.1f}%",
                   show_legend=False,
                   height=max(140, 34 * len(ranks) + 70), x_labels=[labels[r] for r in ranks],
                   value_formatter=lambda v: f"{v:g}", print_values=True, print_values_position="center",
                   print_zeroes=False, spacing=4, x_title="time (as modelled)")
    for k in range(depth):
        vals: list = []
        for r in ranks:
            if k >= len(rows[r]):
                vals.append(None)
                continue
            dur, j = rows[r][k]
            if j is None:
                vals.append(({"value": dur, "style": f"fill:{IDLE_COLOR};stroke:none", "formatter": lambda _v: "",
                              "tooltip": f"rank {names[r]}: idle {dur:g}"}, {"rank": names[r], "idle": f"{dur:g}"}))
                continue
            color = job_color(j.job)
            vals.append(({"value": dur, "style": f"fill:{color};stroke:#fff;stroke-width:1.5",
                          "formatter": lambda _v, j=j: f"{job_letter(j.job)}{j.micro_batch}" if j.end - j.start >= tiny else "",
                          "tooltip": f"rank {names[r]}: {j.job} micro-batch {j.micro_batch}, {j.start:g}-{j.end:g}"
                                     + (f" (waits {j.idle:g})" if j.idle else "")},
                         {"rank": names[r], "job": j.job, "mb": j.micro_batch, "start": f"{j.start:g}", "end": f"{j.end:g}"}))
        chart.add(f"segment {k}", vals)
    return chart.render()


# ------------------------------------------------------------------------------------ diffs
def compare_chart(chart_id: str, title: str, labels: list[str], a: list[int], b: list[int], names: tuple[str, str],
                  as_bytes: bool = True) -> str:
    """A next to B, one pair of bars a label (collectives per kind, memory parts ...)."""
    fmt = human if as_bytes else (lambda v: f"{v:g}")
    chart = _Chart("Bar", chart_id, A_B_COLORS, title=title, value_formatter=fmt, x_labels=labels, width=390, max_scale=8,
                   height=280, x_label_rotation=-20 if len(labels) > 4 else 0, legend_at_bottom_columns=1)
    for side, name, vals in (("a", names[0], a), ("b", names[1], b)):
        chart.add(name, [({"value": v, "tooltip": f"{name}: {lab} {bytes_label(v) if as_bytes else v}"},
                          {"side": side, "label": lab, "value": v}) for lab, v in zip(labels, vals)])
    return chart.render()
