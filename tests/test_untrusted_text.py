"""Text that dlperf did not write is only ever text (issue 23, rows 2 and 4).

Every string a result can hold (framework version, host, machine, warnings, repeat messages,
settings, LoadGen's reasons, telemetry notes, upstream URLs...) is replaced by hostile text
(`untrusted.payload`: Markdown links and images to a local server, raw HTML and script, bare
URLs, table pipes, U+2028/U+2029, ESC sequences that clear the screen or write the clipboard, a
C1 control, Plotly's `%{...}`, matplotlib's `$...$`). Then:

* the Markdown report links nothing, shows no image but its charts, holds no raw HTML, and each
  table keeps its columns, as markdown-it and (where installed) GitHub's cmark-gfm read it;
* the site, opened in a real headless Chromium with a local server counting requests, makes no
  request, runs no script, links nothing outside, and its tables keep their columns;
* no command prints a control character: run, sweep, parse, history, compare, score, report,
  publish, export (on a terminal) show them escaped (``\\x1b``), the text still recognisable.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fixtures_dir
from test_report import make_result, sample_results, with_telemetry
from test_site import site_results
from untrusted import CLOSE, ESC_SEQUENCES, OPEN, write_poisoned

from dlperf.identity import machine_of
from dlperf.printable import printable
from dlperf.schema import Result, SourceInfo
from dlperf.store import ResultStore

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SHOWN = "\\x1b[2J"  # how the clear-screen sequence reads once escaped
QUIET_PORT = 9  # the discard port: nothing listens there; the browser test uses its own server


def hostile_results(tmp_path: Path) -> list[Result]:
    """Results of every kind the renderers show: the site's (frameworks, settings, scaling,
    an ablation, history, inference latency), sampled telemetry (energy, throttling and a
    note), an official implementation (upstream URL, pin, patches) and real LoadGen runs."""
    results = site_results()
    for i, (base, energy) in enumerate(
        ((sample_results()[0], 8800.0), (sample_results()[3], None))
    ):
        sampled = with_telemetry(base, energy, throttled=energy is not None)
        spec = sampled.spec.model_copy(update={"batch_size": 64})  # a configuration of its own
        results.append(sampled.model_copy(update={"spec": spec, "id": f"{base.id}-tele{i}"}))
    official = make_result("pytorch", [900.0, 905.0, 899.0])
    spec = official.spec.model_copy(update={"impl": "official", "source": "pt-current"})
    source = SourceInfo(name="pytorch-examples", url="https://github.com/pytorch/examples",
                        commit="a" * 40, patches={"fix.patch": "b" * 64},
                        profile="current")  # fmt: skip
    results.append(
        official.model_copy(update={"spec": spec, "source": source, "id": f"{official.id}-off"})
    )
    fixtures = fixtures_dir()
    if fixtures is not None:  # LoadGen's reasons, metrics and settings, from real logs
        from dlperf.importers.loadgen import import_dirs

        for folder in (
            fixtures / "mlperf_loadgen" / "offline_valid",
            fixtures / "mlperf_real" / "v30-nvidia-dgxa100x8-resnet50-server-test04b-invalid",
        ):
            results += [r for r, _ in import_dirs([folder], framework="pytorch",
                        model="resnet50", batch_size=128, device="cpu",
                        results_dir=tmp_path / "imported")]  # fmt: skip
    return results


def hostile_folder(tmp_path: Path, port: int = QUIET_PORT) -> Path:
    folder = tmp_path / "results"
    fields = write_poisoned(hostile_results(tmp_path), folder, port)
    # The fields the probe named, and more, are hostile (a sample: all 60+ string fields are).
    assert fixtures_dir() is None or "repeats.0.loadgen.reasons.0" in fields
    for field in ("environment.framework_version", "environment.host", "warnings.0",
                  "repeats.1.message", "spec.practice.channels_last", "environment.cpu",
                  "spec.framework", "spec.model", "id", "environment.os"):  # fmt: skip
        assert field in fields, field
    return folder


# ---------------------------------------------------------------- Markdown


def gfm_cells(line: str) -> list[str]:
    """A table row's cells as GitHub's cmark-gfm splits them: at `|`, a backslash escaping
    the character after it."""
    cells, current, i = [], "", 0
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            current += body[i : i + 2]
            i += 2
            continue
        if char == "|":
            cells.append(current)
            current = ""
        else:
            current += char
        i += 1
    if current.strip():
        cells.append(current)
    return cells


def check_markdown(text: str, images: set[str]) -> None:
    """Stored text in `text` is only text: no control character, no raw HTML, no link but to
    a page beside it, an image only where it is one of `images` (the page's charts), tables
    that keep their columns."""
    from markdown_it import MarkdownIt

    assert not UNSAFE.search(text), UNSAFE.search(text)
    assert SHOWN.replace("\\", "\\\\").replace("[", "\\[") in text  # escaped, recognisable
    tokens = MarkdownIt("commonmark").enable("table").parse(text)  # raw HTML on, as GitHub
    for token in tokens:
        assert token.type not in ("html_block", "html_inline"), token.content[:200]
        for child in token.children or ():
            assert child.type != "html_inline", child
            if child.type == "link_open":  # only the index's links to the model pages
                assert re.fullmatch(r"[A-Za-z0-9_.-]+\.md", child.attrGet("href")), child
            if child.type == "image":
                assert child.attrGet("src") in images, child.attrGet("src")
    # Every table row as many cells as its header, however GitHub or markdown-it split them.
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            widths = {len(gfm_cells(row)) for row in block}
            assert len(widths) == 1, (widths, block[0][:300])
            block = []
    try:
        import cmarkgfm  # GitHub's own parser, where installed (pip install cmarkgfm)
        from cmarkgfm.cmark import Options
    except ImportError:
        return
    html = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    assert "://" not in " ".join(re.findall(r'(?:href|src)="([^"]*)"', html))
    assert "<script" not in html
    links = re.findall(r'<a href="([^"]*)"', html)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+\.md", h) for h in links), links
    assert set(re.findall(r'<img src="([^"]*)"', html)) <= images


def test_stored_text_is_only_text_in_the_markdown_report(tmp_path: Path) -> None:
    from dlperf.compare import compare, render_markdown
    from dlperf.report import write_reports
    from dlperf.report.writer import write_fambench_report

    folder = hostile_folder(tmp_path)
    written = write_reports(folder, tmp_path / "reports")  # PNG charts too: `$...$` is text
    pages = [p for p in written if p.suffix == ".md"]
    charts = {p.name for p in written if p.suffix == ".png"}
    assert len(pages) == 2 and len(charts) >= 2  # the model's page and the index
    for page in pages:
        check_markdown(page.read_text(), charts)
    model_page = next(p for p in pages if p.name != "README.md").read_text()
    assert "### Warnings" in model_page and "## Telemetry" in model_page
    assert "## Ablation" in model_page and "### Implementations" in model_page
    paths, _ = write_fambench_report(folder, tmp_path / "reports")
    check_markdown(paths[0].read_text(), set())
    check_markdown(render_markdown(compare(folder, folder)), set())


def test_a_code_span_never_lets_a_table_split() -> None:
    """Text a code span cannot hold (a backslash before a pipe, a backtick) is escaped text."""
    from dlperf.report.cells import code, table, text

    rows = [[code(v), text(v), v] for v in ("a\\|b", "`x`|y", "ok|fine", "\u2028", "\\")]
    for line in table(["code", "text", "plain"], rows):
        assert not line or len(gfm_cells(line)) == 3, line


# ---------------------------------------------------------------- HTML


def test_the_site_holds_stored_text_as_text(tmp_path: Path) -> None:
    """Without a browser: no image, no link or source outside the site, every script ours."""
    from dlperf.report.site import write_site

    site = write_site(hostile_folder(tmp_path), tmp_path / "site")
    for name in site.pages:
        page = (tmp_path / "site" / name).read_text()
        assert not UNSAFE.search(page)
        # (an attribute's quoted value is text: the selectors' data-* hold stored text)
        tags = re.sub(r'="[^"<>]*"', '=""', page)
        assert "<img" not in page and not re.search(r"<[a-z]+\s[^>]*onerror", tags)
        assert not re.search(r'(?:href|src)="(?:https?:)?//', page)
        assert page.count("<script") == page.count("</script>")
        scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)
        assert all("__pwned" not in s or "&lt;script&gt;" in s for s in scripts)
        assert OPEN in page and CLOSE in page and SHOWN in page


class CountingServer:
    """A local HTTP server that counts the requests it gets (any would be a leak)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CountingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


PAGE_STATE = """JSON.stringify({
  pwned: typeof window.__pwned !== "undefined",
  images: Array.from(document.images).map(i => i.src),
  links: Array.from(document.querySelectorAll("a")).map(
    a => a.href && a.href.baseVal !== undefined ? a.href.baseVal : a.getAttribute("href")),
  svgLinks: Array.from(document.querySelectorAll("svg a")).map(
    a => a.getAttribute("href") || a.getAttribute("xlink:href")),
  resources: performance.getEntriesByType("resource").map(e => e.name),
  tables: Array.from(document.querySelectorAll("table")).map(t =>
    Array.from(t.rows).map(r => r.cells.length)),
  text: document.body.innerText,
})"""

HOVER_ALL = """(() => {
  let hovered = 0;
  for (const div of document.querySelectorAll(".plotly-graph-div")) {
    (div._fullData || []).forEach((trace, i) => {
      Plotly.Fx.hover(div, [{curveNumber: i, pointNumber: 0}]);
      hovered += document.querySelectorAll(".hoverlayer .hovertext").length > 0 ? 1 : 0;
    });
  }
  return hovered;
})()"""


@pytest.mark.multiprocess
def test_the_site_makes_no_request_whatever_the_results_hold(tmp_path: Path) -> None:
    """Issue 23 row 2: `dlperf publish` of the hostile results, every page opened in headless
    Chromium, every chart's hover label shown: zero requests to the server the payloads point
    at, no script of theirs ran, no image, no link outside the site, every table's rows as
    wide as its header, and the hostile text on the page as text."""
    from browser import Browser, find_chromium, skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with CountingServer() as server:
        hostile_folder(tmp_path, server.port)
        done = subprocess.run([sys.executable, "-m", "dlperf", "publish", "--out", "site"],
                              cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert not UNSAFE.search(done.stdout + done.stderr)
        pages = sorted((tmp_path / "site").glob("*.html"))
        assert len(pages) == 3  # the index, regressions.html and the model's page
        with Browser(find_chromium()) as browser:
            for page in pages:
                browser.open(page)
                browser.wait_for(
                    "Array.from(document.querySelectorAll('.plotly-graph-div'))"
                    ".every(d => d.querySelector('svg.main-svg'))"
                )
                hovered = browser.evaluate(HOVER_ALL)
                state = json.loads(browser.evaluate(PAGE_STATE))
                assert browser.outside == [], browser.outside
                assert not state["pwned"], page.name
                assert state["images"] == [], state["images"]
                outside = [h for h in state["links"] + state["svgLinks"] if h and "://" in h]
                assert outside == [], outside
                assert all(r.startswith("file://") for r in state["resources"]), state
                for rows in state["tables"]:
                    assert len(set(rows)) == 1, rows
                assert "![img](http://127.0.0.1:" in state["text"] and SHOWN in state["text"]
                if page.name not in ("index.html", "regressions.html"):
                    assert hovered > 0  # the hover labels, hostile text in them, were drawn
        assert server.paths == [], server.paths


# ---------------------------------------------------------------- the terminal


def test_the_console_never_prints_a_control_character() -> None:
    """The consoles every command prints through: a string, markup-escaped text, a table
    cell, a rich Text built directly, a progress bar's description, on a real terminal's
    colour settings; the escapes show, rich's own colours still work."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from dlperf.cli.output import PrintableConsole
    from dlperf.cli.render import repeat_progress

    hostile = "v1 " + "".join(ESC_SEQUENCES) + " \u2028 \u202e end\r"
    out, bar = io.StringIO(), io.StringIO()
    console = PrintableConsole(file=out, force_terminal=True, width=200, color_system="standard")
    console.print(f"[red]warning:[/] {escape(hostile)}")
    table = Table("configuration", "version")
    table.add_row(escape(hostile), Text(hostile))
    console.print(table)
    assert "\x1b[31m" in out.getvalue()  # the [red] markup: rich's own styling is untouched
    shown = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # less rich's colours
    assert not UNSAFE.search(shown)
    assert shown.count(SHOWN) == 3 and "\\u202e" in shown and "\\x1b]52;" in shown
    console = PrintableConsole(file=bar, force_terminal=True, width=200)
    with repeat_progress(console) as progress:
        task = progress.add_task(escape(hostile), total=1)
        progress.advance(task)
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", bar.getvalue())  # rich's redraws
    assert not UNSAFE.search(drawn) and SHOWN in drawn
    assert printable(hostile, keep_lines=True) == (
        "v1 \\x1b[2J\\x1b[H\\x1b]52;c;cm0gLXJmIH4=\\x07\\x9b31m \\u2028 \\u202e end\\r"
    )


def dlperf(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "dlperf", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def on_a_terminal(*args: str, cwd: Path) -> str:
    """What `dlperf ARGS` writes on a pseudo-terminal (stdout a tty)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dlperf", *args], cwd=cwd,
                            stdout=follower, stderr=follower, stdin=subprocess.DEVNULL)  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode("utf-8", "replace")


SITECUSTOMIZE = """\
import json, os, sys
# A workload that says its configuration is unsupported, for a reason holding ESC sequences.
if os.environ.get("DLPERF_EVENTS") and any(a.endswith("pace.py") for a in sys.argv):
    reason = "no kernel \\x1b[2J\\x1b[H\\x1b]52;c;cm0gLXJmIH4=\\x07 \\x9b31m \\u2028 end"
    with open(os.environ["DLPERF_EVENTS"], "a") as events:
        events.write(json.dumps({"event": "unsupported", "reason": reason}) + "\\n")
    print("unsupported: " + reason, flush=True)
    os._exit(4)
"""

EVENTS_VERSION = "2.3.1 ![x](http://127.0.0.1:9/x.png) \x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07 \u2028"


def events_log(path: Path) -> Path:
    """A workload's events file made elsewhere, its framework version hostile text."""
    lines: list[dict] = [
        {"event": "start", "framework": "pytorch", "framework_version": EVENTS_VERSION,
         "device": "cpu", "device_name": "cpu\x1b[31m", "params": 1, "flops_per_sample": 0.0,
         "python": "3.11"},
        {"event": "ready", "time": 0.0},
        *({"event": "step", "step": i, "time": i / 10, "samples": 8, "loss": 1.0}
          for i in range(1, 41)),
        {"event": "end", "time": 4.1},
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def commands(tmp_path: Path) -> Iterator[tuple[str, tuple[int, str], bool]]:
    """(what, (exit code, output), whether the hostile text must show) for every command."""
    r = str(hostile_folder(tmp_path))
    yield "history", dlperf("history", "--results-dir", r, cwd=tmp_path), True
    yield "history --json", dlperf("history", "--results-dir", r, "--json", cwd=tmp_path), False
    yield "compare", dlperf("compare", r, r, cwd=tmp_path), True
    yield "compare --json", dlperf("compare", r, r, "--json", cwd=tmp_path), True
    freeze = str(tmp_path / "ref.json")
    known = {machine_of(x).id for x in ResultStore(Path(r)).results() if machine_of(x).known}
    machine = ["--machine", known.pop()]  # a score is one machine's
    yield "score --freeze", dlperf("score", "--freeze", freeze, "--results-dir", r, *machine,
                                   cwd=tmp_path), False  # fmt: skip
    yield "score", dlperf("score", "--reference", freeze, "--results-dir", r, *machine,
                          cwd=tmp_path), False  # fmt: skip
    yield "report", dlperf("report", "--results-dir", r, "--reports-dir", "rep",
                           cwd=tmp_path), False  # fmt: skip
    yield "report fambench", dlperf("report", "--results-dir", r, "--reports-dir", "rep",
                                    "--style", "fambench", cwd=tmp_path), True  # fmt: skip
    yield "publish", dlperf("publish", "--results-dir", r, "--out", "site", cwd=tmp_path), False
    yield "export json", dlperf("export", "--results-dir", r, "--format", "json",
                                cwd=tmp_path), False  # fmt: skip
    yield "export superbench", dlperf("export", "--results-dir", r, "--format", "superbench",
                                      cwd=tmp_path), False  # fmt: skip
    yield "export csv on a terminal", (0, on_a_terminal(
        "export", "--results-dir", r, "--format", "csv", cwd=tmp_path)), True  # fmt: skip
    log = events_log(tmp_path / "logs" / "resnet50_b8_fp32_1.jsonl")
    parsed = str(tmp_path / "parsed")
    yield "parse", dlperf("parse", "pytorch", "resnet50", str(log), "--skip", "5", "--measure",
                          "20", "--results-dir", parsed, cwd=tmp_path), False  # fmt: skip
    yield "history of the parsed log", dlperf("history", "--results-dir", parsed,
                                              cwd=tmp_path), True  # fmt: skip
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    hostile_env = {"PYTHONPATH": str(tmp_path / "site-packages")}
    yield "run", dlperf("run", "calibration", "pace", "--preset", "smoke", "--repeats", "1",
                        "--results-dir", "ran", cwd=tmp_path, env=hostile_env), True  # fmt: skip
    (tmp_path / "matrix.toml").write_text(
        '[sweep]\npreset = "smoke"\nframeworks = ["calibration"]\nmodels = ["pace"]\n'
        "batch_sizes = [10]\nrepeats = 1\nskip = 2\nmeasure = 5\n"
    )
    yield "sweep", dlperf("sweep", "matrix.toml", "--results-dir", "swept", cwd=tmp_path,
                          env=hostile_env), True  # fmt: skip


@pytest.mark.multiprocess
def test_no_command_prints_a_control_character(tmp_path: Path) -> None:
    """Issue 23 row 4: every command on the hostile results (and a run, a sweep and a parse
    whose workload or log is hostile) exits as it should, without a traceback, and prints no
    control character: the ESC sequences show escaped where the text is shown."""
    for what, (code, output), shows in commands(tmp_path):
        assert "Traceback" not in output, (what, output[-3000:])
        assert code in (0, 2), (what, code, output[-3000:])  # 2: a failed run or sweep
        found = UNSAFE.search(output.replace("\r\n", "\n"))
        assert found is None, (what, repr(output[max(0, found.start() - 80) : found.end() + 80]))
        if shows:
            # as printed, in Markdown (`\\x1b\\[2J`), or in JSON (`\\\\x1b[2J`)
            forms = (
                SHOWN,
                SHOWN.replace("\\", "\\\\").replace("[", "\\["),
                SHOWN.replace("\\", "\\\\"),
            )
            assert any(form in output for form in forms), (what, output[-2000:])
