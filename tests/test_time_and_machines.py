"""One notion of time and of a machine across compare, score, report and history (issue 30,
rows 10-12), on real result files and the real CLI:

* "newest" is the latest creation time in UTC, whatever offset a result was written with;
* a machine is its recorded hardware: ids long enough that colliding takes intent, facts
  compared where results are paired, and no hardware recorded pairs with nothing unasked;
* two machines whose labels read the same are named with their ids."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf.assemble import build_result
from dlperf.cli import app
from dlperf.identity import OLD_MACHINE_ID_CHARS, Machine, machine_of
from dlperf.resultio import SkippedResult, load_result
from dlperf.schema import BenchmarkSpec, Environment, Repeat, RepeatStatus, Result, Window
from dlperf.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
BASE = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8]  # 7 repeats: Mann-Whitney can judge
SLOWER = [v * 0.8 for v in BASE]
EPYC = {"cpu": "AMD EPYC 7B13", "cpu_count": 2}

# Two CPU models whose machine ids collided under the old 32-bit scheme (8 hex digits of the
# fingerprint's SHA-256), found by trying "(stepping N)" suffixes: about 85,000 fingerprints,
# under two seconds in Python. `test_the_old_ids_of_two_clusters_collide` checks it still does.
INTEL = {"cpu": "Intel Xeon Gold 6338 CPU @ 2.00GHz (stepping 76135)", "cpu_count": 128}
AMD = {"cpu": "AMD EPYC 7763 64-Core Processor (stepping 84860)", "cpu_count": 128}


def old_machine_id(machine: Machine) -> str:
    """The machine id as dlperf made it before ids grew: 8 hex digits (32 bits)."""
    text = json.dumps(asdict(machine), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:OLD_MACHINE_ID_CHARS]


def made(values: list[float], *, created: str, rid: str, **hardware) -> Result:
    """A pytorch resnet50 result of `values` (ok repeats), created at `created` as written (an
    offset kept as given), on a machine with `hardware` (none: nothing recorded)."""
    spec = BenchmarkSpec(framework="pytorch", model="resnet50", batch_size=8,
                         repeats=len(values))  # fmt: skip
    repeats = [Repeat(index=i, status=RepeatStatus.ok, throughput=v,
                      window=Window(start_step=0, end_step=10, samples=80, elapsed_s=80 / v))
               for i, v in enumerate(values, 1)]  # fmt: skip
    env = Environment(dlperf_version="0.1.0", host="test-host", os="linux", python="3.11.7",
                      framework_version="2.1.0", **hardware)  # fmt: skip
    result = build_result(spec, rid, repeats, environment=env)
    return result.model_copy(update={"created": created})


def stored(folder: Path, *results: Result) -> Path:
    for result in results:
        ResultStore(folder).write(result)
    return folder


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


# ------------------------------------------------------------------------ row 10: time


def test_newest_is_the_latest_time_in_utc_in_compare_score_report_and_history(
    tmp_path: Path,
) -> None:
    """B holds an older result written in +09:00, whose text sorts after the newer UTC one:
    every command must take the newer (the slower one), as history does."""
    a = stored(tmp_path / "a", made(BASE, created="2025-01-01T00:00:00+00:00", rid="base", **EPYC))
    earlier = made(BASE, created="2025-01-02T08:00:00+09:00", rid="tokyo", **EPYC)  # 23:00 UTC
    later = made(SLOWER, created="2025-01-02T01:00:00+00:00", rid="utc", **EPYC)
    assert earlier.created > later.created  # as text, the earlier one is "newer"
    b = stored(tmp_path / "b", earlier, later)
    (tokyo_file,) = (tmp_path / "b").glob("*/tokyo.json")
    assert json.loads(tokyo_file.read_text())["created"] == "2025-01-02T08:00:00+09:00"
    # Every reader gets the time in UTC.
    assert load_result(tokyo_file).created == "2025-01-01T23:00:00+00:00"

    out = cli("history", "--results-dir", str(b), "--json")
    assert out.exit_code == 0, out.output
    points = json.loads(out.stdout)["points"]
    assert [p["id"] for p in points] == ["tokyo", "utc"]
    assert points[-1]["verdict"] == "regression"

    out = cli("compare", str(a), str(b), "--json")
    assert out.exit_code == 2, out.output  # it read "no change" against the +09:00 result
    (pair,) = json.loads(out.stdout)["pairs"]
    assert pair["b_id"] == points[-1]["id"] == "utc" and pair["verdict"] == "regression"

    reference = tmp_path / "reference.json"
    assert cli("score", "--freeze", str(reference), "--results-dir", str(a)).exit_code == 0
    out = cli("score", "--reference", str(reference), "--results-dir", str(b))
    assert out.exit_code == 0, out.output
    speedup = statistics.median(SLOWER) / statistics.median(BASE)
    assert f"score {1000 * speedup:.1f}" in out.output  # the later result's, not the earlier's

    reports = tmp_path / "reports"
    out = cli("report", "--results-dir", str(b), "--reports-dir", str(reports))
    assert out.exit_code == 0, out.output
    page = (reports / "resnet50.md").read_text()
    # The page is of the newest result: the later one, its time in UTC, its median.
    assert "Made from 1 result measured or imported 2025-01-02 01:00 (UTC)" in page
    assert "| utc | run |" in page and "tokyo" not in page
    assert f"| {statistics.median(SLOWER):.2f} |" in page
    assert f"{statistics.median(BASE):.2f}" not in page


def test_a_result_whose_created_is_no_time_is_skipped_naming_it(tmp_path: Path) -> None:
    """A time that cannot be ordered is refused on load, not sorted as text among times."""
    folder = stored(tmp_path, made(BASE, created="2025-01-01T00:00:00+00:00", rid="ok", **EPYC))
    path = ResultStore(folder).write(made(BASE, created="yesterday", rid="bad", **EPYC))
    with pytest.warns(SkippedResult, match=r"(?s)bad\.json.*'yesterday' is not an ISO 8601 time"):
        assert [r.id for r in ResultStore(folder).results()] == ["ok"]
    assert path.is_file()  # left as it is


# --------------------------------------------------------------------- row 11: machines


def test_the_old_ids_of_two_clusters_collide() -> None:
    intel, amd = Machine(**INTEL), Machine(**AMD)
    assert intel != amd and old_machine_id(intel) == old_machine_id(amd)
    assert intel.id != amd.id and len(intel.id) == 16
    assert intel.id.startswith(old_machine_id(intel))  # an old id is its new id's start


def test_machines_whose_old_ids_collide_are_never_compared(tmp_path: Path) -> None:
    """The Intel cluster's results against the AMD cluster's: two machines (exit 3), where the
    32-bit id made them one and compare called the AMD cluster a regression (exit 2)."""
    a = stored(tmp_path / "a", made(BASE, created="2025-01-01T00:00:00+00:00", rid="i", **INTEL))
    b = stored(tmp_path / "b", made(SLOWER, created="2025-01-02T00:00:00+00:00", rid="a", **AMD))
    out = cli("compare", str(a), str(b), "--json")
    assert out.exit_code == 3, out.output
    data = json.loads(out.stdout)
    assert data["pairs"] == [] and "different machines" in data["reason"]
    out = cli("compare", str(a), str(b), "--across-machines", "--json")
    assert out.exit_code == 2, out.output
    (pair,) = json.loads(out.stdout)["pairs"]
    assert pair["machine_id"] == Machine(**INTEL).id
    assert pair["machine_b_id"] == Machine(**AMD).id


def test_compare_score_and_history_read_the_facts_not_only_the_id(
    tmp_path: Path, monkeypatch
) -> None:
    """With the old 32-bit id put back, the two clusters' ids are equal again: compare, score
    and history still keep them apart, by their recorded hardware."""
    monkeypatch.setattr(Machine, "id", property(old_machine_id))
    assert Machine(**INTEL).id == Machine(**AMD).id
    a = stored(tmp_path / "a", made(BASE, created="2025-01-01T00:00:00+00:00", rid="i", **INTEL))
    b = stored(tmp_path / "b", made(SLOWER, created="2025-01-02T00:00:00+00:00", rid="a", **AMD))
    out = cli("compare", str(a), str(b))
    assert out.exit_code == 3 and "different machines" in out.output, out.output
    both = stored(tmp_path / "both", *ResultStore(a).results(), *ResultStore(b).results())
    out = cli("history", "--results-dir", str(both), "--json")
    assert out.exit_code == 0, out.output
    assert [p["verdict"] for p in json.loads(out.stdout)["points"]] == ["first", "first"]
    reference = tmp_path / "reference.json"
    out = cli("score", "--freeze", str(reference), "--results-dir", str(both))
    assert out.exit_code == 1 and "from 2 machines" in str(out.exception)


def test_results_with_no_hardware_recorded_pair_only_when_asked(tmp_path: Path) -> None:
    """Two folders of imported-looking results, no hardware recorded: not one machine."""
    a = stored(tmp_path / "a", made(BASE, created="2025-01-01T00:00:00+00:00", rid="x"))
    b = stored(tmp_path / "b", made(SLOWER, created="2025-01-02T00:00:00+00:00", rid="y"))
    assert not machine_of(ResultStore(a).results()[0]).known
    out = cli("compare", str(a), str(b))
    assert out.exit_code == 3, out.output
    assert "hardware was not recorded" in out.output and "--across-machines" in out.output
    out = cli("compare", str(a), str(b), "--across-machines", "--json")
    assert out.exit_code == 2, out.output
    assert json.loads(out.stdout)["pairs"][0]["verdict"] == "regression"
    reference = tmp_path / "reference.json"
    assert cli("score", "--freeze", str(reference), "--results-dir", str(a)).exit_code == 0
    out = cli("score", "--reference", str(reference), "--results-dir", str(b))
    assert out.exception.exit_code == 3 and "not recorded" in str(out.exception)
    out = cli("score", "--reference", str(reference), "--results-dir", str(b),
              "--across-machines")  # fmt: skip
    assert out.exit_code == 0, out.output


def test_history_judges_no_unknown_machine_against_another_unless_asked(tmp_path: Path) -> None:
    """One folder of results with no hardware recorded (imported logs from anywhere): history
    lists them, judges none of them against another (no regression on the site or its feed
    either) unless --across-machines; a known machine's series is judged as ever."""
    from dlperf.report.site import write_site

    day1, day2 = "2025-01-01T00:00:00+00:00", "2025-01-02T00:00:00+00:00"
    folder = stored(tmp_path / "results",
                    made(BASE, created=day1, rid="x"), made(SLOWER, created=day2, rid="y"),
                    made(BASE, created=day1, rid="k1", **EPYC),
                    made(SLOWER, created=day2, rid="k2", **EPYC))  # fmt: skip
    out = cli("history", "--results-dir", str(folder), "--json")
    assert out.exit_code == 0, out.output
    verdicts = {p["id"]: (p["verdict"], p["baseline_id"]) for p in json.loads(out.stdout)["points"]}
    assert verdicts == {"x": ("machine unknown", None), "y": ("machine unknown", None),
                        "k1": ("first", None), "k2": ("regression", "k1")}  # fmt: skip
    assert "--across-machines judges them" in " ".join(out.output.split())
    out = cli("history", "--results-dir", str(folder), "--across-machines", "--json")
    verdicts = {p["id"]: (p["verdict"], p["baseline_id"]) for p in json.loads(out.stdout)["points"]}
    assert verdicts["y"] == ("regression", "x") and verdicts["k2"] == ("regression", "k1")
    write_site(folder, tmp_path / "site")
    feed = (tmp_path / "site" / "regressions.xml").read_text()
    assert "k2" in feed and "/y.json" not in feed  # the known machine's regression alone


def test_an_old_short_machine_id_still_names_its_machine(tmp_path: Path) -> None:
    """Reports and scripts written before ids grew hold 8 digits: --machine takes them."""
    folder = stored(tmp_path, made(BASE, created="2025-01-01T00:00:00+00:00", rid="i", **INTEL),
                    made(BASE, created="2025-01-01T00:00:00+00:00", rid="e", **EPYC))  # fmt: skip
    short = old_machine_id(Machine(**EPYC))
    out = cli("history", "--results-dir", str(folder), "--machine", short, "--json")
    assert out.exit_code == 0, out.output
    assert [p["id"] for p in json.loads(out.stdout)["points"]] == ["e"]
    reference = tmp_path / "reference.json"
    out = cli("score", "--freeze", str(reference), "--results-dir", str(folder), "--machine", short)
    assert out.exit_code == 0, out.output
    assert json.loads(reference.read_text())["machine"]["id"] == Machine(**EPYC).id


# ---------------------------------------------------------------- row 12: equal labels


# The CPU's own name holds the count, or the count is recorded apart: one label, two machines.
NAME_HOLDS_COUNT = {"cpu": "AMD EPYC, 2 CPUs"}
COUNT_APART = {"cpu": "AMD EPYC", "cpu_count": 2}


def test_two_machines_with_one_label_are_named_with_their_ids(tmp_path: Path) -> None:
    one, two = Machine(**NAME_HOLDS_COUNT), Machine(**COUNT_APART)
    assert one.label == two.label == "AMD EPYC, 2 CPUs" and one.id != two.id
    a = stored(
        tmp_path / "a", made(BASE, created="2025-01-01T00:00:00+00:00", rid="x", **NAME_HOLDS_COUNT)
    )
    b = stored(tmp_path / "b",
               made(BASE, created="2025-01-02T00:00:00+00:00", rid="y", **COUNT_APART))  # fmt: skip
    out = cli("compare", str(a), str(b), "--json")
    assert out.exit_code == 3, out.output
    reason = json.loads(out.stdout)["reason"]
    assert (f"(A: AMD EPYC, 2 CPUs (machine {one.id}); B: AMD EPYC, 2 CPUs (machine {two.id}))"
            in reason)  # fmt: skip
    # History of both, through the real command line: two headings, each with its id.
    both = stored(tmp_path / "both", *ResultStore(a).results(), *ResultStore(b).results())
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "history", "--results-dir", str(both)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    headings = [line for line in done.stdout.splitlines() if " on AMD EPYC" in line]
    assert len(headings) == 2 and len(set(headings)) == 2, done.stdout
    assert sorted(h.split(" on ")[1].split(" (medians")[0] for h in headings) == sorted(
        [f"AMD EPYC, 2 CPUs (machine {one.id})", f"AMD EPYC, 2 CPUs (machine {two.id})"]
    )
    # One machine alone is named by its label only.
    out = cli("history", "--results-dir", str(a))
    assert out.exit_code == 0 and "on AMD EPYC, 2 CPUs (medians" in out.output, out.output
