"""``distc report`` and ``distc diff --html``: the figures on the page (every bar, cell, job and
table cell carries them as data attributes) equal the ``--json`` summary, which equals what
``distc shard --json`` reports; the page is self-contained and the same for the same input."""

from __future__ import annotations

import json
from markupsafe import escape
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from distc.analysis.cost import sent_to
from distc.cli import main
from distc.dialects.collectives import Collective

from conftest import DATA
from synthetic_schedule import schedule

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "mlp_dp2mp2_adamw.ir"
LLAMA = ROOT / "samples" / "llama_dp2mp2_adamw.ir"
STAGE1 = DATA / "corpus/paddle-3.3.1/stage1"
PARTS = ("parameters", "gradients", "optimizer_states", "activations")


def cli(*args, code: int = 0):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == code, (r.output, r.exception)
    return r


def last_json(r) -> dict:
    return json.loads(r.stderr.strip().splitlines()[-1])


class Figures(HTMLParser):
    """Every element with data-* attributes, with the id of the <svg>, <table> or <figure> it is in."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[str, str, dict]] = []  # (container id, tag, data attributes)
        self.stack: list[tuple[str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag in ("svg", "table", "figure", "section"):
            self.stack.append((tag, a.get("id") or ""))
        data = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        if data:
            where = next((i for t, i in reversed(self.stack) if i), "")
            self.items.append((where, tag, data))

    def handle_endtag(self, tag):
        if tag in ("svg", "table", "figure", "section") and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def of(self, where: str, tag: str | None = None) -> list[dict]:
        return [d for w, t, d in self.items if w == where and (tag is None or t == tag)]


def figures(html: str) -> Figures:
    f = Figures()
    f.feed(html)
    return f


@pytest.fixture(scope="module")
def sample_page(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    sched = d / "sched.json"
    sched.write_text(json.dumps({k: schedule(k) for k in ("FThenB", "1F1B")}))
    page = d / "page.html"
    r = cli("report", SAMPLE, "-o", page, "--json", "--schedule", sched)
    return page.read_text(), last_json(r), d


def test_memory_bars_equal_json(sample_page):
    html, doc, _ = sample_page
    f = figures(html)
    bars = f.of("chart-memory", "g")
    ranks = doc["ranks"]
    assert len(bars) == len(ranks) * 4  # parameters, gradients, optimizer states, activations
    for b in bars:
        assert int(b["bytes"]) == ranks[b["rank"]]["memory"][b["part"]]
    for s in "0123":
        bars = f.of(f"chart-stage-{s}", "g")
        assert len(bars) == len(ranks) * 4
        for b in bars:
            assert b["stage"] == s and int(b["bytes"]) == doc["stages"][s]["ranks"][b["rank"]][b["part"]]
    # the table: every rank's figures
    rows = f.of("rank-table", "td")
    assert sum(int(x["bytes"]) for x in rows if "bytes" in x) == sum(
        sum(m["memory"][k] for k in (*PARTS, "total")) + m["bytes_sent"] for m in ranks.values())


def test_heat_map_and_groups_equal_json(sample_page):
    html, doc, _ = sample_page
    f = figures(html)
    cells = f.of("chart-heat-map", "g")
    n = len(doc["ranks"])
    assert len(cells) == n * n
    for c in cells:
        assert int(c["bytes"]) == doc["ranks"][c["from"]]["sent_to"].get(c["to"], 0)
    for r, x in doc["ranks"].items():  # who sends what to whom adds up to what each rank sends
        assert sum(int(c["bytes"]) for c in cells if c["from"] == r) == x["bytes_sent"] > 0
        assert x["sent_to"].get(r, 0) == 0
    bars = f.of("chart-groups", "g")
    assert sorted((b["kind"], b["group"], int(b["count"]), int(b["bytes"])) for b in bars) == sorted(
        (g["kind"], ",".join(map(str, g["group"])), g["count"], g["bytes_sent"]) for g in doc["groups"])
    assert sum(g["bytes_sent"] for g in doc["groups"]) == sum(x["bytes_sent"] for x in doc["ranks"].values())


def test_timeline_jobs_and_bubbles_equal_json(sample_page):
    html, doc, _ = sample_page
    f = figures(html)
    for i, name in enumerate(("FThenB", "1F1B")):
        jobs = [x for x in f.of(f"chart-timeline-{i}", "g") if "job" in x]
        want = doc["schedules"][name]["ranks"]
        assert len(jobs) == sum(len(v) for v in want.values()) == 32
        for j in jobs:
            assert [j["job"], int(j["mb"]), float(j["start"]), float(j["end"])] in want[j["rank"]]
        idle = [x for x in f.of(f"chart-timeline-{i}", "g") if "idle" in x]
        assert idle, "the bubbles are drawn"
        assert doc["schedules"][name]["bubble_fraction"] == pytest.approx(3 / 7)  # (p-1)/(m+p-1)
    bub = [x for x in f.of("bubble-table", "td") if "bubble" in x]
    assert [float(x["bubble"]) for x in bub] == pytest.approx([3 / 7, 3 / 7])


def test_figures_equal_distc_shard(sample_page, tmp_path):
    """The report's per-rank figures are distc shard's: bytes sent and memory of every rank."""
    _, doc, _ = sample_page
    r = cli("shard", SAMPLE, "--all-ranks", "-o", tmp_path / "r{rank}.ir", "--json")
    shard = last_json(r)
    for rank, x in shard["ranks"].items():
        mine = doc["ranks"][rank]
        assert (mine["collectives"], mine["bytes_sent"]) == (x["collectives"], x["bytes_sent"])
        assert mine["memory"]["total"] == x["memory"]["after"]["total"]
        assert doc["stages"]["0"]["ranks"][rank]["total"] == x["memory"]["before"]["total"]
    assert doc["decisions"][:len(shard["decisions"])] == shard["decisions"]
    for stage in (0, 3):  # the other stages' bars: what distc shard --stage N says for that rank
        one = last_json(cli("shard", SAMPLE, "--rank", 1, "--stage", stage, "-o", tmp_path / "x.ir", "--json"))
        mem = one["ranks"]["1"]["memory"]["after"]
        assert {k: doc["stages"][str(stage)]["ranks"]["1"][k] for k in mem} == mem
        if stage == 3:
            by = {(g["kind"], tuple(g["group"])): g for g in one["ranks"]["1"]["by_group"]}
            assert by  # stage 3 gathers parameters: the report's stage-3 memory is the program's


def test_page_is_self_contained_and_deterministic(sample_page):
    html, _, d = sample_page
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""\b(?:src|href)\s*=|url\(""", html)
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {"http://www.w3.org/2000/svg"}
    again = d / "again.html"
    cli("report", SAMPLE, "-o", again, "--schedule", d / "sched.json", "--json")
    assert again.read_text().replace("again.html", "page.html") == html
    assert f'id="command">distc report {SAMPLE} --output ' in html


def test_sent_to_splits_each_collective_over_its_group():
    ag = Collective.of("all_gather", "pd_op.all_gather", 12, (0, 1, 2), 1, "f32", (4,))
    assert sent_to(ag) == {0: 16, 2: 16} and ag.moved == 32
    rs = Collective.of("reduce_scatter", "pd_op.reduce_scatter", 12, (0, 1, 2), 0, "f32", (5,))
    assert sum(sent_to(rs).values()) == rs.moved == 13 and set(sent_to(rs)) == {1, 2}
    ar = Collective.of("all_reduce", "pd_op.all_reduce", 12, (2, 3), 3, "f32", (8,))
    assert sent_to(ar) == {2: 32}
    send = Collective.of("send", "pd_op.send_v2", 13, (0, 2), 0, "f32", (8,), peer=2)
    assert sent_to(send) == {2: 32}
    recv = Collective.of("recv", "pd_op.recv_v2", 13, (0, 2), 2, "f32", (8,), peer=0)
    assert sent_to(recv) == {}
    root = Collective.of("broadcast", "pd_op.broadcast", 14, (0, 1, 2), 0, "f32", (6,), root=0)
    assert sent_to(root) == {1: 12, 2: 12}
    out = Collective.of("all_gather", "pd_op.all_gather", 12, (0, 1), 3, "f32", (4,))
    assert not out.runs and sent_to(out) == {}


def test_send_recv_peers_from_rings():
    """A cross-mesh reshard's send goes to its peer: the rank x rank map has it."""
    from distc.analysis.cost import collectives_in
    from distc.driver import load

    prog = load(str(DATA / "corpus/paddle-3.3.1/reshard/cross_m2_S0.r0.after.ir"))
    colls = collectives_in(prog, 0)
    sends = [c for c in colls if c.kind == "send"]
    assert sends and all(c.peer is None for c in sends)  # no ring table: the pair is unknown
    rid = sends[0].ring_id
    colls = collectives_in(prog, 0, {rid: (0, 2)})
    assert [sent_to(c) for c in colls if c.kind == "send"][0] == {2: sends[0].moved}


def test_llama_sample_stage3_page(tmp_path):
    page = tmp_path / "llama.html"
    r = cli("report", LLAMA, "--stage", 3, "--mesh-dims", "dp,mp", "-o", page, "--json")
    doc = last_json(r)
    html = page.read_text()
    assert doc["stage"] == 3 and len(doc["ranks"]) == 4 and len(html) < 1 << 20
    f = figures(html)
    assert len(f.of("chart-heat-map", "g")) == 16
    assert 'class="stage chosen" data-stage="3"' in html
    s3, s1 = doc["stages"]["3"]["ranks"]["0"], doc["stages"]["1"]["ranks"]["0"]
    assert s3["parameters"] < s1["parameters"] and s3["optimizer_states"] == s1["optimizer_states"]
    assert any("Shard" in d for d in doc["decisions"])
    assert all(str(escape(d)) in html for d in doc["decisions"])


@pytest.mark.parametrize("args,code,text", [
    (["report", SAMPLE], 2, "Missing option '-o'"),
    (["report", SAMPLE, "-o", "nodir/x.html"], 1, "no directory"),
    (["report", SAMPLE, "-o", SAMPLE], 2, "does not overwrite its inputs"),
    (["report", SAMPLE, "-o", "x.html", "--stage", "0", "--axis", "0"], 2, "--stage 0 shards nothing"),
    (["report", SAMPLE, "-o", "x.html", "--ranks", "7"], 1, "rank 7 is in none of the program's meshes"),
])
def test_usage_and_input_errors(args, code, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(*args, code=code)
    assert text in r.output
    assert not (tmp_path / "x.html").exists()


def test_bad_inputs_are_located_and_write_nothing(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text("{\n    (%0) = \"pd_op.data\" () {dtype:float32 : () -> tensor<4xf32>\n}\n")
    page = tmp_path / "p.html"
    r = cli("report", bad, "-o", page, code=1)
    assert f"{bad}:2:" in r.output and "error:" in r.output and not page.exists()
    sched = tmp_path / "s.json"
    sched.write_text('{"1F1B": {"0": [["forward", 0, 0, 1]],}}')
    r = cli("report", SAMPLE, "-o", page, "--schedule", sched, code=1)
    assert f"{sched}:1:" in r.output and "not JSON" in r.output and not page.exists()
    sched.write_text('{"1F1B": [1, 2]}')
    r = cli("report", SAMPLE, "-o", page, "--schedule", sched, code=1)
    assert "expected {schedule name" in r.output and not page.exists()


# ------------------------------------------------------------------------------ diff --html
def test_diff_page_rows_and_charts_equal_json(tmp_path):
    a, b = STAGE1 / "mlp_dp2mp2_adamw.s0.r0.after_reshard.ir", STAGE1 / "mlp_dp2mp2_adamw.s1.r0.after_reshard.ir"
    page = tmp_path / "d.html"
    r = cli("diff", a, b, "--html", page, code=1)
    assert "48 differences: 31 added, 5 removed, 12 changed ops" in r.output  # the text report, as before
    doc = json.loads(cli("diff", a, b, "--json", code=1).output)
    html = page.read_text()
    f = figures(html)
    cells = [x for x in f.of("diff-1", "td") if "side" in x]
    kinds = [(x["side"], x["kind"]) for x in cells]
    assert {k: kinds.count(("b" if k == "added" else "a", k)) for k in ("added", "removed", "changed")} == doc["counts"]
    # side by side: A's removed and changed ops in A's order, B's added and changed ones in B's
    for side, mine in (("a", ("removed", "changed")), ("b", ("added", "changed"))):
        assert [x["op"] for x in cells if x["side"] == side] == \
            [d["op"] for d in doc["differences"] if d["kind"] in mine]
    summ = {x["key"]: x for x in f.of("program-1", "tr") if "key" in x}
    vals = [x for x in f.of("program-1", "td") if "value" in x]
    sa, sb = doc["summary"]["a"], doc["summary"]["b"]
    assert [int(v["value"]) for v in vals[:2]] == [sa["ops"], sb["ops"]]
    assert "memory:optimizer_states" in summ and "kind:reduce_scatter" in summ
    bars = f.of("chart-p1-bytes", "g")
    for x in bars:
        s = sa if x["side"] == "a" else sb
        want = s["bytes_sent"] if x["label"] == "total" else s["by_kind"].get(x["label"], {"bytes_sent": 0})["bytes_sent"]
        assert int(x["value"]) == want
    mem = {(x["side"], x["label"]): int(x["value"]) for x in f.of("chart-p1-memory", "g")}
    assert mem[("a", "optimizer states")] == sa["memory"]["optimizer_states"] == 4512
    assert mem[("b", "optimizer states")] == sb["memory"]["optimizer_states"] == 2272
    assert "<script" not in html and 'id="status">different' in html


def test_diff_page_of_equal_programs_and_usage(tmp_path):
    a = STAGE1 / "mlp_dp2mp2_adamw.s1.r0.after_reshard.ir"
    page = tmp_path / "same.html"
    cli("diff", a, a, "--html", page, "-q")
    html = page.read_text()
    assert 'id="status">same' in html and "same program up to value names" in html
    assert 'class="diff"' not in html  # no differing ops
    r = cli("diff", a, a, "--html", "-", code=2)
    assert "--html writes a file" in r.output
    r = cli("diff", a, a, "--html", a, code=2)
    assert "does not overwrite its inputs" in r.output


def test_hostile_names_are_escaped(tmp_path):
    """A file name holding HTML (<, >, &, quotes) is text on the page, never markup."""
    import shutil

    odd = tmp_path / """a<b>&"c'.ir"""
    shutil.copy(SAMPLE, odd)
    page = tmp_path / "p.html"
    cli("report", odd, "-o", page, "--ranks", "0-1")
    html = page.read_text()
    assert "<b>" not in html and "a&lt;b&gt;&amp;&#34;c&#39;.ir" in html
    f = figures(html)
    assert len(f.of("chart-heat-map", "g")) == 4  # --ranks 0-1: two ranks
    cli("diff", odd, odd, "--html", page)
    assert "<b>" not in page.read_text()


def test_many_ranks_share_bars_and_heat_map_blocks():
    """512 ranks: ranks alike share a bar (named 0-255 ...), the heat map shows 32 x 32 blocks of
    16 ranks, and rows of ranks with the same jobs share a timeline row; nothing is lost."""
    from distc.commands.report.charts import Job, heat_map, memory_chart, timeline_chart

    ranks = list(range(512))
    mem = {r: {"parameters": 100 + 50 * (r >= 256), "gradients": 100, "optimizer_states": 7} for r in ranks}
    f = figures(memory_chart("m", mem, "t"))
    bars = f.of("chart-m", "g")
    assert sorted({b["rank"] for b in bars}) == ["0-255", "256-511"] and len(bars) == 2 * 3
    assert {(b["rank"], b["part"]): int(b["bytes"]) for b in bars}[("256-511", "parameters")] == 150
    ring = {r: {(r + 1) % 512: 10} for r in ranks}
    cells = figures(heat_map("h", ranks, ring)).of("chart-h", "g")
    assert len(cells) == 32 * 32 and sum(int(c["bytes"]) for c in cells) == 5120
    by = {(c["from"], c["to"]): int(c["bytes"]) for c in cells}
    assert by[("0-15", "0-15")] == 150 and by[("0-15", "16-31")] == 10 and by[("0-15", "32-47")] == 0
    sched = {r: [Job("forward", 0, r % 2, r % 2 + 1)] for r in range(64)}
    jobs = [x for x in figures(timeline_chart("t", "x", sched)).of("chart-t", "g") if "job" in x]
    assert sorted(j["rank"] for j in jobs) == ["0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44,46,48,"
                                               "50,52,54,56,58,60,62", "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,"
                                               "35,37,39,41,43,45,47,49,51,53,55,57,59,61,63"]


def test_schedule_file_forms(tmp_path):
    """--schedule takes the plain form and a whole `distc schedule --json` line (its
    timelines, jobs with the time they wait inside); the bubble counts that wait as idle."""
    from distc.commands.report import read_schedules
    from distc.commands.report.charts import bubble_fraction

    plain = tmp_path / "a.json"
    plain.write_text(json.dumps({"1F1B": schedule("1F1B", 2, 2)}))
    line = tmp_path / "b.json"
    line.write_text(json.dumps({"command": "schedule", "timelines": {"ZBH1": {
        "0": [["forward", 0, 0.0, 1.0], ["backward", 0, 1.0, 4.0, 1.0]], "1": [["forward", 0, 1.0, 2.0],
                                                                             ["backward", 0, 2.0, 3.0]]}}}))
    (a, _), (b, bub) = read_schedules(str(plain)), read_schedules(str(line))
    assert bub == {}  # no cost in that line: the bubble comes from the jobs
    assert list(a) == ["1F1B"] and list(b) == ["ZBH1"]
    assert bubble_fraction(b["ZBH1"]) == pytest.approx(1 - (1 + 2 + 1 + 1) / 8)  # span 0-4 on 2 ranks
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"x": {"0": [["forward", 0, 2.0, 1.0]]}}))
    with pytest.raises(Exception, match="rank 0: job forward 0 ends before it starts"):
        read_schedules(str(bad))


def test_pipeline_stages_send_to_their_peers(tmp_path):
    """Paddle's pp2 x dp2 LLaMA (stage meshes [0,1] and [2,3]): the activations cross stages by
    send/recv, so rank 0 sends to rank 2 and rank 2 to rank 0 (each send to its peer), never to
    rank 3; each row adds up to what distc shard --all-ranks says the rank sends."""
    from llmdata import PP, text

    main = tmp_path / "pp.ir"
    main.write_text(text("clip/llama_pp2dp2.s0.r0.before_partition.ir", PP))
    doc = last_json(cli("report", main, "-o", tmp_path / "pp.html", "--json"))
    shard = last_json(cli("shard", main, "--all-ranks", "-o", tmp_path / "r{rank}.ir", "--json"))
    for r, x in doc["ranks"].items():
        assert sum(x["sent_to"].values()) == x["bytes_sent"] == shard["ranks"][r]["bytes_sent"]
    to = {r: set(x["sent_to"]) for r, x in doc["ranks"].items()}
    assert to == {"0": {"1", "2"}, "1": {"0", "3"}, "2": {"0", "3"}, "3": {"1", "2"}}
    sends = {tuple(g["group"]) for g in doc["groups"] if g["kind"] == "send"}
    assert sends and all(len(g) == 2 for g in sends)


def test_schedules_modelled_by_distc_schedule(tmp_path):
    """`distc schedule --json` on Paddle's pp2 x dp2 LLaMA feeds --schedule: every schedule of the
    line and every rank's jobs drawn, the bubble the cost model gave (it counts waits inside jobs)."""
    from llmdata import PP, text

    main = tmp_path / "pp.ir"
    main.write_text(text("clip/llama_pp2dp2.s0.r0.before_partition.ir", PP))
    r = cli("schedule", main, "--pp-schedule", "1F1B,ZBH1", "--acc-steps", 4, "--json")
    line = tmp_path / "sched.json"
    line.write_text(r.stderr.strip().splitlines()[-1])
    sched = json.loads(line.read_text())
    page = tmp_path / "pp.html"
    doc = last_json(cli("report", main, "--schedule", line, "-o", page, "--json"))
    for name in ("1F1B", "ZBH1"):
        assert doc["schedules"][name]["bubble_fraction"] == pytest.approx(sched["schedules"][name]["bubble"], abs=1e-6)
    jobs = [x for x in figures(page.read_text()).of("chart-timeline-1", "g") if "job" in x]
    assert len(jobs) == sum(len(v) for v in sched["timelines"]["ZBH1"].values())
    assert {j["job"] for j in jobs} >= {"forward", "backward_b", "backward_w", "optimizer"}
