"""An index of a results folder: one SQLite row per result file, so that reading thousands of
results (`dlperf history`) does not parse thousands of JSON files every time.

The JSON files stay the truth. The index (``<results>/.index.sqlite``) keeps, per file, its
path, mtime, size and inode, and what history needs from the result: configuration, id,
creation time, status, the compared metric's repeat values and median, versions and commits.
`ResultIndex.refresh` scans the folder (a `stat` per file: cheap), then parses only the files
that are new or whose (mtime, size, inode) changed, and drops the rows of removed files; a
file that is not a loadable result keeps a row with its error, so it is not parsed again
until it changes.

Concurrency: a refresh is one SQLite transaction (`BEGIN IMMEDIATE`): two dlperf processes
refreshing at once take turns, and a reader sees the index before or after, never half of a
refresh. A folder dlperf cannot write (read-only, another user's) still works: the index is
then built in memory, starting from the stored one when it can be read. A corrupt index file is
removed and rebuilt. Its name starts with a dot and it sits at the top of the folder, where
`store.iter_result_paths` (``*/*.json``, dot-files skipped) never looks; a ``.gitignore`` is
written beside it (unless the folder has one) so that committed results leave it out.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dlperf import DlperfError
from dlperf.compare import Significance, values_of
from dlperf.files import atomic_write
from dlperf.schema import SCHEMA_VERSION, Result
from dlperf.store import iter_result_paths, load_result

INDEX_FILE = ".index.sqlite"
# Bumped whenever the columns or how a row is read from a result change; with SCHEMA_VERSION
# (a newer dlperf may read files an older one skipped) it decides whether the rows still hold.
INDEX_FORMAT = 1
LOCK_TIMEOUT_S = 60.0  # how long a refresh waits for another process's refresh

# (column, SQL type) of a result's row, after the file's path and stat.
FIELDS = (
    ("config_key", "TEXT"),
    ("id", "TEXT"),
    ("created", "TEXT"),  # as stored in the result
    ("created_utc", "TEXT"),  # ISO 8601 in UTC: sorts and filters as text
    ("status", "TEXT"),
    ("framework", "TEXT"),
    ("model", "TEXT"),
    ("metric", "TEXT"),  # compare.values_of's: samples/s, or a LoadGen stream latency
    ("unit", "TEXT"),
    ("higher_is_better", "INTEGER"),
    ("median", "REAL"),  # of the ok repeats' values; NULL when none is ok
    ("n", "INTEGER"),
    ("values_json", "TEXT"),  # the ok repeats' values, a JSON list
    ("framework_version", "TEXT"),
    ("dlperf_version", "TEXT"),
    ("python", "TEXT"),
    ("host", "TEXT"),
    ("device_name", "TEXT"),
    ("dists_digest", "TEXT"),
    ("source_commit", "TEXT"),  # an official implementation's upstream commit
    ("dlperf_commit", "TEXT"),
    ("dlperf_dirty", "INTEGER"),
    ("workdir_commit", "TEXT"),
    ("workdir_dirty", "INTEGER"),
)
FIELD_NAMES = tuple(name for name, _ in FIELDS)


@dataclass(frozen=True)
class IndexedResult:
    """One result as the index holds it (`values`: the ok repeats', compare.values_of's)."""

    path: str  # relative to the results folder: <config_key>/<id>.json
    stamp: str  # "mtime_ns:size:inode" of the file the row was read from
    config_key: str
    id: str
    created: str
    created_utc: str
    status: str
    framework: str
    model: str
    metric: str
    unit: str
    higher_is_better: bool
    median: float | None
    n: int
    values: tuple[float, ...]
    framework_version: str | None
    dlperf_version: str | None
    python: str | None
    host: str | None
    device_name: str | None
    dists_digest: str | None
    source_commit: str | None
    dlperf_commit: str | None
    dlperf_dirty: bool | None
    workdir_commit: str | None
    workdir_dirty: bool | None


@dataclass(frozen=True)
class Refresh:
    """What one refresh found: files seen, rows added / re-read / dropped, files that are not
    loadable results (with their error), and whether the index lives in memory only."""

    files: int
    added: int
    changed: int
    removed: int
    skipped: tuple[tuple[str, str], ...]
    in_memory: bool
    location: str


def utc_iso(created: str) -> str:
    """A result's `created` in UTC, ISO 8601 to the second (a time without zone is UTC)."""
    try:
        when = datetime.fromisoformat(re.sub(r"[zZ]$", "+00:00", created))  # 3.10: no Z
    except ValueError:
        return created  # not a time: kept as written, sorted as text
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def row_of(result: Result) -> dict[str, object]:
    """The index's fields of one result."""
    metric, values, higher = values_of(result)
    env = result.environment
    return {
        "config_key": result.spec.config_key(),
        "id": result.id,
        "created": result.created,
        "created_utc": utc_iso(result.created),
        "status": result.status.value,
        "framework": result.spec.framework,
        "model": result.spec.model,
        "metric": metric,
        "unit": "samples/s" if higher else "ms",  # values_of's latencies are LoadGen's ms
        "higher_is_better": int(higher),
        "median": statistics.median(values) if values else None,
        "n": len(values),
        "values_json": json.dumps(values),
        "framework_version": env.framework_version,
        "dlperf_version": env.dlperf_version,
        "python": env.python,
        "host": env.host,
        "device_name": env.device_name,
        "dists_digest": env.dists_digest,
        "source_commit": result.source.commit if result.source else None,
        "dlperf_commit": getattr(env, "dlperf_commit", None),
        "dlperf_dirty": _flag(getattr(env, "dlperf_dirty", None)),
        "workdir_commit": getattr(env, "workdir_commit", None),
        "workdir_dirty": _flag(getattr(env, "workdir_dirty", None)),
    }


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _bool(value: int | None) -> bool | None:
    return None if value is None else bool(value)


_CREATE = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS results (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, "
    "size INTEGER NOT NULL, inode INTEGER NOT NULL, error TEXT, "
    + ", ".join(f"{name} {kind}" for name, kind in FIELDS)
    + ")",
    "CREATE INDEX IF NOT EXISTS results_by_config ON results (config_key, created_utc, id)",
    # compare.significance of two files' values (a: the baseline), valid while both stamps hold
    "CREATE TABLE IF NOT EXISTS significance (a_path TEXT NOT NULL, a_stamp TEXT NOT NULL, "
    "b_path TEXT NOT NULL, b_stamp TEXT NOT NULL, test TEXT NOT NULL, p REAL, "
    "significant INTEGER NOT NULL, PRIMARY KEY (a_path, b_path))",
    "CREATE INDEX IF NOT EXISTS significance_by_b ON significance (b_path)",
)


def _corrupt(exc: sqlite3.Error) -> bool:
    """The index file is damaged or not SQLite at all (not: locked, read-only, disk full)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(exc)
    return "not a database" in text or "malformed" in text


def _format_key() -> str:
    return f"{INDEX_FORMAT}:{SCHEMA_VERSION}"


Stat = tuple[int, int, int]  # (mtime_ns, size, inode)


def scan(results_dir: Path) -> dict[str, Stat]:
    """Every result file's (mtime_ns, size, inode), by its path relative to `results_dir`."""
    found: dict[str, Stat] = {}
    for path in iter_result_paths(results_dir):
        try:
            st = path.stat()
        except OSError:
            continue  # removed since it was listed
        found[path.relative_to(results_dir).as_posix()] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return found


class ResultIndex:
    """The index of one results folder. Use as a context manager, or call `close`."""

    def __init__(self, results_dir: Path, *, in_memory: bool = False) -> None:
        self.results_dir = Path(results_dir)
        self.path = self.results_dir / INDEX_FILE
        self.conn = self._open(in_memory)

    # ------------------------------------------------------------------ opening

    def _open(self, in_memory: bool) -> sqlite3.Connection:
        if not in_memory and self.results_dir.is_dir() and os.access(self.results_dir, os.W_OK):
            try:
                conn = self._open_file()
            except sqlite3.Error as exc:
                conn = None
                if _corrupt(exc):  # the JSON files are the truth: start the index again
                    with contextlib.suppress(OSError):
                        self.path.unlink()
                    with contextlib.suppress(sqlite3.Error):
                        conn = self._open_file()
            if conn is not None:
                self.in_memory = False
                return conn
        self.in_memory = True
        return self._open_memory()

    def _open_file(self) -> sqlite3.Connection:
        if not self.path.exists():
            self._ignore_in_git()
        conn = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _CREATE:
                conn.execute(statement)
            stored = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if stored is None or stored[0] != _format_key():
                conn.execute("DELETE FROM results")  # rows of another format: read again
                conn.execute("DELETE FROM significance")
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?)",
                    (_format_key(),),
                )
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _ignore_in_git(self) -> None:
        """A team that commits its results should not commit the index (a cache that changes
        with every read): a `.gitignore` beside it says so, unless the folder has its own."""
        ignore = self.results_dir / ".gitignore"
        if not ignore.exists():
            with contextlib.suppress(OSError, DlperfError):
                atomic_write(ignore, f"# dlperf's index of these results, rebuilt when needed\n"
                                     f"/{INDEX_FILE}*\n")  # fmt: skip

    def _open_memory(self) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        if self.path.is_file():  # start from the stored rows where they can be read
            try:
                uri = self.path.resolve().as_uri() + "?mode=ro"  # as_uri escapes ? # %
                stored = sqlite3.connect(uri, uri=True)
                try:
                    row = stored.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                    if row is not None and row[0] == _format_key():
                        stored.backup(conn)
                finally:
                    stored.close()
            except sqlite3.Error:
                conn.close()
                conn = sqlite3.connect(":memory:", isolation_level=None)
        for statement in _CREATE:
            conn.execute(statement)
        return conn

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def location(self) -> str:
        return "memory only (not stored)" if self.in_memory else str(self.path)

    # ------------------------------------------------------------------ refreshing

    def refresh(self) -> Refresh:
        """Bring the rows in line with the folder: read new and changed files, drop removed
        ones. One transaction: another process's refresh waits for this one, and then finds
        nothing left to do."""
        on_disk = scan(self.results_dir)
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            known = {
                path: (mtime, size, inode)
                for path, mtime, size, inode in conn.execute(
                    "SELECT path, mtime_ns, size, inode FROM results"
                )
            }
            removed = [path for path in known if path not in on_disk]
            stale = [path for path, st in on_disk.items() if known.get(path) != st]
            conn.executemany("DELETE FROM results WHERE path = ?", [(p,) for p in removed])
            # Kept tests of files removed or changed no longer hold (their stamps would not
            # match either: this keeps the table from growing).
            conn.executemany("DELETE FROM significance WHERE a_path = ? OR b_path = ?",
                             [(p, p) for p in (*removed, *stale)])  # fmt: skip
            columns = ("path", "mtime_ns", "size", "inode", "error", *FIELD_NAMES)
            insert = (
                f"INSERT OR REPLACE INTO results ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})"
            )
            conn.executemany(insert, (self._read(path, on_disk[path], columns) for path in stale))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        skipped = tuple(
            conn.execute(
                "SELECT path, error FROM results WHERE error IS NOT NULL ORDER BY path"
            ).fetchall()
        )
        added = sum(path not in known for path in stale)
        return Refresh(len(on_disk), added, len(stale) - added, len(removed), skipped,
                       self.in_memory, self.location)  # fmt: skip

    def _read(self, path: str, st: Stat, columns: Sequence[str]) -> tuple[object, ...]:
        fields: dict[str, object] = {"path": path, "mtime_ns": st[0], "size": st[1],
                                     "inode": st[2], "error": None}  # fmt: skip
        try:
            fields.update(row_of(load_result(self.results_dir / path)))
        except DlperfError as exc:
            fields["error"] = str(exc)
        except OSError as exc:  # unreadable since it was listed
            fields["error"] = f"{path}: {exc}"
        return tuple(fields.get(c) for c in columns)

    # ------------------------------------------------------------------ querying

    def query(
        self,
        *,
        frameworks: Iterable[str] = (),
        models: Iterable[str] = (),
        contains: Iterable[str] = (),
        since: str | None = None,
        until: str | None = None,
    ) -> list[IndexedResult]:
        """The loadable results that pass every filter, by configuration then creation time:
        `frameworks`/`models` any of, `contains` every substring of the configuration key,
        `since`/`until` bounds (inclusive) on the UTC creation time, ISO 8601 text."""
        where, args = ["error IS NULL"], []
        for column, wanted in (("framework", list(frameworks)), ("model", list(models))):
            if wanted:
                where.append(f"{column} IN ({', '.join('?' * len(wanted))})")
                args += wanted
        for text in contains:
            where.append("instr(config_key, ?) > 0")  # case-sensitive, as keys are
            args.append(text)
        if since is not None:
            where.append("created_utc >= ?")
            args.append(since)
        if until is not None:
            where.append("created_utc <= ?")
            args.append(until)
        rows = self.conn.execute(
            "SELECT path, mtime_ns || ':' || size || ':' || inode, "
            f"{', '.join(FIELD_NAMES)} FROM results WHERE {' AND '.join(where)} "
            "ORDER BY config_key, created_utc, id",
            args,
        )
        return [self._indexed(row) for row in rows]

    @staticmethod
    def _indexed(row: Sequence[object]) -> IndexedResult:
        data = dict(zip(("path", "stamp", *FIELD_NAMES), row, strict=True))
        data["values"] = tuple(json.loads(data.pop("values_json")))  # type: ignore[arg-type]
        data["higher_is_better"] = bool(data["higher_is_better"])
        for name in ("dlperf_dirty", "workdir_dirty"):
            data[name] = _bool(data[name])  # type: ignore[arg-type]
        return IndexedResult(**data)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ compare's test, kept

    def significances(
        self, pairs: Iterable[tuple[IndexedResult, IndexedResult]]
    ) -> dict[tuple[str, str], Significance]:
        """compare.significance of each (baseline, result) pair computed by an earlier call,
        by their paths, where neither file changed since."""
        wanted = {(a.path, b.path): (a.stamp, b.stamp) for a, b in pairs}
        if not wanted:
            return {}
        found = {}
        rows = self.conn.execute(
            "SELECT a_path, a_stamp, b_path, b_stamp, test, p, significant FROM significance"
        )
        for a_path, a_stamp, b_path, b_stamp, test, p, significant in rows:
            if wanted.get((a_path, b_path)) == (a_stamp, b_stamp):
                found[a_path, b_path] = Significance(test, p, bool(significant))
        return found

    def remember_significances(
        self, found: Iterable[tuple[IndexedResult, IndexedResult, Significance]]
    ) -> None:
        """Keep computed significances for the next call; best effort: an index that cannot
        be written (locked past the timeout, a full disk) just computes them again."""
        rows = [(a.path, a.stamp, b.path, b.stamp, s.test, s.p, int(s.significant))
                for a, b, s in found]  # fmt: skip
        if not rows:
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.executemany(
                    "INSERT OR REPLACE INTO significance (a_path, a_stamp, b_path, b_stamp, "
                    "test, p, significant) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self.conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.Error:
            pass


def open_index(results_dir: Path, *, in_memory: bool = False) -> tuple[ResultIndex, Refresh]:
    """The index of `results_dir`, refreshed. A refresh that cannot write the stored index
    (a disk that filled, a read-only file) falls back to one in memory."""
    index = ResultIndex(results_dir, in_memory=in_memory)
    try:
        return index, index.refresh()
    except sqlite3.Error:
        if index.in_memory:
            index.close()
            raise
    index.close()
    index = ResultIndex(results_dir, in_memory=True)
    return index, index.refresh()
