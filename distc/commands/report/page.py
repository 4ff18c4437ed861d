"""The report and diff pages: Jinja2 templates (``templates/``, HTML escaped everywhere but the
charts' SVG) filled from plain figures.  One self-contained file: styles inline, charts inline SVG,
no script, nothing fetched."""

from __future__ import annotations

from .charts import (bytes_label, group_chart, group_name, heat_map, memory_chart, rank_groups, stage_charts,
                     timeline_chart)
from .data import STAGES, ReportData


def environment():
    import jinja2

    from ... import __version__

    env = jinja2.Environment(loader=jinja2.PackageLoader("distc.commands.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["bytes"] = bytes_label
    env.filters["ranks"] = group_name
    env.globals["version"] = __version__
    return env


def report_page(d: ReportData) -> str:
    from ..shard_ranks import format_ranks

    doc = d.to_json()
    mem = {r: doc["ranks"][str(r)]["memory"] for r in d.ranks}
    groups = d.groups()
    counts = {r: doc["ranks"][str(r)]["collectives"] for r in d.ranks}
    sent = {r: d.bytes_sent(r) for r in d.ranks}
    # over 16 ranks, ranks with the same figures share a row (as in distc shard's summary)
    alike = rank_groups(d.ranks, lambda r: (tuple(mem[r].values()), counts[r], sent[r]))
    timelines = [(name, timeline_chart(f"timeline-{i}", name, s, d.bubble(name)), doc["schedules"][name]["bubble_fraction"],
                  sum(len(jobs) for jobs in s.values()))
                 for i, (name, s) in enumerate(d.schedules.items())]
    return environment().get_template("report.html.j2").render(
        d=d, mem=mem, groups=groups, rank_list=format_ranks(d.ranks), counts=counts, sent=sent,
        rank_rows=[(format_ranks(g), g[0]) for g in alike],
        memory_svg=memory_chart("memory", d.memory[d.stage], f"stage {d.stage}: memory per rank", stage=d.stage),
        stage_svgs=stage_charts(d.memory, d.stage),
        missing_stages=[(s, d.stage_notes.get(s, "not computed")) for s in STAGES if s not in d.memory],
        heat_svg=heat_map("heat-map", d.ranks, d.traffic),
        heat_max=max([b for row in d.traffic.values() for b in row.values()] + [0]),
        group_svg=group_chart("groups", groups) if groups else "", timelines=timelines)
