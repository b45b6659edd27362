"""`dlperf parse mlperf-training` on hostile and broken folders (issue 30): runs of two
benchmarks in one folder, FIFOs, device links, over-long lines, files over the caps, whole
numbers spelt as JSON floats or strings, non-finite and deeply nested JSON, folders of
thousands of runs, a folder without a system description in a tree, and Ctrl-C / SIGTERM in
the middle of an import.

Each fault is made for real: copies of the real submissions in ../shared/fixtures with one
thing broken, real FIFOs and symlinks, the real CLI (in-process through `main()`, or a
subprocess where a hang or a signal must be survived)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import fixtures_dir
from test_mlperf_training import minutes, olympic

import dlperf.importers.mlperf_training as mt
from dlperf import DlperfError
from dlperf.importers.mlperf_training import import_folders
from dlperf.published import LEFT_OUT
from dlperf.schema import RepeatStatus

MXNET = "v4.0-NVIDIA-h200_ngc24.04_mxnet-resnet"
PYTORCH = "v4.0-NVIDIA-h200_ngc23.09_pytorch-bert"
PADDLE = "v2.0-Baidu-XMan4.0_1_node_8_A100_PaddlePaddle-bert"
JAX = "v1.0-Google-tpu-v4-256-JAX-Distributed-Shampoo-resnet"
MXNET_SCORE = "12.0776"  # the fixture README's (MLCommons' summarizer)


def copy(fixtures: Path, name: str, where: Path) -> Path:
    target = where / name
    shutil.copytree(fixtures / "mlperf_training" / name, target)
    return target


def stored(results: Path) -> list[Path]:
    return sorted(results.rglob("*.json")) if results.exists() else []


def edit_log(log: Path, key: str, raw_value: str) -> None:
    """The log with `key`'s value written as `raw_value` (JSON text, e.g. `Infinity`)."""
    pattern = re.compile(r'("key": "' + key + r'", "value": )[^,}]+')
    text = log.read_text(encoding="latin-1")
    edited, n = pattern.subn(lambda m: m.group(1) + raw_value, text)
    assert n >= 1, f"{log} logs no {key}"
    log.write_text(edited, encoding="latin-1")


def edit_system(folder: Path, **values: object) -> None:
    path = folder / "system.json"
    system = json.loads(path.read_text())
    path.write_text(json.dumps({**system, **values}))


def run_cli(*args: str, timeout: float) -> tuple[int, str]:
    """`dlperf ARGS...` as a separate process: a hang fails the test instead of stalling it."""
    out = subprocess.run(
        [sys.executable, "-m", "dlperf", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
        timeout=timeout,
    )
    text = " ".join((out.stdout + out.stderr).split())
    assert "Traceback" not in text, text
    return out.returncode, text


# --- row 2: one folder, runs of two benchmarks ------------------------------------------------


def test_runs_of_two_benchmarks_in_one_folder_are_refused_naming_both(
    fixtures, tmp_path, cli
) -> None:
    mixed = tmp_path / "v4.0-mixed" / "resnet"
    copy(fixtures, MXNET, tmp_path)
    mixed.mkdir(parents=True)
    shutil.copy(tmp_path / MXNET / "system.json", mixed)
    shutil.copy(tmp_path / MXNET / "result_0.txt", mixed / "result_0.txt")  # ResNet
    shutil.copy(fixtures / "mlperf_training" / PYTORCH / "result_0.txt", mixed / "result_1.txt")
    code, out = cli("parse", "mlperf-training", str(mixed), "--results-dir", str(tmp_path / "r"))
    assert code == 1, out
    assert "2 benchmarks (bert in result_1.txt; resnet in result_0.txt)" in out
    assert "nothing to import" in out and not stored(tmp_path / "r")
    # Beside a good folder: the mixed one is left out and said, the good one imported, exit 2.
    code, out = cli(
        "parse", "mlperf-training", str(tmp_path / MXNET), str(mixed),
        "--results-dir", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 2, out
    assert f"{LEFT_OUT}{mixed}" in out and "2 benchmarks" in out
    assert f"MLPerf score {MXNET_SCORE} min" in out
    (only,) = stored(tmp_path / "r")
    assert json.loads(only.read_text())["spec"]["model"] == "resnet50"


# --- row 4: FIFOs, device links, over-long lines, files over the cap, signals ----------------


@pytest.mark.multiprocess
def test_a_fifo_and_a_link_to_a_device_are_left_out_unread(fixtures, tmp_path) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    os.mkfifo(folder / "result_8.txt")  # no writer: opening it to read blocks forever
    (folder / "result_9.txt").symlink_to("/dev/zero")  # reading it never ends
    # Generous: the import takes seconds; a blocked or endless read never returns.
    code, out = run_cli(
        "parse", "mlperf-training", str(folder), "--results-dir", str(tmp_path / "r"), timeout=300
    )
    assert code == 2, out  # some input was left out
    assert f"{LEFT_OUT}{folder / 'result_8.txt'}: a FIFO, not a regular file" in out
    assert f"{LEFT_OUT}{folder / 'result_9.txt'}: a character device, not a regular file" in out
    assert f"MLPerf score {MXNET_SCORE} min" in out  # the five real runs, as MLPerf scores them
    (result,) = stored(tmp_path / "r")
    assert len(json.loads(result.read_text())["repeats"]) == 5


def test_a_log_over_the_size_cap_is_refused_before_it_is_read(fixtures, tmp_path, cli) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    big = folder / "result_5.txt"
    with big.open("wb") as f:  # a real file of that size (sparse: nothing to write)
        f.truncate(mt.MAX_LOG_BYTES + 1)
    code, out = cli("parse", "mlperf-training", str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 1, out
    assert f"{big}: the result file is {mt.MAX_LOG_BYTES + 1:,} bytes" in out
    assert f"at most {mt.MAX_LOG_BYTES:,}" in out and not stored(tmp_path / "r")


def test_an_over_long_line_is_rejected_before_any_regular_expression_sees_it(
    fixtures, tmp_path, monkeypatch
) -> None:
    """mlperf-logging's reader strips every line with `re.sub(".*" + TOKEN, ...)`, quadratic in
    the line's length (400 KB: minutes, deaf to SIGTERM). The longest string any regular
    expression is handed during the import is recorded: it must stay under the cap."""
    folder = copy(fixtures, MXNET, tmp_path)
    log = folder / "result_1.txt"
    lines = log.read_text(encoding="latin-1").splitlines(keepends=True)
    long_line = ':::MLLOG {"key": "x", "value": "' + "a" * 400_000 + '"}\n'
    log.write_text("".join([*lines[:5], long_line, *lines[5:]]), encoding="latin-1")
    longest = [0]

    def watched(name: str):
        real = getattr(re, name)

        def call(*args, **kwargs):
            longest[0] = max([longest[0], *(len(a) for a in args if isinstance(a, str))])
            return real(*args, **kwargs)

        return call

    for name in ("sub", "subn", "match", "search", "fullmatch", "findall", "finditer", "split"):
        monkeypatch.setattr(re, name, watched(name))
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    assert longest[0] < mt.MAX_LINE_CHARS
    run = result.repeats[1]
    assert run.status == RepeatStatus.invalid
    assert f"line 6: over {mt.MAX_LINE_CHARS:,} characters, not read" in run.message
    # MLPerf's score without that run: one dropped run, as a run that fails its check
    times = [minutes(f) for f in sorted(folder.glob("result_*.txt"))]
    factor = json.loads((folder / "scaling.json").read_text())["scaling_factor"]
    kept = times[:1] + times[2:]
    assert result.metrics.score == pytest.approx(olympic(kept, 1) * factor, abs=1e-6)


@pytest.fixture(scope="module")
def busy_folder(tmp_path_factory) -> Path:
    """A real folder whose first run is a big log: its own lines, then real `tracked_stats`
    lines repeated up to half the caps (tens of MB, seconds of reading)."""
    if fixtures_dir() is None:
        pytest.skip("no ../shared/fixtures beside the checkout")
    folder = tmp_path_factory.mktemp("busy") / "v4.0-busy" / "resnet"
    shutil.copytree(fixtures_dir() / "mlperf_training" / MXNET, folder)
    log = folder / "result_0.txt"
    text = log.read_text(encoding="latin-1")
    stats = next(line for line in text.splitlines(True) if '"tracked_stats"' in line)
    copies = min(mt.MAX_LOG_RECORDS // 2, mt.MAX_LOG_BYTES // 2 // len(stats))
    with log.open("a", encoding="latin-1") as f:
        f.write(stats * copies)
    return folder


def holds_open(pid: int, path: Path) -> bool:
    with os.scandir(f"/proc/{pid}/fd") as fds:
        for fd in fds:
            with contextlib.suppress(OSError):  # closed meanwhile
                if os.readlink(fd.path) == str(path):
                    return True
    return False


def stopped(pid: int) -> bool:
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state in ("T", "t")


def stop_while_reading(proc: subprocess.Popen, path: Path) -> None:
    """Freezes `proc` (SIGSTOP) at a moment it holds `path` open: it is then provably in the
    middle of the import, whatever the machine's load."""
    deadline = time.monotonic() + 300  # start-up on a loaded machine; no fixed wait
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the import ended before it was seen reading the big log"
        if holds_open(proc.pid, path):
            os.kill(proc.pid, signal.SIGSTOP)
            while not stopped(proc.pid):
                time.sleep(0.001)
            if holds_open(proc.pid, path):
                return
            os.kill(proc.pid, signal.SIGCONT)  # it had just moved on: look again
        time.sleep(0.002)
    raise AssertionError("never saw the import read the big log")


@pytest.mark.multiprocess
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_ctrl_c_and_sigterm_stop_an_import_at_once(
    busy_folder, tmp_path, sig, foreground_sigint
) -> None:
    big = (busy_folder / "result_0.txt").resolve()
    results = tmp_path / "r"
    argv = [sys.executable, "-m", "dlperf", "parse", "mlperf-training", str(busy_folder)]
    proc = subprocess.Popen(
        [*argv, "--results-dir", str(results)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        stop_while_reading(proc, big)
        proc.send_signal(sig)
        os.kill(proc.pid, signal.SIGCONT)
        # 60 s only bounds a broken build; left alone, this import would finish and exit 0.
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out  # the exit code of an interrupted dlperf command
    assert "interrupted: an import stores its results once every log is read" in out
    assert "Traceback" not in out and "workloads" not in out
    assert not stored(results)


# --- row 5: whole numbers in any JSON spelling; counts below 1 -------------------------------


@pytest.mark.parametrize("nodes", [1, 1.0, "1", " 1 ", "1.0"], ids=repr)
def test_a_whole_number_in_any_json_spelling_is_a_count(fixtures, tmp_path, nodes) -> None:
    """MosaicML's v2.0 system.json writes `"number_of_nodes": 1.0`; NVIDIA's `"1"`."""
    folder = copy(fixtures, MXNET, tmp_path)
    edit_system(folder, number_of_nodes=nodes, accelerators_per_node=8.0)
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    assert (result.spec.nodes, result.spec.devices_per_node) == (1, 8)
    assert f"{result.metrics.score:.6g}" == MXNET_SCORE


@pytest.mark.parametrize(
    "per_node", ["-8", -8, 0, "0", 8.5, "8.5", True, "eight", None, "1e999"], ids=repr
)
def test_a_count_that_is_not_a_whole_number_from_one_up_is_refused(
    fixtures, tmp_path, cli, per_node
) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    edit_system(folder, accelerators_per_node=per_node)
    code, out = cli("parse", "mlperf-training", str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 1, out
    assert f"{folder / 'system.json'}: accelerators_per_node is {per_node!r}" in out
    assert not stored(tmp_path / "r")


# --- row 6: non-finite and huge numbers, deep JSON, thousands of runs -------------------------


@pytest.mark.parametrize(
    "name, file, key, raw",
    [
        (PYTORCH, "result_3.txt", "train_samples", "Infinity"),
        (PYTORCH, "result_3.txt", "train_samples", "NaN"),
        (MXNET, "result_2.txt", "global_batch_size", "1e999"),
        (MXNET, "result_2.txt", "global_batch_size", "-3200"),
        (JAX, "result_1.txt", "global_batch_size", "1e300"),
    ],
)
def test_a_number_that_is_not_finite_or_beyond_any_count_is_refused_by_file_and_field(
    fixtures, tmp_path, cli, name, file, key, raw
) -> None:
    folder = copy(fixtures, name, tmp_path)
    edit_log(folder / file, key, raw)
    code, out = cli("parse", "mlperf-training", str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 1, out
    assert f"{folder / file}: {key} is" in out and "damaged" in out
    assert not stored(tmp_path / "r")  # nothing that later commands could not load


def test_a_time_that_is_not_finite_is_refused(fixtures, tmp_path) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    log = folder / "result_4.txt"
    text = log.read_text(encoding="latin-1")
    start = re.search(r'"time_ms": (\d+), "event_type": "INTERVAL_START", "key": "run_start"', text)
    infinite = start.group(0).replace(start[1], "Infinity")
    log.write_text(text.replace(start.group(0), infinite), encoding="latin-1")
    with pytest.raises(DlperfError, match=r"result_4\.txt: line \d+ \(run_start\): time_ms is inf"):
        import_folders([folder], results_dir=tmp_path / "r")
    assert not stored(tmp_path / "r")


@pytest.mark.parametrize("factor", ["Infinity", "-1", '"x"', "null"])
def test_a_scaling_factor_that_is_not_a_positive_number_is_refused(
    fixtures, tmp_path, factor
) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    (folder / "scaling.json").write_text('{"scaling_factor": ' + factor + "}")
    with pytest.raises(DlperfError, match=r"scaling\.json: scaling_factor is .*not a positive"):
        import_folders([folder], results_dir=tmp_path / "r")


def test_a_system_json_nested_200000_deep_is_refused(fixtures, tmp_path, cli) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    (folder / "system.json").write_text("[" * 200_000 + "]" * 200_000)
    code, out = cli("parse", "mlperf-training", str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 1, out
    assert f"{folder / 'system.json'}: not a readable system description: nested too deep" in out


def test_a_folder_of_ten_thousand_runs_is_refused_naming_it(tmp_path, cli) -> None:
    folder = tmp_path / "v4.0-many" / "resnet"
    folder.mkdir(parents=True)
    (folder / "system.json").write_text('{"number_of_nodes": 1, "accelerators_per_node": 8}')
    for i in range(10_000):
        (folder / f"result_{i}.txt").write_text(":::MLLOG {}\n")
    code, out = cli("parse", "mlperf-training", str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 1, out
    assert f"{folder}: 10,000 result_*.txt files" in out and f"up to {mt.MAX_RUNS}" in out
    assert not stored(tmp_path / "r")


# --- row 15: a folder without a system description in a tree ---------------------------------


def test_a_folder_without_a_system_description_is_left_out_and_the_rest_imported(
    fixtures, tmp_path, cli
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(fixtures / "mlperf_training", tree)
    (tree / MXNET / "system.json").unlink()
    code, out = cli("parse", "mlperf-training", str(tree), "--results-dir", str(tmp_path / "r"))
    assert code == 2, out
    assert f"{LEFT_OUT}{tree / MXNET} (no system description" in out
    kept = {json.loads(p.read_text())["repeats"][0]["log_path"] for p in stored(tmp_path / "r")}
    assert {Path(p).parent.name for p in kept} == {PYTORCH, PADDLE, JAX}
