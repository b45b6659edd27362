"""`dlperf parse` + `dlperf report` on DLPerf's own logs, and how log paths map to configs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf import DlperfError
from dlperf.cli import app
from dlperf.importers.dlperf_logs import group_logs, import_logs, path_settings
from dlperf.schema import RepeatStatus, ResultStatus
from dlperf.store import ResultStore

# What DLPerf published for these logs (../shared/fixtures/README.md).
PUBLISHED = [("1", "321.8", "1.00"), ("2", "574.66", "1.79"), ("4", "1143.46", "3.55"),
             ("8", "2458.74", "7.64")]  # fmt: skip


def dlperf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_parse_and_report_reproduce_dlperf_tf2_resnet50(fixtures: Path, tmp_path: Path) -> None:
    tree = fixtures / "dlperf" / "tf2_resnet50"
    out = dlperf(
        "parse",
        "tensorflow",
        "resnet50",
        str(tree),
        "--impl",
        "official",
        "--profile",
        "dlperf-2020",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    stored = ResultStore(tmp_path / "results").results()
    results = sorted(stored, key=lambda r: r.spec.devices_per_node)
    assert [r.spec.devices_per_node for r in results] == [1, 2, 4, 8]
    for r, (_devices, median, _) in zip(results, PUBLISHED, strict=True):
        assert r.status == ResultStatus.ok and r.origin == "parse"
        assert (r.spec.nodes, r.spec.batch_size, r.spec.precision) == (1, 128, "fp32")
        assert r.spec.impl == "official" and r.spec.source == "tensorflow-models-resnet50"
        assert r.metrics.throughput.n == 5
        assert r.metrics.throughput.median == pytest.approx(float(median), rel=0.001)
        assert all((p.window.start_step, p.window.end_step) == (100, 600) for p in r.repeats)
        assert r.source.url == "https://github.com/tensorflow/models"
        assert len(r.source.commit) == 40

    out = dlperf("report", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "reports" / "resnet50.md").read_text()
    for devices, median, speedup in PUBLISHED:
        row = next(line for line in md.splitlines() if line.startswith(f"| 1 | {devices} | 128 |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[3] == "—"  # settings: an official script takes its manifest's
        assert float(cells[4]) == pytest.approx(float(median), rel=0.001)
        assert cells[5] == speedup
        assert float(cells[6].rstrip("%")) == pytest.approx(
            100 * float(speedup) / int(devices), abs=0.6
        )
    assert "official (dlperf-2020): tensorflow-models-resnet50 @ " in md
    assert "| imported log | ok |" in md


def test_parse_without_profile_detects_it_from_the_logs(fixtures: Path, tmp_path: Path) -> None:
    # The README's command: no --profile, while `current` (Orbit's log lines) is the default.
    tree, res = fixtures / "dlperf" / "tf2_resnet50", tmp_path / "results"
    parse = ["parse", "tensorflow", "resnet50", "--impl", "official", "--results-dir", str(res)]
    out = CliRunner().invoke(app, [*parse, str(tree)])
    assert out.exit_code == 0, out.output
    results = sorted(ResultStore(res).results(), key=lambda r: r.spec.devices_per_node)
    for r, (devices, median, _) in zip(results, PUBLISHED, strict=True):
        assert r.status == ResultStatus.ok and r.spec.devices_per_node == int(devices)
        assert r.spec.source == "tensorflow-models-resnet50" and r.source.profile == "dlperf-2020"
        assert r.metrics.throughput.median == pytest.approx(float(median), rel=0.001)
        (note,) = [w for w in r.warnings if "detected" in w]
        assert note.startswith(
            "profile dlperf-2020 detected from the logs: "
            "tensorflow-models-resnet50's log format (keras_time_history)"
        )
        assert "tensorflow-models-resnet50-current (current: orbit_train)" in note
    # An explicit profile is honoured, and its format's verdict stands.
    out = CliRunner().invoke(app, [*parse, "--profile", "current", str(tree / "1n1g"),
                                   "--results-dir", str(tmp_path / "current")])  # fmt: skip
    assert out.exit_code == 2 and "no usable Orbit train lines" in out.output
    (current,) = ResultStore(tmp_path / "current").results()
    assert current.spec.source == "tensorflow-models-resnet50-current"
    assert not [w for w in current.warnings if "detected" in w]
    # Logs no format reads: the default profile's, and the note names what was tried.
    (tmp_path / "1n1g").mkdir()
    (tmp_path / "1n1g" / "rn50_b128_fp32_1.log").write_text("nothing a parser knows\n")
    out = CliRunner().invoke(app, [*parse, str(tmp_path / "1n1g"),
                                   "--results-dir", str(tmp_path / "none")])  # fmt: skip
    assert out.exit_code == 2
    (none,) = ResultStore(tmp_path / "none").results()
    assert none.spec.source == "tensorflow-models-resnet50-current"
    assert any("no official implementation's log format found throughput lines" in w
               and "tensorflow-models-resnet50 (dlperf-2020: keras_time_history)" in w
               for w in none.warnings)  # fmt: skip


def test_parse_json_prints_the_stored_results_alone_on_stdout(
    fixtures: Path, tmp_path: Path
) -> None:
    tree, res = fixtures / "dlperf" / "tf2_resnet50", tmp_path / "results"
    args = [
        "parse",
        "tensorflow",
        "resnet50",
        "--impl",
        "official",
        "--profile",
        "dlperf-2020",
        "--results-dir",
        str(res),
    ]
    out = CliRunner().invoke(app, [*args, str(tree), "--json"])
    assert out.exit_code == 0, out.output
    printed = json.loads(out.stdout)  # four configurations: a list of the stored files
    stored = [json.loads(p.read_text()) for p in res.rglob("*.json")]
    assert sorted(printed, key=lambda r: r["id"]) == sorted(stored, key=lambda r: r["id"])
    printed.sort(key=lambda r: r["spec"]["devices_per_node"])
    for r, (devices, median, _) in zip(printed, PUBLISHED, strict=True):
        assert r["spec"]["devices_per_node"] == int(devices) and r["origin"] == "parse"
        assert r["metrics"]["throughput"]["median"] == pytest.approx(float(median), rel=0.001)
    # The human lines, on stderr (a stored path too long for the line goes on the next one).
    assert out.stderr.count(" ->") == 4 and all(str(p) in out.stderr for p in res.rglob("*.json"))
    # One configuration: its file as stored, byte for byte, as `dlperf run --json` prints it.
    one = CliRunner().invoke(app, [*args, str(tree / "1n1g"), "--json"])
    assert one.exit_code == 0, one.output
    paths = {json.loads(p.read_text())["id"]: p for p in res.rglob("*.json")}
    assert one.stdout == paths[json.loads(one.stdout)["id"]].read_text()


def test_parse_suggests_no_option_it_lacks(fixtures: Path, tmp_path: Path) -> None:
    logs = tmp_path / "1n1g"  # two repeats: too few to judge stability
    logs.mkdir()
    for name in ("rn50_b128_fp32_1.log", "rn50_b128_fp32_2.log"):
        shutil.copy(fixtures / "dlperf" / "tf2_resnet50" / "1n1g" / name, logs)
    out = CliRunner().invoke(app, ["parse", "tensorflow", "resnet50", str(logs), "--impl",
                                   "official", "--profile", "dlperf-2020",
                                   "--results-dir", str(tmp_path / "r")])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "too few to judge stability; re-run with 7 repeats" in out.stdout
    assert "--repeats" not in out.output
    (stored,) = ResultStore(tmp_path / "r").results()
    assert not any("--repeats" in w for w in stored.warnings)


def test_dlperf_paths_give_the_configuration() -> None:
    assert path_settings(Path("logs/4n8g/rn50_b256_fp16_3.log")) == {
        "nodes": 4, "devices_per_node": 8, "batch_size": 256, "precision": "amp"
    }  # fmt: skip
    assert path_settings(Path("1n1g/bert_base_b32_fp32_xla_1.log"))["xla"] is True
    assert path_settings(Path("somewhere/train.log")) == {}


def test_groups_are_configs_and_flags_override_paths(tmp_path: Path) -> None:
    for cfg in ("1n1g", "1n2g"):
        (tmp_path / cfg).mkdir()
        for i in (2, 1, 10):
            (tmp_path / cfg / f"rn50_b64_fp32_{i}.log").write_text("")
    groups = group_logs([tmp_path], {})
    assert [g.settings["devices_per_node"] for g in groups] == [1, 2]
    assert [p.name for p in groups[0].paths] == [
        "rn50_b64_fp32_1.log", "rn50_b64_fp32_2.log", "rn50_b64_fp32_10.log"
    ]  # fmt: skip
    merged = group_logs([tmp_path], {"devices_per_node": 8})
    assert len(merged) == 1 and len(merged[0].paths) == 6
    with pytest.raises(DlperfError, match="no such file"):
        group_logs([tmp_path / "missing"], {})


def test_a_log_without_a_batch_size_asks_for_one(tmp_path: Path) -> None:
    (tmp_path / "train.log").write_text("")
    with pytest.raises(DlperfError, match="pass --batch-size"):
        import_logs("tensorflow", "resnet50", [tmp_path / "train.log"], results_dir=tmp_path)


def test_died_and_truncated_logs_are_failed_repeats_never_nan(
    fixtures: Path, tmp_path: Path
) -> None:
    good = (fixtures / "dlperf" / "tf2_resnet50" / "1n1g" / "rn50_b128_fp32_1.log").read_text()
    logs = tmp_path / "1n1g"
    logs.mkdir()
    (logs / "rn50_b128_fp32_1.log").write_text(good)
    cut = good.index("between steps 300 and 400")
    (logs / "rn50_b128_fp32_2.log").write_text(
        good[:cut] + "\nResourceExhaustedError: OOM when allocating tensor with shape[128,64]\n"
    )
    (logs / "rn50_b128_fp32_3.log").write_text(good[:cut])
    (logs / "rn50_b128_fp32_4.log").write_text("garbage \x00\x01 not a log\n")
    ((result, _),) = import_logs(
        "tensorflow",
        "resnet50",
        [logs],
        impl="official",
        results_dir=tmp_path / "r",
        overrides={"profile": "dlperf-2020"},
    )
    statuses = [r.status for r in sorted(result.repeats, key=lambda r: r.index)]
    assert statuses == [
        RepeatStatus.ok, RepeatStatus.crashed, RepeatStatus.too_few_steps, RepeatStatus.bad_output
    ]  # fmt: skip
    assert "out of memory" in result.repeats[1].message
    assert result.status == ResultStatus.partial
    assert result.metrics.throughput.n == 1 and result.metrics.throughput.values == [
        pytest.approx(result.repeats[0].throughput)
    ]
    assert "no usable Keras TimeHistory lines" in result.repeats[3].message


@pytest.mark.multiprocess
def test_ootb_events_files_import_like_the_run_that_wrote_them(tmp_path: Path) -> None:
    from dlperf.runner import run_benchmark
    from dlperf.spec import check_run, resolve_spec

    spec = resolve_spec(
        "calibration", "pace", preset="smoke",
        overrides={"skip": 3, "measure": 10, "repeats": 2, "batch_size": 10,
                   "options": {"step_ms": "20"}},
    )  # fmt: skip
    ran, _ = run_benchmark(check_run(spec), tmp_path / "ran")
    events = [Path(r.events_path) for r in ran.repeats]
    ((imported, _),) = import_logs(
        "calibration", "pace", events, impl="ootb",
        overrides={"batch_size": 10, "skip": 3, "measure": 10},
        results_dir=tmp_path / "imported",
    )  # fmt: skip
    assert imported.origin == "parse" and imported.source is None
    assert imported.spec.device == "cpu"  # from the events' start line
    assert [r.throughput for r in imported.repeats] == [r.throughput for r in ran.repeats]
    assert imported.metrics.throughput.median == ran.metrics.throughput.median
