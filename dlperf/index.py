"""An index of a results folder: one SQLite row per result file, so that reading thousands of
results (`dlperf history`) does not parse thousands of JSON files every time.

The JSON files stay the truth. The index (``<results>/.index.sqlite``) keeps, per file, its
path, mtime, size and inode, and the result's row (`dlperf.rows`: identity, benchmark, the
compared metric's repeat values and median, versions, commits, the machine's facts).
`ResultIndex.refresh` scans the folder (a `stat` per file: cheap), then parses only the files
that are new or whose (mtime, size, inode) changed, and drops the rows of removed files; a
file that is not a loadable result keeps a row with its error, so it is not parsed again
until it changes.

Concurrency: a refresh is one SQLite transaction (`BEGIN IMMEDIATE`): two dlperf processes
refreshing at once take turns, and a reader sees the index before or after, never half of a
refresh. A folder dlperf cannot write (read-only, another user's) still works: the index is
then built in memory, starting from the stored one when it can be read. A corrupt index file is
removed and rebuilt, and so is one whose tables are not the ones this dlperf makes (another
program's, another layout) or whose rows are not as dlperf wrote them (each row carries a digest
of its values, checked with its values' types whenever it is read): the JSON files are the
truth, and an `IndexRebuilt` warning says what was found. Its name starts with a dot and it
sits at the top of the folder, where `resultio.result_paths` (``*/*.json``, dot-files skipped)
never looks; a ``.gitignore`` is written beside it (unless the folder has one, and with the
umask's mode, as every shared file) so that committed results leave it out.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sqlite3
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf import DlperfError
from dlperf.files import atomic_write
from dlperf.resultio import load_result, result_paths
from dlperf.rows import COLUMNS, KINDS, NAMES, result_row
from dlperf.schema import SCHEMA_VERSION
from dlperf.stats import Significance

INDEX_FILE = ".index.sqlite"
# Bumped whenever the columns or how a row is read from a result change; with SCHEMA_VERSION
# (a newer dlperf may read files an older one skipped) it decides whether the rows still hold.
# 2: the rows of `dlperf.rows` (benchmark id, machine, settings) instead of configuration keys
# 3: each row's digest (`_digest`)
# 4: machine ids of 16 hex digits (were 8), created_utc through `schema.utc_time`
INDEX_FORMAT = 4
LOCK_TIMEOUT_S = 60.0  # how long a refresh waits for another process's refresh
SQL_TYPES = {"text": "TEXT", "json": "TEXT", "int": "INTEGER", "bool": "INTEGER", "float": "REAL"}
STAMP = ("path", "mtime_ns", "size", "inode", "error")  # a results row's file and its error
STAMP_KINDS = {"path": "text", "mtime_ns": "int", "size": "int", "inode": "int", "error": "text"}
ROW_KINDS = (*STAMP_KINDS.values(), *(KINDS[name] for name in NAMES))


class IndexRebuilt(UserWarning):
    """The stored index was not as dlperf writes it (another program's tables, rows altered
    or damaged): it was rebuilt from the JSON files."""


@dataclass(frozen=True)
class IndexedResult:
    """One result as the index holds it: its file, and its row (`dlperf.rows`), whose columns
    read as attributes (`r.median`, `r.benchmark_id`; `values`: the ok repeats' values of the
    compared metric, a tuple)."""

    path: str  # relative to the results folder: <benchmark_id>/<id>.json
    stamp: str  # "mtime_ns:size:inode" of the file the row was read from
    row: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        row = self.__dict__.get("row")
        if row is None or name not in row:
            raise AttributeError(name)
        return row[name]

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(json.loads(self.row["values"]))

    @property
    def settings_map(self) -> dict[str, str]:
        return json.loads(self.row["settings"])

    @property
    def series(self) -> tuple[str, str]:
        """History's line and compare's pair: the benchmark on its machine."""
        return (self.row["benchmark_id"], self.row["machine_id"])


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


_CREATE = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS results (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, "
    "size INTEGER NOT NULL, inode INTEGER NOT NULL, error TEXT, "
    + ", ".join(f'"{name}" {SQL_TYPES[kind]}' for name, kind in COLUMNS)
    + ", digest TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS results_by_series ON results "
    "(benchmark_id, machine_id, created_utc, id)",
    # compare.significance of two files' values (a: the baseline), valid while both stamps hold
    "CREATE TABLE IF NOT EXISTS significance (a_path TEXT NOT NULL, a_stamp TEXT NOT NULL, "
    "b_path TEXT NOT NULL, b_stamp TEXT NOT NULL, test TEXT NOT NULL, p REAL, "
    "significant INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (a_path, b_path))",
    "CREATE INDEX IF NOT EXISTS significance_by_b ON significance (b_path)",
)


def _quoted(column: str) -> str:
    """A column's name as SQL reads it whatever it is (`values` is a keyword)."""
    return f'"{column}"'


def _corrupt(exc: sqlite3.Error) -> bool:
    """The index file is damaged or not SQLite at all (not: locked, read-only, disk full)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(exc)
    return "not a database" in text or "malformed" in text


def _format_key() -> str:
    return f"{INDEX_FORMAT}:{SCHEMA_VERSION}"


TABLES = ("meta", "results", "significance")


def _layout(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    """Each of our tables that exists, with its columns (name, type, not null, default, key)."""
    found = {}
    for table in TABLES:
        columns = [tuple(c[1:]) for c in conn.execute(f"PRAGMA table_info({table})")]
        if columns:
            found[table] = columns
    return found


@functools.cache
def _our_layout() -> dict[str, list[tuple]]:
    conn = sqlite3.connect(":memory:")
    try:
        for statement in _CREATE:
            conn.execute(statement)
        return _layout(conn)
    finally:
        conn.close()


def _digest(values: Sequence[object]) -> str:
    """What a row's digest column holds: a hash of its other values, as dlperf wrote them."""
    text = json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _kind_ok(kind: str, value: object, json_null: bool = False) -> bool:
    """A value as dlperf writes a column of this kind (`dlperf.rows` kinds); a JSON column is
    only empty in the row of a file that is no result (`json_null`)."""
    if value is None:
        return kind != "json" or json_null
    if kind == "text":
        return isinstance(value, str)
    if kind == "json":
        try:
            return isinstance(value, str) and isinstance(json.loads(value), list | dict)
        except ValueError:
            return False
    if kind == "bool":
        return type(value) is int and value in (0, 1)
    if kind == "int":
        return type(value) is int
    return type(value) is float  # "float": SQLite gives REAL back as float


def _row_ok(row: Sequence[object]) -> bool:
    """A results row (STAMP, NAMES, digest) as dlperf wrote it: every value of its column's
    kind and the digest matching (a row altered by hand or by another program is not)."""
    kinds = ROW_KINDS
    *values, digest = row
    skipped = len(values) > 4 and values[4] is not None  # a file that is no result: its error
    return (
        len(values) == len(kinds)
        and all(_kind_ok(k, v, skipped) for k, v in zip(kinds, values, strict=True))
        and row[0] is not None
        and digest == _digest(values)
    )


def _column_value(kind: str, value: object) -> object:
    """`value` as SQLite will give it back for a column of `kind` (so that its digest holds):
    flags and counts as integers, measurements as floats, NaN as NULL (as SQLite stores it)."""
    if value is None:
        return None
    if kind in ("bool", "int"):
        return int(value)  # type: ignore[call-overload]
    if kind == "float":
        value = float(value)  # type: ignore[arg-type]
        return None if math.isnan(value) else value
    return value


Stat = tuple[int, int, int]  # (mtime_ns, size, inode)


def scan(results_dir: Path) -> dict[str, Stat]:
    """Every result file's (mtime_ns, size, inode), by its path relative to `results_dir`."""
    found: dict[str, Stat] = {}
    for path in result_paths(results_dir):
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
        self._rebuilding = False
        self.conn = self._open(in_memory)

    # ------------------------------------------------------------------ opening

    def _open(self, in_memory: bool) -> sqlite3.Connection:
        if not in_memory and self.results_dir.is_dir() and os.access(self.results_dir, os.W_OK):
            try:
                conn = self._open_file()
            except sqlite3.Error as exc:
                conn = None
                if _corrupt(exc):  # the JSON files are the truth: start the index again
                    self._warn("not an SQLite database, or a damaged one")
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
            self._prepare(conn)
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Make the tables. Those of another format (an older dlperf's) are dropped, to be
        read again; so are tables of this format laid out otherwise, or an index without a
        format (another program's file, a damaged one), with an IndexRebuilt warning."""
        found = _layout(conn)
        if found:
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                stored = row[0] if row else None
            except sqlite3.Error:
                stored = None
            ours = isinstance(stored, str) and stored.replace(":", "").isdigit()
            if stored == _format_key() and found != _our_layout() or not ours:
                self._warn("its tables are not the ones dlperf makes")
            if stored != _format_key() or found != _our_layout():
                for table in TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _CREATE:
            conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?)", (_format_key(),)
        )

    def _warn(self, what: str) -> None:
        warnings.warn(
            f"the results index {self.path}: {what}; rebuilt from the result files "
            "(the JSON files are the truth)",
            IndexRebuilt,
            stacklevel=2,
        )

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
                    stored.backup(conn)
                finally:
                    stored.close()
            except sqlite3.Error:
                conn.close()
                conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            self._prepare(conn)
        except sqlite3.Error:  # not an index at all: start empty
            conn.close()
            conn = sqlite3.connect(":memory:", isolation_level=None)
            self._prepare(conn)
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
            columns = (*STAMP, *NAMES, "digest")
            insert = (
                f"INSERT OR REPLACE INTO results ({', '.join(map(_quoted, columns))}) "
                f"VALUES ({', '.join('?' * len(columns))})"
            )
            conn.executemany(insert, (self._read(path, on_disk[path], columns) for path in stale))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        skipped = tuple((str(row[0]), str(row[4])) for row in self._select("error IS NOT NULL"))
        added = sum(path not in known for path in stale)
        return Refresh(len(on_disk), added, len(stale) - added, len(removed), skipped,
                       self.in_memory, self.location)  # fmt: skip

    def _read(self, path: str, st: Stat, columns: Sequence[str]) -> tuple[object, ...]:
        """A file's row: `columns` (STAMP, NAMES, then the digest of the others)."""
        fields: dict[str, object] = {"path": path, "mtime_ns": st[0], "size": st[1],
                                     "inode": st[2], "error": None}  # fmt: skip
        try:
            row = result_row(load_result(self.results_dir / path))
            fields.update({k: _column_value(KINDS[k], v) for k, v in row.items()})
        except DlperfError as exc:
            fields["error"] = str(exc)
        except OSError as exc:  # unreadable since it was listed
            fields["error"] = f"{path}: {exc}"
        values = [fields.get(c) for c in columns[:-1]]
        return (*values, _digest(values))

    def _select(self, where: str, args: Sequence[object] = ()) -> list[tuple]:
        """The rows (STAMP, NAMES, digest) that pass `where`, by benchmark, machine, then time.
        When one is not as dlperf wrote it, the index is rebuilt from the files (with an
        IndexRebuilt warning) and the rows are selected again."""
        sql = (
            f"SELECT {', '.join(map(_quoted, (*STAMP, *NAMES, 'digest')))} FROM results "
            f"WHERE {where} ORDER BY benchmark_id, machine_id, created_utc, id, path"
        )
        rows = self.conn.execute(sql, args).fetchall()
        damaged = sum(not _row_ok(row) for row in rows)
        if not damaged:
            return rows
        if not self._rebuilding:
            self._warn(f"{damaged} row{'s' if damaged != 1 else ''} not as dlperf wrote them")
            self._rebuilding = True
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    self.conn.execute("DELETE FROM results")
                    self.conn.execute("DELETE FROM significance")
                    self.conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                    raise
                self.refresh()
            finally:
                self._rebuilding = False
            rows = self.conn.execute(sql, args).fetchall()
        # Rows damaged still were altered again meanwhile: left out, never shown.
        return [row for row in rows if _row_ok(row)]

    # ------------------------------------------------------------------ querying

    def query(
        self,
        *,
        frameworks: Iterable[str] = (),
        models: Iterable[str] = (),
        machines: Iterable[str] = (),
        contains: Iterable[str] = (),
        since: str | None = None,
        until: str | None = None,
        benchmark_id: str | None = None,
        machine_id: str | None = None,
        settings: str | None = None,
    ) -> list[IndexedResult]:
        """The loadable results that pass every filter, by benchmark, machine, then creation
        time: `frameworks`/`models` any of; `machines` any of, each a machine id or a piece of
        its label; `contains` every substring of the benchmark id and settings; `since`/`until`
        bounds (inclusive) on the UTC creation time, ISO 8601 text; `benchmark_id`,
        `machine_id` and `settings` (the row's JSON text) exactly."""
        where, args = ["error IS NULL"], []
        for column, wanted in (("framework", list(frameworks)), ("model", list(models))):
            if wanted:
                where.append(f"{column} IN ({', '.join('?' * len(wanted))})")
                args += wanted
        wanted_machines = list(machines)
        if wanted_machines:
            where.append("(" + " OR ".join("machine_id = ? OR instr(lower(machine), lower(?)) > 0"
                                           for _ in wanted_machines) + ")")  # fmt: skip
            args += [m for m in wanted_machines for _ in (0, 1)]
        for text in contains:
            where.append("instr(benchmark_id || ' ' || settings, ?) > 0")  # case-sensitive
            args.append(text)
        for column, value in (("created_utc >=", since), ("created_utc <=", until),
                              ("benchmark_id =", benchmark_id), ("machine_id =", machine_id),
                              ("settings =", settings)):  # fmt: skip
            if value is not None:
                where.append(f"{column} ?")
                args.append(value)
        return [self._indexed(row) for row in self._select(" AND ".join(where), args)]

    @staticmethod
    def _indexed(row: Sequence[object]) -> IndexedResult:
        path, mtime, size, inode = row[:4]
        data = dict(zip(NAMES, row[len(STAMP) : -1], strict=True))
        for name, kind in COLUMNS:
            if kind == "bool" and data[name] is not None:
                data[name] = bool(data[name])
        return IndexedResult(str(path), f"{mtime}:{size}:{inode}", data)

    # ------------------------------------------------------------------ compare's test, kept

    def significances(
        self, pairs: Iterable[tuple[IndexedResult, IndexedResult]]
    ) -> dict[tuple[str, str], Significance]:
        """compare.significance of each (baseline, result) pair computed by an earlier call,
        by their paths, where neither file changed since."""
        wanted = {(a.path, b.path): (a.stamp, b.stamp) for a, b in pairs}
        if not wanted:
            return {}
        found, damaged = {}, 0
        rows = self.conn.execute(
            "SELECT a_path, a_stamp, b_path, b_stamp, test, p, significant, digest "
            "FROM significance"
        )
        for *values, digest in rows:
            a_path, a_stamp, b_path, b_stamp, test, p, significant = values
            if wanted.get((a_path, b_path)) != (a_stamp, b_stamp):
                continue
            if digest == _digest(values) and _significance_ok(test, p, significant):
                found[a_path, b_path] = Significance(test, p, bool(significant))
            else:  # computed again, and replaced
                damaged += 1
        if damaged:
            self._warn(f"{damaged} kept test{'s' if damaged != 1 else ''} of compare not as "
                       "dlperf wrote them")  # fmt: skip
        return found

    def remember_significances(
        self, found: Iterable[tuple[IndexedResult, IndexedResult, Significance]]
    ) -> None:
        """Keep computed significances for the next call; best effort: an index that cannot
        be written (locked past the timeout, a full disk) just computes them again."""
        rows = []
        for a, b, s in found:
            p = _column_value("float", s.p)
            values = (a.path, a.stamp, b.path, b.stamp, s.test, p, int(s.significant))
            rows.append((*values, _digest(values)))
        if not rows:
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.executemany(
                    "INSERT OR REPLACE INTO significance (a_path, a_stamp, b_path, b_stamp, "
                    "test, p, significant, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self.conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.Error:
            pass


def _significance_ok(test: object, p: object, significant: object) -> bool:
    return (
        _kind_ok("text", test)
        and test is not None
        and _kind_ok("float", p)
        and _kind_ok("bool", significant)
        and significant is not None
    )


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
