"""The published site in a real browser (issues 24 and 32): Playwright for Python drives
Debian's Chromium (`tests/browser.py`) over a site published from real results on two machines
and, where ../shared/fixtures is there, the real MLPerf Training submissions imported beside
them (published references).

Every page opens from file:// with no console error and no request outside file://; every chart
has drawn data points; no two of a chart's title, buttons, axis titles, legend and toolbar
overlap, and none is cut by the chart's edge, at 1400 and 1000 px; the selectors offer the
measured machines by name and no published reference, hide table rows, a whole machine's
section and filter chart points, never leaving empty axes; the index names the machine of a
significant change in full; the regressions page and its Atom feed hold the known regression;
every table fits its container at 1400 px. The page heights are printed, and screenshots of the
index and a model page at both widths are kept under test-output/site/ (gitignored)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

import pytest
from browser import Browser, find_chromium, skip_reason
from conftest import fixtures_dir
from test_report_machines import REAL, on_another_machine, real_results

from dlperf.assemble import build_result
from dlperf.identity import Machine, machine_names, machine_of
from dlperf.rows import utc_iso
from dlperf.schema import Result
from dlperf.store import ResultStore

OUT = Path(__file__).resolve().parents[1] / "test-output" / "site"
ATOM = "{http://www.w3.org/2005/Atom}"
SLOWER_ID = "20261128T090000Z-5a0e01"
SLOWER_CREATED = "2026-11-28T09:00:00+00:00"


def later_and_slower(result: Result, factor: float) -> Result:
    """A later run of `result`'s benchmark on its machine, every repeat `factor` times as
    slow (its windows took `factor` times as long), assembled as a run assembles it."""
    repeats = []
    for r in result.repeats:
        if r.throughput is not None and r.window is not None:
            window = r.window.model_copy(update={"elapsed_s": r.window.elapsed_s * factor})
            r = r.model_copy(update={"throughput": r.throughput / factor, "window": window})
        repeats.append(r)
    slower = build_result(result.spec, SLOWER_ID, repeats, environment=result.environment)
    return slower.model_copy(update={"created": SLOWER_CREATED})


def publish(tmp_path: Path) -> tuple[Path, Result, Result, list[Result]]:
    """The real results (machine A), their copies as a second machine records them (another
    host and CPU model, 3x as fast), a later TensorFlow run on B at half its speed (a known
    regression), and the real MLPerf Training submissions where ../shared/fixtures has them;
    published by `dlperf publish`. Returns the site, B's TensorFlow result, the slower one and
    the published references imported."""
    from dlperf.importers.mlperf_training import import_folders

    folder = tmp_path / "results"
    shutil.copytree(REAL, folder, ignore=shutil.ignore_patterns("*.md"))
    copies = [on_another_machine(r) for r in real_results()]
    tf_b = next(r for r in copies if r.spec.framework == "tensorflow")
    slower = later_and_slower(tf_b, 2.0)
    for r in [*copies, slower]:
        ResultStore(folder).write(r)
    fixtures = fixtures_dir()
    published = []
    if fixtures is not None:
        imported = import_folders([fixtures / "mlperf_training"], results_dir=folder)
        published = [r for r, _ in imported]
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "publish", "--results-dir", str(folder), "--out",
         str(tmp_path / "site")], capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tmp_path / "site", tf_b, slower, published


PAGE_STATE = """() => ({
  plotly: typeof Plotly === "object",
  charts: Array.from(document.querySelectorAll(".plotly-graph-div")).map(d => ({
    id: d.id,
    traces: (d._fullData || []).length,
    points: d.querySelectorAll(".point").length,
  })),
  tables: Array.from(document.querySelectorAll("table")).map(t => ({
    scroll: t.scrollWidth,
    room: t.parentElement.clientWidth,
    right: Math.ceil(t.getBoundingClientRect().right),
  })),
  viewport: document.documentElement.clientWidth,
  height: Math.ceil(document.body.getBoundingClientRect().bottom + window.scrollY
                    + parseFloat(getComputedStyle(document.body).marginBottom)),
})"""

ROWS = """() => Array.from(document.querySelectorAll("tr[data-machine]")).map(r => ({
  hidden: r.hidden, keys: Object.assign({}, r.dataset)}))"""

SELECTS = """() => Array.from(document.querySelectorAll("#selectors select")).map(s => ({
  key: s.dataset.key, disabled: s.disabled,
  values: Array.from(s.options).map(o => o.value),
  texts: Array.from(s.options).map(o => o.textContent)}))"""

# Each machine section: its machine, whether it is shown, and its charts' drawn points.
SECTIONS = """() => Array.from(document.querySelectorAll("[data-machine-section]")).map(s => ({
  machine: s.dataset.machineSection,
  shown: s.offsetParent !== null,
  heading: (s.querySelector("h2") || {}).textContent,
  charts: s.querySelectorAll(".plotly-graph-div").length,
}))"""

# Every chart the reader can see, and the points it draws (none: empty axes).
SHOWN_CHARTS = """() => Array.from(document.querySelectorAll(".plotly-graph-div"))
  .filter(d => d.offsetParent !== null && d.id !== "contract-chart")
  .map(d => ({id: d.id, points: d.querySelectorAll(".point").length}))"""

# Per chart shown: the bounding boxes (CSS px) of what Plotly draws around the plot: the title
# (.gtitle), the buttons (.updatemenu-container), the axis titles (.xtitle, .ytitle, .x2title
# ...), the legend and the toolbar (.modebar, drawn even while it is faded out), and the
# chart's own box. An element drawn with no size (an axis hidden, its title empty) is none.
LAYOUT = """() => Array.from(document.querySelectorAll(".plotly-graph-div"))
  .filter(d => d.offsetParent !== null && d.id !== "contract-chart").map(d => {
  const box = el => {
    const b = el.getBoundingClientRect();
    return {left: b.left, top: b.top, right: b.right, bottom: b.bottom};
  };
  const parts = [];
  const add = (kind, el) => {
    const b = el.getBoundingClientRect();
    if (b.width < 1 || b.height < 1) return;
    parts.push(Object.assign({kind: kind, text: (el.textContent || "").slice(0, 50)}, box(el)));
  };
  d.querySelectorAll(".gtitle").forEach(el => add("title", el));
  d.querySelectorAll(".updatemenu-container").forEach(el => add("buttons", el));
  d.querySelectorAll("text[class$='title']:not(.gtitle)").forEach(el => add("axis title", el));
  d.querySelectorAll("g.legend").forEach(el => add("legend", el));
  d.querySelectorAll(".modebar").forEach(el => add("mode bar", el));
  return {id: d.id, chart: box(d), parts: parts};
})"""

# A chart as the contract has it (figures.py's charts carry meta.select per point): three
# points, the first on machine A, the others on B; and a trace without meta, left as it is.
INJECT = """([a, b]) => {
  const div = document.createElement("div");
  div.id = "contract-chart";
  div.className = "plotly-graph-div";
  document.body.appendChild(div);
  return Plotly.newPlot(div, [
    {type: "bar", name: "with meta", x: ["p", "q", "r"], y: [1, 2, 3],
     marker: {color: ["#111111", "#222222", "#333333"]}, meta: {select: [a, b, b]}},
    {type: "bar", name: "no meta", x: ["p", "q"], y: [4, 5]},
  ]).then(() => true);
}"""

INJECTED = """() => {
  const d = document.getElementById("contract-chart");
  return d.data.map(t => ({x: t.x, color: t.marker && t.marker.color}));
}"""

# Per chart of the page outside a hidden machine section: per trace that carries meta.select
# (legend-only entries carry an empty one and are left out), whether its chart is shown, the
# points drawn and the points whose keys match the chosen values (the filter must leave
# exactly those).
OWN_CHARTS = """(chosen) => Array.from(document.querySelectorAll(".plotly-graph-div"))
  .filter(d => d.id !== "contract-chart" && !d.closest("[data-machine-section][hidden]"))
  .flatMap(d => (d.data || []).filter(t => t.meta && Array.isArray(t.meta.select)
    && t.meta.select.length).map(t => ({
    shown: d.offsetParent !== null,
    drawn: (t.x || t.y || []).length,
    total: t.meta.select.length,
    wanted: t.meta.select.filter(k => Object.entries(chosen).every(([n, v]) => k[n] === v)).length,
  })))"""


def _overlap(a: dict, b: dict, slack: float = 1.0) -> bool:
    return (a["left"] < b["right"] - slack and b["left"] < a["right"] - slack
            and a["top"] < b["bottom"] - slack and b["top"] < a["bottom"] - slack)  # fmt: skip


def _inside(part: dict, chart: dict, slack: float = 1.0) -> bool:
    return (part["left"] >= chart["left"] - slack and part["right"] <= chart["right"] + slack
            and part["top"] >= chart["top"] - slack
            and part["bottom"] <= chart["bottom"] + slack)  # fmt: skip


def _check_chart(where: str, chart: dict) -> int:
    """One chart's layout (`LAYOUT`'s entry): what it must have is there, each part within
    the chart, no two overlapping; the pairs compared."""
    kinds = [p["kind"] for p in chart["parts"]]
    assert kinds.count("title") == 1, (where, kinds)
    assert kinds.count("legend") == 1 and "axis title" in kinds, (where, kinds)
    small = chart["id"].startswith("index-")
    assert kinds.count("mode bar") == (0 if small else 1), (where, kinds)  # index: none
    if "-history-" in chart["id"]:
        assert kinds.count("buttons") == 1 and kinds.count("axis title") == 2, (where, kinds)
    parts, pairs = chart["parts"], 0
    for part in parts:
        assert _inside(part, chart["chart"]), f"{where}: {part} cut by {chart['chart']}"
    for i, a in enumerate(parts):
        for b in parts[i + 1 :]:
            pairs += 1
            assert not _overlap(a, b), f"{where}: {a} overlaps {b}"
    return pairs


def check_layout(browser: Browser, name: str) -> int:
    """On the open page: in every chart shown, no two of title, buttons, axis titles, legend
    and toolbar overlap, and each lies within the chart (none is cut); what each chart must
    have is found (a check that found nothing would pass on anything). A history chart is
    checked on each of its x-axes (its buttons). Returns the pairs compared."""
    charts = browser.evaluate(LAYOUT)
    assert charts, f"{name} at {browser.width} px: no chart shown"
    pairs = 0
    for chart in charts:
        pairs += _check_chart(f"{name} at {browser.width} px, {chart['id']}", chart)
        if "-history-" not in chart["id"]:
            continue
        buttons = browser.page.locator(f"#{chart['id']} .updatemenu-button")
        assert buttons.count() == 3, chart["id"]
        for k in (1, 2, 0):  # by framework version, by dlperf version, back to by time
            buttons.nth(k).click()
            axis = f"xaxis{k + 1 if k else ''}"
            browser.wait_for(f"document.getElementById('{chart['id']}').layout['{axis}'].visible")
            (again,) = [c for c in browser.evaluate(LAYOUT) if c["id"] == chart["id"]]
            pairs += _check_chart(f"{name} at {browser.width} px, {chart['id']}, axis {k}", again)
    return pairs


def check_page(browser: Browser, site: Path, name: str, tables: bool = True) -> dict:
    """Open a page, wait for its charts, check what every page must hold (`tables`: that
    every table fits); its state."""
    browser.open(site / name)
    browser.wait_for(
        "Array.from(document.querySelectorAll('.plotly-graph-div'))"
        ".every(d => d.querySelector('svg.main-svg'))"
    )
    state = browser.evaluate(PAGE_STATE)
    assert state["plotly"], f"{name}: Plotly did not load"
    for chart in state["charts"]:
        assert chart["traces"] >= 1 and chart["points"] >= 1, f"{name}: {chart} drew no point"
    for table in state["tables"] if tables else ():  # fits its container: nothing cut off
        assert table["scroll"] <= table["room"] + 1, f"{name}: a table too wide: {table}"
        assert table["right"] <= state["viewport"], f"{name}: a table past the page: {table}"
    assert browser.errors == [], f"{name}: {browser.errors}"
    assert browser.outside == [], f"{name}: requests outside file://: {browser.outside}"
    return state


def check_selectors(browser: Browser, a: str, b: str, names: dict[str, str],
                    published: list[Result]) -> None:  # fmt: skip
    """On the open model page: the machine selector offers the two measured machines by name
    (no published reference, none counted), no selector a published result's framework
    version, none a single value; choosing machine B hides A's rows and A's whole section
    (its charts too) and keeps only B's chart points (the contract chart's per-point arrays
    filtered, the trace without meta as it was), no chart shown empty; each other selector
    shows only its value's rows; "all" shows everything again."""
    selects = {s["key"]: s for s in browser.evaluate(SELECTS)}
    machine = selects["machine"]
    assert machine["values"] == ["", *sorted([a, b], key=names.get)]
    assert machine["texts"] == ["all (2)", *sorted(names.values())]
    assert not any(s["disabled"] or len(s["values"]) < 3 for s in selects.values()), selects
    assert "precision" not in selects and "mode" not in selects  # one value each: no choice
    theirs = {f"{r.spec.framework} {r.environment.framework_version}" for r in published}
    for select in selects.values():
        assert not theirs & set(select["values"]), select
    sections = browser.evaluate(SECTIONS)
    assert sorted(x["machine"] for x in sections) == sorted([a, b]), sections
    assert all(x["shown"] and x["charts"] >= 2 for x in sections), sections
    rows = browser.evaluate(ROWS)
    keys_a = next(r["keys"] for r in rows if r["keys"]["machine"] == a)
    keys_b = next(r["keys"] for r in rows if r["keys"]["machine"] == b)
    assert browser.evaluate(INJECT, [keys_a, keys_b])
    browser.page.select_option('#selectors select[data-key="machine"]', b)
    rows = browser.evaluate(ROWS)
    assert any(r["hidden"] for r in rows) and any(not r["hidden"] for r in rows)
    assert all(r["hidden"] == (r["keys"]["machine"] != b) for r in rows)
    sections = {x["machine"]: x for x in browser.evaluate(SECTIONS)}
    assert not sections[a]["shown"] and sections[b]["shown"], sections
    assert names[b] in sections[b]["heading"]
    shown = browser.evaluate(SHOWN_CHARTS)
    assert len(shown) == sections[b]["charts"] and all(c["points"] for c in shown), shown
    with_meta, without = browser.evaluate(INJECTED)
    assert with_meta == {"x": ["q", "r"], "color": ["#222222", "#333333"]}
    assert without["x"] == ["p", "q"]
    own = browser.evaluate(OWN_CHARTS, {"machine": b})
    assert own, "no chart of the page carries meta.select"
    for trace in own:
        assert trace["drawn"] == trace["wanted"], trace
    browser.page.select_option('#selectors select[data-key="machine"]', "")
    assert not any(r["hidden"] for r in browser.evaluate(ROWS))
    assert all(x["shown"] for x in browser.evaluate(SECTIONS))
    assert browser.evaluate(INJECTED)[0]["x"] == ["p", "q", "r"]
    assert all(t["drawn"] == t["total"] for t in browser.evaluate(OWN_CHARTS, {})), "not restored"
    assert all(c["points"] for c in browser.evaluate(SHOWN_CHARTS))
    for key, select in selects.items():
        for value in select["values"][1:]:
            browser.page.select_option(f'#selectors select[data-key="{key}"]', value)
            rows = browser.evaluate(ROWS)
            assert any(not r["hidden"] for r in rows), (key, value)
            assert all(r["hidden"] == (r["keys"][key] != value) for r in rows), (key, value)
            for trace in browser.evaluate(OWN_CHARTS, {key: value}):
                if trace["shown"]:
                    assert trace["drawn"] == trace["wanted"], (key, value, trace)
                else:  # hidden because none of its points is chosen: no empty axes
                    assert trace["wanted"] == 0, (key, value, trace)
            assert all(c["points"] for c in browser.evaluate(SHOWN_CHARTS)), (key, value)
        browser.page.select_option(f'#selectors select[data-key="{key}"]', "")
    assert browser.errors == [], browser.errors


def check_feed(site: Path, slower: Result, before: Result) -> None:
    """regressions.xml is Atom 1.0: the feed's id, title, updated, author and links, and an
    entry per change with an id, title, updated time from its result, and links that resolve
    in the site; the known regression is there."""
    root = ET.parse(site / "regressions.xml").getroot()
    assert root.tag == f"{ATOM}feed"
    for tag in ("id", "title", "updated", "author/" + ATOM + "name"):
        assert (root.findtext(ATOM + tag) or "").strip(), tag
    entries = root.findall(f"{ATOM}entry")
    assert entries and len({e.findtext(f"{ATOM}id") for e in entries}) == len(entries)
    assert root.findtext(f"{ATOM}updated") == max(e.findtext(f"{ATOM}updated") for e in entries)
    for entry in entries:
        for tag in ("id", "title", "updated"):
            assert entry.findtext(ATOM + tag), tag
        for link in entry.findall(f"{ATOM}link"):
            href = link.get("href")
            assert "://" not in href
            assert (site / unquote(href.split("#")[0])).is_file(), href
    (known,) = [e for e in entries if slower.id in (e.findtext(f"{ATOM}title") or "") or any(
        slower.id in (link.get("href") or "") for link in e.findall(f"{ATOM}link"))]  # fmt: skip
    assert known.find(f"{ATOM}category").get("term") == "regression"
    assert known.findtext(f"{ATOM}updated") == utc_iso(SLOWER_CREATED)
    hrefs = [link.get("href") for link in known.findall(f"{ATOM}link")]
    assert any(before.id in h for h in hrefs) and any(slower.id in h for h in hrefs)


@pytest.mark.multiprocess
def test_the_published_site_in_chromium(tmp_path: Path) -> None:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    site, tf_b, slower, published = publish(tmp_path)
    machine_a, machine_b = machine_of(real_results()[0]), machine_of(tf_b)
    a, b = machine_a.id, machine_b.id
    named = machine_names([(m.id, m.label) for m in (machine_a, machine_b)])
    names = {mid: name for (mid, _), name in named.items()}
    pages = sorted(p.name for p in site.glob("*.html"))
    extra = ["bert-large.html"] if published else []  # published references only
    assert pages == sorted(["index.html", "regressions.html", "resnet50.html", *extra])
    heights, pairs = {}, {}
    OUT.mkdir(parents=True, exist_ok=True)
    with Browser(find_chromium()) as browser:
        for width in (1400, 1000):
            browser.resize(width)
            for name in pages:
                state = check_page(browser, site, name, tables=width == 1400)
                if state["charts"]:
                    pairs[f"{name} at {width} px"] = check_layout(browser, name)
                if width == 1400:
                    heights[name] = state["height"]
                if name == "index.html":
                    assert len(state["charts"]) == 2  # resnet50 small, on each machine
                    check_index(browser, slower, machine_b)
                if name in ("index.html", "resnet50.html"):
                    shot = browser.screenshot(OUT / name.replace(".html", f"-{width}.png"))
                    print(f"screenshot of {name} at {width} px: {shot}")
                if name == "regressions.html":
                    text = browser.evaluate("() => document.body.innerText")
                    assert "regression" in text and slower.id in text and tf_b.id in text
                if name == "resnet50.html" and published:
                    check_references(browser)
        # the chart kinds the real results have none of (scaling, inference latency), from
        # test_site's results: laid out as every chart
        kinds = publish_chart_kinds(tmp_path)
        for width in (1400, 1000):
            browser.resize(width)
            check_page(browser, kinds, "resnet50.html", tables=width == 1400)
            pairs[f"scaling and latency at {width} px"] = check_layout(browser, "resnet50.html")
            ids = [c["id"] for c in browser.evaluate(LAYOUT)]
            assert any("-scaling-" in i for i in ids) and any("-latency-" in i for i in ids)
        browser.resize(1400)
        browser.open(site / "resnet50.html")
        browser.wait_for("document.querySelectorAll('#selectors select').length > 0")
        check_selectors(browser, a, b, names, published)
    check_feed(site, slower, tf_b)
    (OUT / "heights.json").write_text(json.dumps(heights, indent=1) + "\n")
    print(f"page heights at 1400 px (px): {heights}")
    print(f"chart elements compared pairwise: {pairs}")
    assert all(pairs.values()), pairs
    # about three screens per machine at most (the page before issue 24: 5,834 px for one)
    assert heights["resnet50.html"] <= 2 * 3 * 1000, heights


def publish_chart_kinds(tmp_path: Path) -> Path:
    """The site of test_site's results: a scaling and an inference latency chart beside
    throughput and history."""
    from test_site import write_results

    from dlperf.report.site import write_site

    return write_site(write_results(tmp_path / "kinds"), tmp_path / "kinds-site").out_dir


def check_index(browser: Browser, slower: Result, machine: Machine) -> None:
    """The index's newest significant change names its machine in full (label and id), as
    the regressions page does."""
    items = browser.evaluate(
        "() => Array.from(document.querySelectorAll('li')).map(li => li.innerText)"
    )
    (change,) = [i for i in items if "regression" in i and slower.spec.framework in i]
    assert f"on {machine.label} ({machine.id})" in change, change


def check_references(browser: Browser) -> None:
    """The published references name each submission's system and link its round's
    published results."""
    links = browser.evaluate(
        "() => Array.from(document.querySelectorAll('a[href^=\"https://github.com/mlcommons/\"]'))"
        ".map(a => [a.textContent, a.href])"
    )
    assert ["v4.0", "https://github.com/mlcommons/training_results_v4.0"] in links, links
    assert ["v1.0", "https://github.com/mlcommons/training_results_v1.0"] in links, links
    text = browser.evaluate("() => document.body.innerText")
    assert "tpu-v4-256" in text and "TODO" not in text
