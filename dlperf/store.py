"""A results folder behind one object: every command that writes or reads results uses it.

`ResultStore(folder)` writes results (atomically, under their benchmark id), loads them (a file
that is not a loadable result is skipped with a warning naming it; a folder that cannot be read
is an error naming it), picks the newest result of each benchmark x machine x settings, finds
the stored result of a spec on a machine and a data-parallel result's 1x1 baseline (through the
results index), and keeps a measured result that its folder refused (`unsaved`).
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dlperf import DlperfError
from dlperf.files import StorageError, atomic_write
from dlperf.identity import (
    Machine,
    benchmark_id,
    identity_of,
    machine_of,
    same_machine,
    settings_of,
)
from dlperf.index import IndexedResult, Refresh, ResultIndex, open_index
from dlperf.resultio import (
    DuplicateResult,
    check_readable,
    load_each,
    load_result,
    result_paths,
)
from dlperf.rows import json_text
from dlperf.schema import BenchmarkSpec, Result

DEFAULT_RESULTS_DIR = Path("results")
UNSAVED_DIR = Path(tempfile.gettempdir()) / "dlperf-unsaved"
"""Where a measured result goes when its results folder cannot take it (full, read-only)."""


@dataclass(frozen=True)
class Stored:
    """A loaded result and its file, relative to the results folder (POSIX form)."""

    result: Result
    relpath: str


def recency(result: Result) -> tuple[datetime, str]:
    """What "newer" means for every pick of the newest result (store, compare, score,
    reports) and the index's order: the creation time in UTC (`Result.created_at`), then
    the id. Never `created`'s text: `...T08:00+09:00` is earlier than `...T01:00+00:00`."""
    return (result.created_at, result.id)


def newest(results: Iterable[Result]) -> list[Result]:
    """The newest result (`recency`) of each benchmark x machine x settings (never merged),
    ordered by benchmark, machine and settings."""
    latest: dict[tuple, Result] = {}
    for result in results:
        key = identity_of(result).key
        if key not in latest or recency(result) > recency(latest[key]):
            latest[key] = result
    return [latest[k] for k in sorted(latest)]


def single_device(spec: BenchmarkSpec) -> BenchmarkSpec:
    """`spec` on one node with one device: what a data-parallel run is measured against."""
    return spec.model_copy(update={"nodes": 1, "devices_per_node": 1})


class ResultStore:
    """The results folder `root`."""

    def __init__(self, root: Path = DEFAULT_RESULTS_DIR) -> None:
        self.root = Path(root)

    def folder(self, spec: BenchmarkSpec) -> Path:
        """Where `spec`'s results and raw logs go."""
        return self.root / benchmark_id(spec)

    # ------------------------------------------------------------------ writing

    def write(self, result: Result) -> Path:
        """Write atomically (temp file + rename): an interrupted run leaves no half-written
        JSON."""
        path = self.folder(result.spec) / f"{result.id}.json"
        return atomic_write(path, result.model_dump_json(indent=2) + "\n")

    def write_all(self, results: Iterable[Result]) -> list[tuple[Result, Path]]:
        """Write each result (`write`), each with its file, into a folder that every reader can
        read: one that exists but cannot be read is refused first (a DlperfError naming it)."""
        check_readable(self.root)
        return [(result, self.write(result)) for result in results]

    def unsaved(self, result: Result, exc: StorageError) -> StorageError:
        """The error for a measured result this folder refused: saved elsewhere (privately,
        under $TMPDIR), or its numbers printed, so that what was measured is never lost (exit
        code 2: benchmarks ran)."""
        fallback = UNSAVED_DIR / benchmark_id(result.spec) / f"{result.id}.json"
        try:
            atomic_write(fallback, result.model_dump_json(indent=2) + "\n", private=True)
            kept = (
                f"the result was saved to {fallback} instead: move it to "
                f"{self.folder(result.spec)}/ once that folder can be written"
            )
        except StorageError as again:
            t = result.metrics.throughput
            numbers = (
                f"median {t.median:.4g} samples/s over {t.n} repeat(s)" if t else "no throughput"
            )
            kept = f"it could not be saved elsewhere either ({again}); measured: {numbers}"
        return StorageError(f"{exc}; {kept}", exit_code=2)

    # ------------------------------------------------------------------ reading

    def paths(self) -> list[Path]:
        """Every result file (see `resultio.result_paths`): a DlperfError when the folder
        cannot be read."""
        return result_paths(self.root)

    def load(self) -> list[Stored]:
        """Every loadable result with its file; the others are skipped with a SkippedResult
        warning naming them. Files holding a result of one id (a copied result) are each read,
        with one DuplicateResult warning per id naming them."""
        stored = [
            Stored(result, path.relative_to(self.root).as_posix())
            for path, result in load_each(self.paths())
        ]
        self._warn_duplicate_ids(stored)
        return stored

    def _warn_duplicate_ids(self, stored: Sequence[Stored]) -> None:
        """Readers that pair or link results go by their files (history, the regressions page
        and feed), so a copy misleads none of them; it is still said, as it counts twice in
        tables and exports and is seldom meant."""
        files: dict[str, list[str]] = {}
        for s in stored:
            files.setdefault(s.result.id, []).append((self.root / s.relpath).as_posix())
        for result_id, paths in files.items():
            if len(paths) > 1:
                warnings.warn(
                    f"result {result_id} is in {len(paths)} files ({', '.join(paths)}): a "
                    "copied result? Each is read as a result of its own; remove the copies "
                    "you did not mean to keep",
                    DuplicateResult,
                    stacklevel=3,
                )

    def results(self) -> list[Result]:
        return [s.result for s in self.load()]

    def newest(self) -> list[Result]:
        """The newest result of each benchmark x machine x settings."""
        return newest(self.results())

    def index(self, *, in_memory: bool = False) -> tuple[ResultIndex, Refresh]:
        """The folder's results index (`dlperf.index`), refreshed. Close it when done."""
        return open_index(self.root, in_memory=in_memory)

    def find(self, spec: BenchmarkSpec, machine: Machine) -> Result | None:
        """The newest stored result of `spec` (its benchmark and settings) on `machine`: the
        same recorded hardware (`same_machine`), so none for a machine with none recorded."""
        rows = self._query(spec, machine) if machine.known else []
        for row in reversed(rows):  # newest first; a file removed since the refresh is passed
            try:
                found = load_result(self.root / row.path)
            except DlperfError:  # removed or changed since the refresh: the next newest
                continue
            if same_machine(machine_of(found), machine):  # not another one whose id collides
                return found
        return None

    def baseline(self, result: Result) -> Result | None:
        """The newest 1x1 (one node, one device) result of a data-parallel result's benchmark,
        on its machine and with its settings: what its speedup and scaling efficiency are
        measured against."""
        if result.spec.world_size == 1:
            return None
        return self.find(single_device(result.spec), machine_of(result))

    def _query(self, spec: BenchmarkSpec, machine: Machine) -> list[IndexedResult]:
        if not self.paths():
            return []
        index, _ = self.index()
        try:
            return index.query(
                benchmark_id=benchmark_id(spec),
                machine_id=machine.id,
                settings=json_text(settings_of(spec)),
            )
        finally:
            index.close()
