"""The results index behind `dlperf history`: build and query times; prints figures only.

    python benchmarks/history_index.py                  # 2,000 and 10,000 results
    python benchmarks/history_index.py --n 500 --configs 10
    python benchmarks/history_index.py --n 10000 --keep /tmp/results-10k   # keep the folder

For each size it writes that many synthetic results (7 repeats each, spread over `--configs`
configurations and over time, made from one real `build_result` per configuration with the
numbers scaled), then times, each in this process:

* parsing every file the way `dlperf report` does (`store.load_results`): the cost the index
  saves on every later read;
* building the index from nothing (`index.open_index` on a folder without one);
* refreshing it when nothing changed (a `stat` per file, no file parsed);
* refreshing it after 1 % of the files were rewritten, 10 added and 10 removed;
* querying every row, one configuration (`--config` substring) and one framework;
* `history.history_points` over everything (refresh, query and compare's test between each
  pair of neighbouring points), again (the index keeps each pair's test), and over one
  configuration.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dlperf.assemble import build_result
from dlperf.history import HistoryFilters, history_points
from dlperf.identity import benchmark_id
from dlperf.index import INDEX_FILE, open_index
from dlperf.schema import BenchmarkSpec, Environment, Repeat, RepeatStatus, Window
from dlperf.store import ResultStore

FRAMEWORKS = ("pytorch", "tensorflow", "paddle", "mxnet", "oneflow")
BATCHES = (8, 16, 32, 64, 128, 256)
SCALED = ("values", "median", "mean", "min", "max", "stdev", "ci_low", "ci_high")


def template(config: int) -> dict:
    """One real result of configuration number `config`, as its JSON dict."""
    framework = FRAMEWORKS[config % len(FRAMEWORKS)]
    model = ("resnet50", "bert")[config // len(FRAMEWORKS) % 2]
    batch = BATCHES[config // (2 * len(FRAMEWORKS)) % len(BATCHES)]
    nodes = 1 + config // (2 * len(FRAMEWORKS) * len(BATCHES))
    spec = BenchmarkSpec(framework=framework, model=model, batch_size=batch, nodes=nodes)
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8]
    repeats = [
        Repeat(index=i, status=RepeatStatus.ok, throughput=v,
               window=Window(start_step=20, end_step=120, samples=100 * batch,
                             elapsed_s=100 * batch / v))
        for i, v in enumerate(values, 1)
    ]  # fmt: skip
    env = Environment(dlperf_version="0.1.0", host="bench-host", os="linux", python="3.11.7",
                      framework_version="2.1.0", dlperf_commit="0" * 40)  # fmt: skip
    return json.loads(build_result(spec, "template", repeats, environment=env).model_dump_json())


def point(base: dict, when: float, factor: float, version: str, rid: str) -> str:
    """`base` measured `factor` times as fast, created at epoch `when`, as stored text."""
    data = json.loads(json.dumps(base))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(when))
    data.update(id=rid, created=stamp)
    data["environment"]["framework_version"] = version
    for r in data["repeats"]:
        r["throughput"] *= factor
        r["window"]["elapsed_s"] /= factor
    summary = data["metrics"]["throughput"]
    for name in SCALED:
        value = summary.get(name)
        if isinstance(value, list):
            summary[name] = [v * factor for v in value]
        elif isinstance(value, float):
            summary[name] = value * factor
    return json.dumps(data, indent=2) + "\n"


def write_results(folder: Path, n: int, configs: int, seed: int = 0) -> list[Path]:
    rng = random.Random(seed)
    bases = [template(c) for c in range(configs)]
    keys = [benchmark_id(BenchmarkSpec.model_validate(b["spec"])) for b in bases]
    paths = []
    start = 1_700_000_000.0
    for i in range(n):
        config = i % configs
        step = i // configs
        base = bases[config]
        key = keys[config]
        rid = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start + i * 600)) + f"-{i:06x}"
        version = f"2.{step // 20}.0"  # a new framework version every 20 points
        factor = (0.8 if step % 40 >= 20 else 1.0) * rng.uniform(0.99, 1.01)
        path = folder / key / f"{rid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(point(base, start + i * 600, factor, version, rid))
        paths.append(path)
    return paths


def timed(what: str, fn: Callable[[], object]) -> object:
    began = time.perf_counter()
    out = fn()
    print(f"  {what:<58} {time.perf_counter() - began:8.3f} s", flush=True)
    return out


def bench(n: int, configs: int, keep: Path | None) -> None:
    folder = keep or Path(tempfile.mkdtemp(prefix="dlperf-history-bench-"))
    if keep and keep.exists():
        shutil.rmtree(keep)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        print(f"{n} results in {configs} configurations ({folder})", flush=True)
        paths = timed("write the synthetic results", lambda: write_results(folder, n, configs))
        loaded = timed("parse every file (ResultStore.results, as report)",
                       lambda: ResultStore(folder).results())  # fmt: skip
        assert len(loaded) == n

        def refresh():
            index, found = open_index(folder)
            index.close()
            return found

        built = timed("build the index from nothing", refresh)
        assert built.added == n and not built.in_memory
        size = (folder / INDEX_FILE).stat().st_size
        found = timed("refresh, nothing changed (stat every file)", refresh)
        assert (found.added, found.changed, found.removed) == (0, 0, 0)
        rng = random.Random(1)
        for path in rng.sample(paths[:-10], n // 100):  # rewritten: a new inode and mtime
            path.write_text(path.read_text().replace('"host": "bench-host"', '"host": "b2"'))
        for path in paths[-10:]:
            path.unlink()
        fresh = Path(tempfile.mkdtemp(prefix="dlperf-history-more-"))
        try:
            for path in write_results(fresh, 10, 10, seed=2):
                target = folder / path.parent.name / f"new-{path.name}"
                target.parent.mkdir(exist_ok=True)
                shutil.copy(path, target)
        finally:
            shutil.rmtree(fresh)
        found = timed(f"refresh after {n // 100} rewritten, 10 added, 10 removed", refresh)
        assert (found.added, found.changed, found.removed) == (10, n // 100, 10), found
        index, _ = open_index(folder)
        try:
            rows = timed("query every row", index.query)
            one_key = rows[0].benchmark_id
            timed("query one benchmark (--config substring)",
                  lambda: index.query(contains=[one_key]))  # fmt: skip
            timed("query one framework", lambda: index.query(frameworks=["paddle"]))
        finally:
            index.close()
        points = timed("history_points, everything (refresh + compare's test)",
                       lambda: history_points(folder))  # fmt: skip
        again = timed("history_points, everything again (the tests kept)",
                      lambda: history_points(folder))  # fmt: skip
        assert again == points
        flagged = sum(p.verdict in ("regression", "improvement") for p in points)
        timed("history_points, one configuration",
              lambda: history_points(folder, HistoryFilters(contains=(one_key,))))  # fmt: skip
        print(f"  index file {size / 1e6:.1f} MB; {len(points)} points, {flagged} significant "
              "changes", flush=True)  # fmt: skip
    finally:
        if keep is None:
            shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="2000,10000", help="result counts, comma-separated")
    parser.add_argument("--configs", type=int, default=50, help="configurations they span")
    parser.add_argument("--keep", type=Path, help="write here and keep it (one size only)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.n.split(",")]
    if args.keep and len(sizes) > 1:
        parser.error("--keep takes one size")
    for n in sizes:
        bench(n, args.configs, args.keep)


if __name__ == "__main__":
    main()
