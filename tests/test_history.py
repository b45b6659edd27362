"""History: the results folder's index (rebuilt from the JSON files when stale), the git
commits a result records, and `dlperf history`'s verdicts on hand-built results."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf import gitinfo
from dlperf.assemble import build_result
from dlperf.cli import app
from dlperf.compare import compare_pair
from dlperf.history import HistoryFilters, history, history_points
from dlperf.identity import benchmark_id
from dlperf.index import INDEX_FILE, IndexRebuilt, ResultIndex, open_index
from dlperf.resultio import SkippedResult, load_result
from dlperf.schema import (
    SCHEMA_VERSION,
    BenchmarkSpec,
    Environment,
    Repeat,
    RepeatStatus,
    SourceInfo,
    Window,
)
from dlperf.store import ResultStore

BASE = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8]  # 7 repeats around 100 samples/s


def result(values, *, when: str, framework: str = "pytorch", model: str = "resnet50",
           fw: str = "2.1.0", batch: int = 8, rid: str | None = None, **env):  # fmt: skip
    """A stored-shape result of `values` (ok repeats; a None value is a crashed repeat)."""
    spec = BenchmarkSpec(framework=framework, model=model, batch_size=batch,
                         repeats=len(values))  # fmt: skip
    repeats = [
        Repeat(index=i, status=RepeatStatus.ok, throughput=v,
               window=Window(start_step=0, end_step=10, samples=10 * batch,
                             elapsed_s=10 * batch / v))
        if v is not None else
        Repeat(index=i, status=RepeatStatus.crashed, message="exited with status 1")
        for i, v in enumerate(values, 1)
    ]  # fmt: skip
    environment = Environment(dlperf_version="0.1.0", host="test-host", os="linux",
                              python="3.11.7", framework_version=fw,
                              **{"cpu": "Test CPU", "cpu_count": 2, **env})  # fmt: skip
    rid = rid or when[:19].replace("-", "").replace(":", "") + f"Z-{framework[:3]}{model[:3]}"
    built = build_result(spec, rid, repeats,
                         environment=environment)  # fmt: skip
    return built.model_copy(update={"created": when})


def store(folder: Path, *results) -> list[Path]:
    return [ResultStore(folder).write(r) for r in results]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def new_repo(path: Path) -> str:
    """A git repository at `path` with one commit; returns its full hash."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "train.py").write_text("print('v1')\n")
    git(path, "add", "train.py")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return git(path, "rev-parse", "HEAD")


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


# ------------------------------------------------------------------------------- the index


def test_index_follows_added_changed_and_removed_files(tmp_path: Path) -> None:
    a, b, c = (result(BASE, when=f"2025-01-0{d}T10:00:00+00:00") for d in (1, 2, 3))
    pa, pb, pc = store(tmp_path, a, b, c)
    index, first = open_index(tmp_path)
    index.close()
    assert (first.files, first.added, first.changed, first.removed) == (3, 3, 0, 0)
    assert not first.in_memory and (tmp_path / INDEX_FILE).is_file()
    # Nothing changed: nothing is parsed again.
    index, again = open_index(tmp_path)
    assert (again.added, again.changed, again.removed) == (0, 0, 0)
    assert [r.id for r in index.query()] == [a.id, b.id, c.id]
    index.close()
    # A new file, a file rewritten with other numbers, a file removed.
    d = result([50.0] * 7, when="2025-01-04T10:00:00+00:00")
    store(tmp_path, d)
    rewritten = result([80.0] * 7, when=b.created, rid=b.id)
    store(tmp_path, rewritten)  # the same path, written anew (temp file + rename)
    pc.unlink()
    index, third = open_index(tmp_path)
    rows = {r.id: r for r in index.query()}
    index.close()
    assert (third.files, third.added, third.changed, third.removed) == (3, 1, 1, 1)
    assert sorted(rows) == sorted([a.id, b.id, d.id])
    assert rows[b.id].median == 80.0 and rows[b.id].values == (80.0,) * 7
    assert rows[d.id].median == 50.0 and rows[a.id].median == 100.0 and rows[a.id].n == 7
    # The index is no result: the folder's readers never see it, nor does git.
    assert all(p.suffix == ".json" for p in ResultStore(tmp_path).paths())
    assert len(ResultStore(tmp_path).results()) == 3
    assert "/.index.sqlite*" in (tmp_path / ".gitignore").read_text()


@needs_git
def test_committed_results_leave_the_index_out(tmp_path: Path) -> None:
    new_repo(tmp_path)
    store(tmp_path / "results", result(BASE, when="2025-01-01T10:00:00+00:00"))
    history_points(tmp_path / "results")
    untracked = git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert sorted(line[3:] for line in untracked) == [
        "results/.gitignore",
        f"results/{benchmark_id(result(BASE, when='2025-01-01T10:00:00+00:00').spec)}/"
        "20250101T100000Z-pytres.json",
    ]
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / ".gitignore").write_text("mine\n")
    history_points(tmp_path / "own")
    assert (tmp_path / "own" / ".gitignore").read_text() == "mine\n"  # never replaced


def test_index_keeps_an_unreadable_file_as_skipped_until_it_changes(tmp_path: Path) -> None:
    store(tmp_path, result(BASE, when="2025-01-01T10:00:00+00:00"))
    bad = tmp_path / "pytorch_resnet50_x" / "broken.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    index, first = open_index(tmp_path)
    index.close()
    assert [path for path, _ in first.skipped] == ["pytorch_resnet50_x/broken.json"]
    assert "cannot read result" in first.skipped[0][1]
    index, second = open_index(tmp_path)
    assert (second.added, second.changed) == (0, 0) and len(second.skipped) == 1
    assert len(index.query()) == 1  # skipped files are no rows of a query
    index.close()
    good = result([90.0] * 7, when="2025-01-02T10:00:00+00:00")
    bad.write_text(good.model_dump_json())  # the file fixed: read again, now a result
    index, third = open_index(tmp_path)
    assert third.changed == 1 and third.skipped == ()
    assert len(index.query()) == 2
    index.close()


def test_a_corrupt_index_is_rebuilt_and_another_format_is_read_again(tmp_path: Path) -> None:
    store(tmp_path, result(BASE, when="2025-01-01T10:00:00+00:00"))
    (tmp_path / INDEX_FILE).write_bytes(b"this is not an SQLite database" * 100)
    with pytest.warns(IndexRebuilt, match="not an SQLite database"):
        index, refresh = open_index(tmp_path)
    index.close()
    assert not refresh.in_memory and refresh.added == 1
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        conn.execute("UPDATE meta SET value = '2:7' WHERE key = 'format'")  # an older dlperf's
    index, refresh = open_index(tmp_path)
    index.close()
    assert refresh.added == 1  # the old format's rows were dropped and read again


INDEX_DAMAGE = {
    "another program's column": [
        "ALTER TABLE results ADD COLUMN note TEXT NOT NULL DEFAULT 'theirs'"],
    "another program's table": [
        "DROP TABLE results",
        "CREATE TABLE results (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, "
        "inode INTEGER, error TEXT, verdict TEXT)",
        "INSERT INTO results VALUES ('x/y.json', 1, 2, 3, NULL, 'forged')"],
    "no format": ["DELETE FROM meta"],
    "values not JSON": ["UPDATE results SET \"values\" = 'not json'"],
    "settings not JSON": ["UPDATE results SET settings = '{'"],
    "a median as text": ["UPDATE results SET median = 'fast'"],
    "a count as text": ["UPDATE results SET n = 'seven'"],
    "a forged median": ["UPDATE results SET median = 12345.0 WHERE median IS NOT NULL"],
    "a forged version": ["UPDATE results SET framework_version = '9.9.9-forged'"],
    "a forged test of compare": ["UPDATE significance SET p = 'low', significant = 7"],
    "a forged verdict of compare": ["UPDATE significance SET significant = 1 - significant"],
}  # fmt: skip


@pytest.mark.parametrize("damage", INDEX_DAMAGE)
def test_a_foreign_or_altered_index_is_rebuilt_from_the_json_files(
    tmp_path: Path, damage: str
) -> None:
    """Issue 23 row 9: a real index altered with sqlite3 (other columns, another program's
    table, rows with non-JSON, mistyped or forged values whose file stamps still match): the
    history is the JSON files', with an IndexRebuilt warning, then quiet again."""
    timeline(tmp_path)
    truth = [asdict(p) for p in history_points(tmp_path)]
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        for statement in INDEX_DAMAGE[damage]:
            conn.execute(statement)
    conn.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [asdict(p) for p in history_points(tmp_path)]
    assert got == truth
    rebuilt = [str(w.message) for w in caught if w.category is IndexRebuilt]
    assert len(rebuilt) == 1 and "rebuilt from the result files" in rebuilt[0], rebuilt
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [asdict(p) for p in history_points(tmp_path)] == truth
    assert not [w for w in caught if w.category is IndexRebuilt]


@pytest.mark.multiprocess
def test_history_on_a_damaged_index_warns_and_never_shows_a_traceback(tmp_path: Path) -> None:
    """The command line on an index whose rows were forged: exit 0, the true medians, the
    warning on stderr."""
    timeline(tmp_path)
    history_points(tmp_path)
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        conn.execute("UPDATE results SET median = 4242.0, \"values\" = 'oops'")
    conn.close()
    done = subprocess.run(
        [sys.executable, "-m", "dlperf", "history", "--results-dir", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "4242" not in done.stdout
    assert "warning: the results index" in done.stderr and "rebuilt" in done.stderr


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_the_index_gitignore_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """The `.gitignore` written beside the index has the mode every shared file gets under
    the umask (0644 under 022), not a temporary file's 0600 (issue 23)."""
    store(tmp_path, result(BASE, when="2025-01-01T10:00:00+00:00"))
    code = "import sys; from dlperf.index import open_index; open_index(sys.argv[1])[0].close()"
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], check=True, preexec_fn=lambda: os.umask(umask)
    )
    assert (tmp_path / ".gitignore").stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_index_that_cannot_be_written_lives_in_memory(tmp_path: Path) -> None:
    store(tmp_path, result(BASE, when="2025-01-01T10:00:00+00:00"))
    (tmp_path / INDEX_FILE).mkdir()  # SQLite cannot open a folder: as a read-only file would
    index, refresh = open_index(tmp_path)
    assert refresh.in_memory and refresh.added == 1 and "memory" in refresh.location
    assert len(index.query()) == 1
    index.close()
    with ResultIndex(tmp_path, in_memory=True) as forced:
        assert forced.in_memory and forced.refresh().added == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_results_folder_still_gives_a_history(tmp_path: Path) -> None:
    store(tmp_path, result(BASE, when="2025-01-01T10:00:00+00:00"))
    open_index(tmp_path)[0].close()  # an index stored earlier, read as a starting point
    store(tmp_path, result([80.0] * 7, when="2025-01-02T10:00:00+00:00"))
    modes = [(p, p.stat().st_mode) for p in (tmp_path, *tmp_path.iterdir())]
    try:
        for p, _ in modes:
            p.chmod(0o555)
        points, refresh = history(tmp_path)
        assert refresh.in_memory and refresh.added == 1  # only the new file was parsed
        assert [p.verdict for p in points] == ["first", "regression"]
    finally:
        for p, mode in modes:
            p.chmod(mode)


def test_concurrent_refreshes_take_turns(tmp_path: Path) -> None:
    store(tmp_path, *(result(BASE, when=f"2025-01-{d:02d}T10:00:00+00:00") for d in (1, 2)))
    one, two = ResultIndex(tmp_path), ResultIndex(tmp_path)
    try:
        assert one.refresh().added == 2
        assert two.refresh().added == 0  # the other connection's rows, committed, are seen
        one.conn.execute("BEGIN IMMEDIATE")  # one holds the write lock ...
        two.conn.execute("PRAGMA busy_timeout = 50")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            two.refresh()  # ... so the other waits (here: gives up after 50 ms)
        one.conn.execute("ROLLBACK")
        assert two.refresh().added == 0 and len(two.query()) == 2
    finally:
        one.close()
        two.close()


# ------------------------------------------------------------------------------- history

# One configuration over time (7 repeats each): steady, faster by 1 % (no change), a 20 %
# drop under a new framework version, a failed run, the drop's level again, then back up.
TIMELINE = [
    ("2025-01-01T10:00:00+00:00", BASE, "2.1.0"),
    ("2025-01-02T10:00:00+00:00", [v * 1.01 for v in BASE], "2.1.0"),
    ("2025-01-03T10:00:00+00:00", [v * 0.8 for v in BASE], "2.2.0"),
    ("2025-01-04T10:00:00+00:00", [None] * 7, "2.2.0"),
    ("2025-01-05T10:00:00+00:00", [v * 0.81 for v in BASE], "2.2.0"),
    ("2025-01-06T10:00:00+00:00", [v * 1.02 for v in BASE], "2.2.1"),
]


def timeline(folder: Path) -> list:
    made = [result(values, when=when, fw=fw) for when, values, fw in TIMELINE]
    store(folder, *made)
    return made


def test_history_verdicts_use_compares_test(tmp_path: Path) -> None:
    made = timeline(tmp_path)
    points = history_points(tmp_path)
    assert [p.result_id for p in points] == [r.id for r in made]
    assert [p.verdict for p in points] == [
        "first", "no change", "regression", "failed", "no change", "improvement"]  # fmt: skip
    assert [p.baseline_id for p in points] == [
        None, made[0].id, made[1].id, made[2].id, made[2].id, made[4].id]  # fmt: skip
    # Each verdict is exactly what `dlperf compare` says of the two results.
    for point in points:
        if point.verdict in ("first", "failed"):
            continue
        baseline = next(r for r in made if r.id == point.baseline_id)
        now = next(r for r in made if r.id == point.result_id)
        row = compare_pair(baseline, now, 0.05)
        assert (point.verdict, point.test, point.p, point.change) == (
            row.verdict, row.test, row.p, row.change)  # fmt: skip
    drop = points[2]
    assert drop.test == "Mann-Whitney U" and drop.p == pytest.approx(2 / 3432)  # 7 vs 7 apart
    assert drop.change == pytest.approx(0.8 / 1.01 - 1, rel=1e-9)
    assert drop.median == pytest.approx(100.0 * 0.8) and drop.n == 7
    assert drop.unit == "samples/s" and drop.higher_is_better
    assert drop.changes == ("framework 2.1.0 -> 2.2.0",)
    assert points[3].median is None and points[3].n == 0 and points[3].status == "failed"
    assert points[4].changes == () and points[5].changes == ("framework 2.2.0 -> 2.2.1",)
    assert points[5].change == pytest.approx(1.02 / 0.81 - 1)


def test_history_keeps_compares_test_per_pair_of_files(tmp_path: Path) -> None:
    made = timeline(tmp_path)
    first = history_points(tmp_path)
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        kept = conn.execute("SELECT a_path, b_path, test FROM significance").fetchall()
    assert len(kept) == 4  # the pairs with ok repeats on both sides
    assert history_points(tmp_path) == first  # the kept tests give the same points
    # A file rewritten: its pairs are tested again, on its new numbers.
    store(tmp_path, result([v * 0.5 for v in BASE], when=made[1].created, rid=made[1].id))
    again = history_points(tmp_path)
    assert [p.verdict for p in again][:3] == ["first", "regression", "improvement"]
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        assert conn.execute("SELECT count(*) FROM significance").fetchone() == (4,)


def test_history_with_three_repeats_falls_back_to_the_intervals(tmp_path: Path) -> None:
    store(tmp_path, result([100.0, 101.0, 99.0], when="2025-02-01T00:00:00+00:00"),
          result([90.0, 91.0, 89.0], when="2025-02-02T00:00:00+00:00"),
          result([80.0, 95.0, 110.0], when="2025-02-03T00:00:00+00:00"))  # fmt: skip
    points = history_points(tmp_path)
    # 3 vs 3 can never reach p 0.05: the mean's t-intervals decide. [100, 101, 99] and
    # [90, 91, 89] (each mean +- 4.303 x 1 / sqrt 3 = 2.48) are apart; [80, 95, 110] is wide.
    assert [(p.verdict, p.test) for p in points] == [
        ("first", None),
        ("regression", "95% CI overlap"),
        ("within noise", "95% CI overlap"),
    ]
    assert points[1].change == pytest.approx(-0.1) and points[1].p is None


def test_history_changes_name_versions_and_commits(tmp_path: Path) -> None:
    one, two = "a" * 40, "b" * 40
    store(tmp_path,
          result(BASE, when="2025-03-01T00:00:00+00:00", dlperf_commit=one, workdir_commit=one,
                 workdir_dirty=False),
          result(BASE, when="2025-03-02T00:00:00+00:00", dlperf_commit=two, workdir_commit=one,
                 workdir_dirty=True))  # fmt: skip
    first, second = history_points(tmp_path)
    assert second.changes == (f"dlperf commit {one[:12]} -> {two[:12]}",
                              f"workdir commit {one[:12]} -> {one[:12]}+dirty")  # fmt: skip
    assert (second.dlperf_commit, second.workdir_commit, second.workdir_dirty) == (two, one, True)
    assert first.changes == () and first.dlperf_dirty is None


def test_history_filters(tmp_path: Path) -> None:
    timeline(tmp_path)
    store(tmp_path,
          result(BASE, when="2025-01-02T10:00:00+00:00", framework="tensorflow"),
          result(BASE, when="2025-01-03T10:00:00+00:00", model="bert", batch=32))  # fmt: skip
    everything = history_points(tmp_path)
    assert len(everything) == 8 and len({p.series for p in everything}) == 3
    only_tf = history_points(tmp_path, HistoryFilters(frameworks=("tensorflow",)))
    assert [p.framework for p in only_tf] == ["tensorflow"]
    bert = history_points(tmp_path, HistoryFilters(models=("bert",)))
    assert [p.model for p in bert] == ["bert"]
    key = everything[-1].benchmark_id  # pytorch resnet50's
    assert {p.benchmark_id for p in history_points(tmp_path, HistoryFilters(contains=(key,)))} \
        == {key}  # fmt: skip
    assert history_points(tmp_path, HistoryFilters(contains=("resnet50", "bert"))) == []
    window = history_points(
        tmp_path, HistoryFilters(frameworks=("pytorch",), models=("resnet50",),
                                 since="2025-01-03", until="2025-01-05"))  # fmt: skip
    assert [p.created[:10] for p in window] == ["2025-01-03", "2025-01-04", "2025-01-05"]
    # Filtered out of view is not out of the judgement: the first shown point's baseline is
    # the one before the window when asked by --last; by --since it starts afresh.
    assert window[0].verdict == "first"
    newest = history_points(tmp_path, HistoryFilters(frameworks=("pytorch",),
                                                     models=("resnet50",)), last=2)  # fmt: skip
    assert [p.verdict for p in newest] == ["no change", "improvement"]
    with pytest.raises(Exception, match="not a date"):
        history_points(tmp_path, HistoryFilters(since="last tuesday"))


def test_history_cli_table_and_json(tmp_path: Path) -> None:
    timeline(tmp_path)
    runner = CliRunner()
    out = runner.invoke(app, ["history", "--results-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "regression" in out.output and "improvement" in out.output
    assert "changed since" in out.output and "framework" in out.output
    assert "6 point(s) of 1 series on 1 machine(s)" in out.output
    out = runner.invoke(app, ["history", "--results-dir", str(tmp_path), "--json", "--last", "3",
                              "--framework", "pytorch", "--config", "resnet50"])  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["threshold"] == 0.05 and data["filters"]["contains"] == ["resnet50"]
    assert [p["verdict"] for p in data["points"]] == ["failed", "no change", "improvement"]
    assert data["points"][-1]["changes"] == ["framework 2.2.0 -> 2.2.1"]
    out = runner.invoke(app, ["history", "--results-dir", str(tmp_path), "--model", "bert"])
    assert out.exit_code == 1  # a model none of the results has: those they have are named
    assert "--model 'bert': no results of bert; models in " in str(out.exception)
    assert str(out.exception).endswith(": resnet50")
    out = runner.invoke(app, ["history", "--results-dir", str(tmp_path), "--config", "nosuch"])
    assert out.exit_code == 1 and "match these filters" in str(out.exception)


def test_history_warns_about_files_that_are_no_results(tmp_path: Path) -> None:
    timeline(tmp_path)
    bad = next(tmp_path.glob("*/")) / "junk.json"
    bad.write_text("[]")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        points = history_points(tmp_path)
    assert len(points) == 6
    assert [str(w.message) for w in caught if w.category is SkippedResult] == [
        f"skipped {bad}: not a dlperf result (a JSON list)"]  # fmt: skip


# ------------------------------------------------------------------------------- commits


@needs_git
def test_provenance_records_the_working_repository(tmp_path: Path) -> None:
    head = new_repo(tmp_path / "work")
    found = gitinfo.provenance(tmp_path / "work")
    assert (found["workdir_commit"], found["workdir_dirty"]) == (head, False)
    (tmp_path / "work" / "train.py").write_text("print('v2')\n")  # a tracked file changed
    (tmp_path / "work" / "results").mkdir()  # untracked files do not count
    (tmp_path / "work" / "results" / "r.json").write_text("{}")
    assert gitinfo.provenance(tmp_path / "work")["workdir_dirty"] is True
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    found = gitinfo.provenance(outside)
    assert (found["workdir_commit"], found["workdir_dirty"]) == (None, None)


@needs_git
def test_dlperfs_commit_only_from_its_own_checkout(tmp_path: Path) -> None:
    head = new_repo(tmp_path / "project")
    site = tmp_path / "project" / ".venv" / "lib" / "site-packages"  # a wheel in a project
    site.mkdir(parents=True)
    assert gitinfo.source_checkout(site) is None
    assert gitinfo.source_checkout(tmp_path / "project").commit == head
    here = gitinfo.dlperf_checkout()  # these tests run from dlperf's checkout
    assert here is not None and here.commit == git(gitinfo.DLPERF_ROOT, "rev-parse", "HEAD")


def test_provenance_without_git_is_none(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on PATH: never a failure
    assert gitinfo.checkout_of(tmp_path) is None
    assert gitinfo.last_commit_touching(tmp_path) is None


@needs_git
def test_imported_and_run_results_carry_the_commits(tmp_path: Path, monkeypatch) -> None:
    from dlperf.importers import imported_result
    from dlperf.system import run_environment

    head = new_repo(tmp_path / "work")
    monkeypatch.chdir(tmp_path / "work")  # where the user runs dlperf
    made = result(BASE, when="2025-01-01T00:00:00+00:00")
    imported = imported_result(made.spec, made.repeats)
    env = imported.environment
    assert (env.workdir_commit, env.workdir_dirty) == (head, False)
    assert env.dlperf_commit == git(gitinfo.DLPERF_ROOT, "rev-parse", "HEAD")
    path = ResultStore(tmp_path / "results").write(imported)
    assert load_result(path).environment.workdir_commit == head
    ran = run_environment({"python": "3.11.7"}, None, None)
    assert (ran.workdir_commit, ran.workdir_dirty, ran.dlperf_commit) == (
        head, False, env.dlperf_commit)  # fmt: skip


def test_a_version_5_result_loads_without_commits(tmp_path: Path) -> None:
    path = ResultStore(tmp_path).write(result(BASE, when="2025-01-01T00:00:00+00:00"))
    data = json.loads(path.read_text())
    for name in ("dlperf_commit", "dlperf_dirty", "workdir_commit", "workdir_dirty"):
        del data["environment"][name]
    path.write_text(json.dumps({**data, "schema_version": 5}))
    loaded = load_result(path)
    assert loaded.schema_version == SCHEMA_VERSION == 9
    assert loaded.environment.workdir_commit is None and loaded.environment.dlperf_commit is None


def test_official_results_show_their_upstream_commit_change(tmp_path: Path) -> None:
    made = [result(BASE, when=f"2025-04-0{d}T00:00:00+00:00") for d in (1, 2)]
    made = [r.model_copy(update={"source": SourceInfo(name="up", url="u", commit=c * 40)})
            for r, c in zip(made, "cd", strict=True)]  # fmt: skip
    store(tmp_path, *made)
    assert history_points(tmp_path)[1].changes == (f"upstream {'c' * 12} -> {'d' * 12}",)


def test_commit_labels_keep_an_archive_pins_kind() -> None:
    from dlperf.identity import commit_label

    assert commit_label("0123456789abcdef" * 2 + "01234567", True) == "0123456789ab+dirty"
    assert commit_label("sha256:" + "90ffccda8e3a" * 5 + "abcd", None) == "sha256:90ffccda8e3a"
    assert commit_label(None, None) is None
