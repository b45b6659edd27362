"""Result files that are valid JSON and still odd (issue 30, rows 1, 7 and 8), written to disk
as they would be found, every command run end to end (`python -m dlperf`, its real stdout and
stderr), the published feed parsed as the XML it must be.

* Row 1: a lone surrogate in a result's text (``"host": "\\ud800"``: valid JSON, no Unicode
  text) is read and shown escaped (the six characters ``\\ud800``) by every command; a file
  whose name is not UTF-8 is skipped with one warning naming it.
* Row 7: a copied result (two files of one id) is paired by file on the regressions page and in
  the Atom feed, as `dlperf history` pairs it, and said once as a warning.
* Row 8: U+FFFE, U+FFFF and C0 controls in a result's fields leave the feed well-formed Atom.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.dom.minidom
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_report import make_result
from test_site import MACHINE, site_results
from untrusted import OPEN, poison

from dlperf.identity import benchmark_id
from dlperf.schema import Result
from dlperf.store import ResultStore

pytestmark = pytest.mark.multiprocess  # every test runs the real CLI in its own process

ATOM = "{http://www.w3.org/2005/Atom}"


def dlperf(*args: str, cwd: Path) -> tuple[int, str, str]:
    """`dlperf ARGS` as a user runs it: its exit code, stdout and stderr."""
    done = subprocess.run([sys.executable, "-m", "dlperf", *args], cwd=cwd, capture_output=True,
                          text=True, errors="backslashreplace", timeout=600)  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr, (args, done.stderr[-3000:])
    return done.returncode, done.stdout, done.stderr


def write_raw(folder: Path, result: Result, edit, name: str | None = None) -> Path:
    """`result` as a stored JSON file, edited as a dict by `edit` first (`json.dumps` writes a
    lone surrogate as its \\u escape, as Python writes one wherever it came from)."""
    data = json.loads(result.model_dump_json())
    edit(data)
    path = folder / benchmark_id(result.spec) / (name or f"{result.id}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def feed_entries(site: Path) -> list[ET.Element]:
    """The site's regressions.xml, parsed by two XML parsers, as Atom: its entries."""
    xml.dom.minidom.parse(str(site / "regressions.xml"))  # a second, stricter reader
    root = ET.parse(site / "regressions.xml").getroot()
    assert root.tag == f"{ATOM}feed"
    assert root.findtext(f"{ATOM}id", "").startswith("urn:uuid:")
    entries = root.findall(f"{ATOM}entry")
    for entry in entries:
        for tag in ("id", "title", "updated", "summary"):
            assert entry.findtext(f"{ATOM}{tag}"), tag
    return entries


def related(entry: ET.Element) -> dict[str, str]:
    """An entry's JSON links: "before" / "after" -> the result file's path in the site."""
    return {
        link.get("title", "").split(":")[0]: unquote(link.get("href", ""))
        for link in entry.findall(f"{ATOM}link")
        if link.get("rel") == "related"
    }


# ---------------------------------------------------------------- row 1: lone surrogates


SURROGATE_HOST = "\ud800 \U0001f600"  # a lone surrogate, then a valid pair (an emoji)
HOST_SHOWN = "\\ud800 \U0001f600"  # as every command must show it: escaped, the emoji kept


def surrogate_folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The site's results, and beside them: a newer run of PyTorch's CUDA 1x1 (a regression
    against the ablation before it, so its text reaches the feed) whose host is a lone surrogate
    (issue 30's input), and a newer TensorFlow run with lone surrogates in its framework version,
    a warning and a setting's name."""
    folder = tmp_path / "results"
    for r in site_results():
        ResultStore(folder).write(r)
    slower = make_result("pytorch", [351.0, 350.5, 352.2], created="2024-07-01T12:00:00+00:00",
                         practice={"channels_last": "0"})  # fmt: skip
    slower = slower.model_copy(update={"id": "20240701T120000Z-surrogate-host"})
    host_file = write_raw(folder, slower, lambda d: d["environment"].update(host=SURROGATE_HOST))
    assert '"host": "\\ud800 \\ud83d\\ude00"' in host_file.read_text()  # as issue 30 has it
    tf = make_result("tensorflow", [1001.0, 1003.0, 999.0], created="2024-07-02T12:00:00+00:00",
                     version="2.16.1")  # fmt: skip
    tf = tf.model_copy(update={"id": "20240702T120000Z-surrogate-tf"})

    def hostile_tf(d: dict) -> None:
        d["environment"]["framework_version"] = "2.16.1+\udcff"  # a byte 0xff, as Python keeps it
        d["warnings"] = ["odd \udfff warning"]
        d["spec"]["options"]["note\udc80"] = "1"

    tf_file = write_raw(folder, tf, hostile_tf)
    assert "\\udcff" in tf_file.read_text() and "\\udc80" in tf_file.read_text()
    return folder, host_file, tf_file


def test_a_lone_surrogate_in_a_result_blocks_no_command(tmp_path: Path) -> None:
    """Issue 30 row 1: history, compare, score, export, report and publish all complete on a
    folder where two results hold lone surrogates beside good ones, and show them escaped."""
    folder, host_file, tf_file = surrogate_folder(tmp_path)
    r = str(folder)

    code, out, _ = dlperf("history", "--results-dir", r, cwd=tmp_path)
    assert code == 0
    assert "20240701T120000Z-surrogate-host" in out and "20240702T120000Z-surrogate-tf" in out
    shown = " ".join(out.split())  # rich wraps long lines
    assert f"-> {HOST_SHOWN}" in shown and "2.16.1+\\udcff" in shown

    code, out, _ = dlperf("history", "--results-dir", r, "--json", cwd=tmp_path)
    assert code == 0
    points = {p["id"]: p for p in json.loads(out)["points"]}
    assert points["20240701T120000Z-surrogate-host"]["host"] == HOST_SHOWN
    assert points["20240701T120000Z-surrogate-host"]["verdict"] == "regression"
    assert points["20240702T120000Z-surrogate-tf"]["framework_version"] == "2.16.1+\\udcff"

    code, out, _ = dlperf("compare", r, r, cwd=tmp_path)
    assert code == 0 and "no change" in out
    code, out, _ = dlperf("compare", r, r, "--json", cwd=tmp_path)
    assert code == 0 and json.loads(out)

    freeze = ["--results-dir", r, "--machine", MACHINE]
    code, _, err = dlperf("score", "--freeze", "ref.json", *freeze, cwd=tmp_path)
    assert code == 0, err
    code, out, err = dlperf("score", "--reference", "ref.json", *freeze, cwd=tmp_path)
    assert code == 0 and out.strip(), err

    code, out, _ = dlperf("export", "--format", "json", "--results-dir", r, cwd=tmp_path)
    assert code == 0
    exported = {x["id"]: x for x in json.loads(out)}
    assert exported["20240701T120000Z-surrogate-host"]["host"] == HOST_SHOWN
    assert exported["20240702T120000Z-surrogate-tf"]["framework_version"] == "2.16.1+\\udcff"
    code, out, _ = dlperf("export", "--format", "csv", "--results-dir", r, cwd=tmp_path)
    assert code == 0 and HOST_SHOWN in out and len(out.splitlines()) == len(exported) + 1
    code, out, _ = dlperf("export", "--format", "superbench", "--results-dir", r, cwd=tmp_path)
    assert code == 0 and all(json.loads(line) for line in out.splitlines())  # JSON lines

    code, _, err = dlperf("report", "--results-dir", r, "--reports-dir", "rep", cwd=tmp_path)
    assert code == 0, err
    page = (tmp_path / "rep" / "resnet50.md").read_text()
    assert "20240702T120000Z-surrogate-tf" in page and "odd \\\\udfff warning" in page
    code, _, err = dlperf("report", "--results-dir", r, "--reports-dir", "fam", "--style",
                          "fambench", cwd=tmp_path)  # fmt: skip
    assert code == 0, err

    code, _, err = dlperf("publish", "--results-dir", r, "--out", "site", cwd=tmp_path)
    assert code == 0, err
    site = tmp_path / "site"
    summaries = [e.findtext(f"{ATOM}summary", "") for e in feed_entries(site)]
    assert any("host " in s and HOST_SHOWN in s for s in summaries), summaries
    assert HOST_SHOWN in (site / "regressions.html").read_text()
    for stored in (host_file, tf_file):  # the raw files are published as they are
        copy = site / "results" / stored.relative_to(folder)
        assert copy.read_bytes() == stored.read_bytes()


def test_a_result_file_whose_name_is_not_utf8_is_skipped_naming_it(tmp_path: Path) -> None:
    """Issue 30 row 1, its path: a result file named with a byte that is no UTF-8 (0xff) has a
    path no index, link or message can hold; it is skipped with one warning naming it (the byte
    escaped) and every command reads the rest."""
    folder = tmp_path / "results"
    good = [r for r in site_results() if r.spec.framework == "pytorch"]
    for r in good:
        ResultStore(folder).write(r)
    odd = make_result("pytorch", [999.0, 998.0, 1000.0], created="2024-07-01T12:00:00+00:00")
    odd = odd.model_copy(update={"id": "20240701T120000Z-odd-name"})
    odd_folder = os.fsencode(folder / benchmark_id(odd.spec))
    try:
        with open(os.path.join(odd_folder, b"\xff-copy.json"), "w") as f:
            f.write(odd.model_dump_json())
    except OSError as exc:  # a file system that takes only UTF-8 names (not Linux's own)
        pytest.skip(f"this file system refuses a name that is not UTF-8: {exc}")
    said = f"skipped {folder / benchmark_id(odd.spec)}/\\xff-copy.json: its name is not UTF-8 text"
    r = str(folder)
    for args in (
        ("history", "--results-dir", r),
        ("export", "--format", "csv", "--results-dir", r),
        ("report", "--results-dir", r, "--reports-dir", "rep"),
        ("publish", "--results-dir", r, "--out", "site"),
    ):
        code, out, err = dlperf(*args, cwd=tmp_path)
        assert code == 0, (args, err)
        assert " ".join(err.split()).count(said) == 1, (args, err)  # once, however it's read
    assert len(list((tmp_path / "site" / "results").rglob("*.json"))) == len(good)
    code, out, _ = dlperf("export", "--format", "json", "--results-dir", r, cwd=tmp_path)
    exported = {x["id"] for x in json.loads(out)}  # the newest of each configuration
    assert exported and exported <= {x.id for x in good} and odd.id not in exported


# ---------------------------------------------------------------- row 7: a copied result


def test_a_copied_result_is_paired_by_file_on_the_regressions_page_and_feed(
    tmp_path: Path,
) -> None:
    """Issue 30 row 7: X (1001 samples/s), then Y (500.5: a regression), then a copy of X's file
    edited into a newer run (500.5) that kept X's id. The change is Y against X's own file, as
    `dlperf history` judged it (not "500.5 -> 500.5 (-50.0%)" against the copy), its "before"
    links X's file; each duplicated id (and a plain copy of another result) is said once."""
    folder = tmp_path / "results"
    x = make_result("pytorch", [1000.0, 1001.0, 1002.0], created="2024-07-01T12:00:00+00:00")
    x = x.model_copy(update={"id": "20240701T120000Z-x"})
    y = make_result("pytorch", [500.0, 500.5, 501.0], created="2024-07-02T12:00:00+00:00")
    y = y.model_copy(update={"id": "20240702T120000Z-y"})
    edited = make_result("pytorch", [500.0, 500.5, 501.0], created="2024-07-03T12:00:00+00:00")
    tf = make_result("tensorflow", [990.0, 995.0, 993.0])
    x_file, y_file, tf_file = (path for _, path in ResultStore(folder).write_all([x, y, tf]))
    copy = folder / "copied" / f"{x.id}.json"  # another folder, the same id inside
    copy.parent.mkdir()
    copy.write_text(edited.model_copy(update={"id": x.id}).model_dump_json(indent=2))
    plain = folder / "zz-copied" / tf_file.name  # a copy as it was, sorting after its original
    plain.parent.mkdir()
    plain.write_bytes(tf_file.read_bytes())

    code, out, _ = dlperf("history", "--results-dir", str(folder), "--json", cwd=tmp_path)
    assert code == 0
    judged = [p for p in json.loads(out)["points"] if p["verdict"] == "regression"]
    assert [(p["path"], p["baseline_id"]) for p in judged] == [
        (y_file.relative_to(folder).as_posix(), x.id)
    ]
    change = judged[0]["change"]
    assert change == pytest.approx(500.5 / 1001.0 - 1)

    code, out, err = dlperf("publish", "--results-dir", str(folder), "--out", "site",
                            cwd=tmp_path)  # fmt: skip
    assert code == 0, err
    warned = " ".join(err.split())
    assert warned.count(f"result {x.id} is in 2 files") == 1, err
    assert f"{folder / 'copied' / x.id}.json" in warned and x_file.as_posix() in warned
    assert warned.count(f"result {tf.id} is in 2 files") == 1, err
    assert warned.count("warning:") == 2, err

    site = tmp_path / "site"
    entries = feed_entries(site)
    assert len(entries) == 1  # X -> Y; the copy against Y is no change
    entry = entries[0]
    assert entry.find(f"{ATOM}category").get("term") == "regression"
    links = related(entry)
    assert links["before"] == "results/" + x_file.relative_to(folder).as_posix()
    assert links["after"] == "results/" + y_file.relative_to(folder).as_posix()
    assert all((site / href).is_file() for href in links.values())
    summary = entry.findtext(f"{ATOM}summary", "")
    medians = re.search(r"median samples/s (\S+) -> (\S+) samples/s \(([-+0-9.]+)%", summary)
    assert medians, summary
    before, after, percent = (float(v) for v in medians.groups())
    assert (before, after) == (1001.0, 500.5)
    assert percent == pytest.approx(change * 100, abs=0.05)  # the change its two medians make
    page = (site / "regressions.html").read_text()
    row = re.findall(r'<tr id="change-[0-9a-f]{8}">(.*?)</tr>', page, flags=re.S)
    assert len(row) == 1 and "1001 → 500.5" in row[0]
    assert f'href="{links["before"]}"' in row[0] and "copied/" not in row[0]


# ---------------------------------------------------------------- row 8: the feed stays XML


NOT_XML = "\ufffe\uffff\x01\x08\x0b\x0c\x1f\x00\ud800"  # none of these can be in XML 1.0
NOT_XML_SHOWN = ("\\ufffe", "\\uffff", "\\x01", "\\x08", "\\x0b", "\\x0c", "\\x1f", "\\x00",
                 "\\ud800")  # fmt: skip


def test_the_feed_is_atom_whatever_the_results_fields_hold(tmp_path: Path) -> None:
    """Issue 30 row 8: two results forming a regression, every string field the schema lets be
    any text hostile (`untrusted.poison`) and holding U+FFFE, U+FFFF, C0 controls and a lone
    surrogate, their hosts and framework versions different so both reach the feed: `dlperf
    publish` writes a feed both XML parsers read as Atom, each of those characters shown escaped
    in the entry."""
    folder = tmp_path / "results"
    older = make_result("pytorch", [1000.0, 1001.0, 1002.0], version="2.3.1",
                        created="2024-07-01T12:00:00+00:00")  # fmt: skip
    newer = make_result("pytorch", [500.0, 500.5, 501.0], version="2.4.0",
                        created="2024-07-02T12:00:00+00:00")  # fmt: skip
    newer = newer.model_copy(update={"id": "20240702T120000Z-newer"})
    fields: set[str] = set()
    for i, (result, host) in enumerate(((older, "host-a"), (newer, "host-b"))):
        env = result.environment.model_copy(update={"host": host})
        data, taken = poison(result.model_copy(update={"environment": env}), 9)
        data["created"] = result.created  # kept a time: the order, older then newer, is known
        fields.update(taken)

        def harden(node: dict | list) -> None:
            for key, value in list(node.items() if isinstance(node, dict) else enumerate(node)):
                if isinstance(value, dict | list):
                    harden(value)
                elif isinstance(value, str) and value.startswith(OPEN):
                    node[key] = value + NOT_XML  # type: ignore[index]

        harden(data)
        path = folder / f"hostile-{i}" / f"{i}.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data, indent=2))  # U+FFFE and the rest as \u escapes
        assert "\\ufffe\\uffff\\u0001" in path.read_text()
    for field in ("environment.host", "environment.framework_version", "id"):
        assert field in fields, field

    code, out, err = dlperf("publish", "--results-dir", str(folder), "--out", "site",
                            cwd=tmp_path)  # fmt: skip
    assert code == 0, err
    entries = feed_entries(tmp_path / "site")
    assert len(entries) == 1
    entry = entries[0]
    assert entry.find(f"{ATOM}category").get("term") == "regression"
    title = entry.findtext(f"{ATOM}title", "")
    summary = entry.findtext(f"{ATOM}summary", "")
    links = [link.get("title", "") for link in entry.findall(f"{ATOM}link")]
    for text in (title, summary, *[t for t in links if t]):
        for shown in NOT_XML_SHOWN:
            assert shown in text, (shown, text[:300])
    # the fields that reach the entry, hostile: the machine, both ids, both framework versions
    # and hosts (what changed), the settings
    for field in ("environment.host#", "environment.framework_version#", "id#",
                  "environment.cpu#", "environment.gpu#", "spec.practice."):  # fmt: skip
        assert field in summary, (field, summary[:500])
    assert summary.count("environment.host#") >= 2  # before and after: "host A -> B"
