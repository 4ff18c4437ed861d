"""The report and diff pages in a real browser (Debian's headless Chromium, driven by Selenium):
they load from disk with no console error and no request, every chart is drawn with the right
number of bars, cells and jobs (and a size on screen), the figures in the DOM equal ``--json``, and
screenshots are written as artifacts (``$DISTC_ARTIFACTS``, default ``build/browser``).

Run with ``make test-browser`` (not part of ``make test``).  ``DISTC_SCREENSHOTS=samples/screenshots`` also
writes the README's pictures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from synthetic_schedule import schedule  # noqa: E402

LLAMA = ROOT / "samples" / "llama_dp2mp2_adamw.ir"
STAGE1 = ROOT / "tests/data/corpus/paddle-3.3.1/stage1"
ARTIFACTS = Path(os.environ.get("DISTC_ARTIFACTS", ROOT / "build" / "browser")).resolve()
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", shutil.which("chromedriver") or "/usr/bin/chromedriver")
# the flags that work on this project's machines (closed network, root, no GPU)
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1")


def rel(p: Path) -> str:
    """A path as typed in the checkout (the page shows its command)."""
    return os.path.relpath(p, ROOT)


def distc(*args) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("distc")
    r = subprocess.run([str(exe), *(rel(a) if isinstance(a, Path) else str(a) for a in args)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode in (0, 1), r.stderr
    return r


@pytest.fixture(scope="module")
def pages():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    sched = ARTIFACTS / "schedules.json"
    sched.write_text(json.dumps({k: schedule(k) for k in ("FThenB", "1F1B")}))
    report = ARTIFACTS / "report.html"
    r = distc("report", LLAMA, "--mesh-dims", "dp,mp", "--schedule", sched, "-o", report, "--json")
    doc = json.loads(r.stderr.strip().splitlines()[-1])
    diff = ARTIFACTS / "diff.html"
    a, b = STAGE1 / "mlp_dp2mp2_adamw.s0.r0.after_reshard.ir", STAGE1 / "mlp_dp2mp2_adamw.s1.r0.after_reshard.ir"
    distc("diff", a, b, "--html", diff)
    ddoc = json.loads(distc("diff", a, b, "--json").stdout)
    return {"report": (report, doc), "diff": (diff, ddoc)}


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for exe in (CHROMIUM, CHROMEDRIVER):
        assert os.access(exe, os.X_OK), f"{exe} missing: apt-get install chromium chromium-driver"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    drv.set_window_size(1280, 1000)
    yield drv
    drv.quit()


def open_page(drv, path: Path) -> list[dict]:
    drv.get(path.as_uri())
    assert drv.execute_script("return document.readyState") == "complete"
    return drv.get_log("browser")


def count(drv, css: str) -> int:
    return drv.execute_script("return document.querySelectorAll(arguments[0]).length", css)


def data_of(drv, css: str) -> list[dict]:
    return drv.execute_script("return Array.from(document.querySelectorAll(arguments[0]), e => ({...e.dataset}))", css)


def drawn(drv, css: str) -> bool:
    """Every element matching ``css`` has a size on screen."""
    return drv.execute_script("""return Array.from(document.querySelectorAll(arguments[0])).every(e => {
        const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; })""", css)


def screenshot(drv, path: Path, top: str | None = None, bottom: str | None = None) -> None:
    """The whole page as PNG, or the part from element ``top``'s top to element ``bottom``'s bottom
    (CSS selectors; ``sel@N``: the N-th match)."""
    import base64

    box = drv.execute_script("""const el = s => { const [c, i] = s.split('@'); return document.querySelectorAll(c)[+(i || 0)]; };
        const y = (s, k) => s ? el(s).getBoundingClientRect()[k] + scrollY : null;
        return [y(arguments[0], 'top') ?? 0, y(arguments[1], 'bottom') ?? document.documentElement.scrollHeight];""",
                             top, bottom)
    clip = {"x": 0, "y": max(0, box[0] - 8), "width": 1280, "height": box[1] - box[0] + 16, "scale": 1}
    shot = drv.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 1000


def test_report_page_in_chromium(browser, pages):
    path, doc = pages["report"]
    logs = open_page(browser, path)
    assert [x for x in logs if x["level"] in ("SEVERE", "WARNING")] == [], logs
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0  # nothing fetched
    n = len(doc["ranks"])
    assert count(browser, "svg.distc-chart") == 1 + 4 + 1 + 1 + 2  # memory, 4 stages, heat map, groups, 2 timelines
    assert count(browser, "#chart-memory g.bar") == 4 * n and drawn(browser, "#chart-memory g.bar rect")
    for s in "0123":
        bars = data_of(browser, f"#chart-stage-{s} g.bar")
        assert len(bars) == 4 * n
        assert all(int(b["bytes"]) == doc["stages"][s]["ranks"][b["rank"]][b["part"]] for b in bars)
    cells = data_of(browser, "#chart-heat-map g.dots")
    assert len(cells) == n * n and drawn(browser, "#chart-heat-map g.dots circle")
    assert all(int(c["bytes"]) == doc["ranks"][c["from"]]["sent_to"].get(c["to"], 0) for c in cells)
    assert count(browser, "#chart-groups g.bar") == len(doc["groups"]) == 10
    for i, name in enumerate(doc["schedules"]):
        jobs = data_of(browser, f"#chart-timeline-{i} g.bar[data-job]")
        assert len(jobs) == sum(len(v) for v in doc["schedules"][name]["ranks"].values()) == 32
        assert drawn(browser, f"#chart-timeline-{i} g.bar[data-job] rect")
    assert count(browser, "#decision-list li") == len(doc["decisions"])
    assert browser.find_element("id", "command").text.startswith("distc report samples/llama_dp2mp2_adamw.ir")
    screenshot(browser, ARTIFACTS / "report.png")
    shots = os.environ.get("DISTC_SCREENSHOTS")
    if shots:  # the README's pictures: the page down to the stages, then who sends what to whom
        Path(shots).mkdir(parents=True, exist_ok=True)
        screenshot(browser, Path(shots) / "report-memory.png", None, "#stages")
        screenshot(browser, Path(shots) / "report-traffic.png", "#communication", "#timeline-charts")


def test_diff_page_in_chromium(browser, pages):
    path, doc = pages["diff"]
    logs = open_page(browser, path)
    assert [x for x in logs if x["level"] in ("SEVERE", "WARNING")] == [], logs
    assert count(browser, "svg.distc-chart") == 3
    cells = data_of(browser, "#diff-1 td[data-side]")
    for side, mine in (("a", ("removed", "changed")), ("b", ("added", "changed"))):
        assert [c["op"] for c in cells if c["side"] == side] == [d["op"] for d in doc["differences"] if d["kind"] in mine]
    assert {k: sum(c["kind"] == k and c["side"] == ("b" if k == "added" else "a") for c in cells)
            for k in doc["counts"]} == doc["counts"]
    assert drawn(browser, "#diff-1 td[data-side]")
    assert count(browser, "#chart-p1-counts g.bar") == 2 * len(set(doc["summary"]["a"]["by_kind"]) | set(doc["summary"]["b"]["by_kind"]))
    assert drawn(browser, "#chart-p1-memory g.bar rect")
    screenshot(browser, ARTIFACTS / "diff.png")
    shots = os.environ.get("DISTC_SCREENSHOTS")
    if shots:
        screenshot(browser, Path(shots) / "diff.png", None, "#diff-1 tr.op@11")
