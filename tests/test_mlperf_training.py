"""`dlperf parse mlperf-training` on the four real MLPerf Training submissions in
../shared/fixtures/mlperf_training, and on broken copies of them.

The scores are checked twice: against the fixture README's (mlperf-logging's summarizer, as
MLCommons published them), and against an olympic mean computed here from the logs' own
run_start / run_stop lines, so neither the package nor dlperf is taken on trust."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fixtures_dir

from dlperf import DlperfError
from dlperf.importers.mlperf_training import import_folders
from dlperf.published import LEFT_OUT, NOT_IMPORTED
from dlperf.schema import RepeatStatus, ResultStatus

MXNET = "v4.0-NVIDIA-h200_ngc24.04_mxnet-resnet"
PYTORCH = "v4.0-NVIDIA-h200_ngc23.09_pytorch-bert"
PADDLE = "v2.0-Baidu-XMan4.0_1_node_8_A100_PaddlePaddle-bert"
JAX = "v1.0-Google-tpu-v4-256-JAX-Distributed-Shampoo-resnet"
# The fixture README's scores (mlperf-logging 4.1.68's result summarizer), as printed there.
README_SCORES = {MXNET: "12.0776", PYTORCH: "5.21165", PADDLE: "16.5988", JAX: "3.31824"}
H200_BF16 = 989.4e12  # NVIDIA's H200 SXM datasheet, dense BF16


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> dict:
    if fixtures_dir() is None:
        pytest.skip("no ../shared/fixtures beside the checkout")
    root = fixtures_dir() / "mlperf_training"
    stored = import_folders([root], results_dir=tmp_path_factory.mktemp("r"))
    return {Path(r.repeats[0].log_path).parent.name: r for r, _ in stored}


def events(file: Path) -> list[dict]:
    """The file's :::MLLOG records, read here without mlperf-logging."""
    out = []
    for line in file.read_text(encoding="latin-1").splitlines():
        if ":::MLLOG " in line:
            out.append(json.loads(line.split(":::MLLOG ", 1)[1]))
    return out


def minutes(file: Path) -> float:
    marks = {e["key"]: e["time_ms"] for e in events(file) if e["key"] in ("run_start", "run_stop")}
    return (marks["run_stop"] - marks["run_start"]) / 60000


def olympic(times: list[float], dropped: int = 0) -> float:
    """MLPerf's olympic mean: the fastest dropped, and the slowest unless a run was dropped
    already (it failed its checks)."""
    kept = sorted(times)[1 : len(times) - (1 - dropped)]
    return statistics.fmean(kept)


def copy(fixtures: Path, name: str, tmp_path: Path) -> Path:
    """A copy of a fixture folder, named as the round's results are (the round in the name)."""
    target = tmp_path / name
    shutil.copytree(fixtures / "mlperf_training" / name, target)
    return target


def parse(*args: str) -> tuple[int, str]:
    """`dlperf parse mlperf-training ARGS` as a user runs it: its exit code and output."""
    out = subprocess.run(
        [sys.executable, "-m", "dlperf", "parse", "mlperf-training", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text
    return out.returncode, text


def test_the_four_submissions_score_as_mlperf_publishes_them(published, fixtures) -> None:
    assert sorted(published) == sorted(README_SCORES)
    for name, result in published.items():
        folder = fixtures / "mlperf_training" / name
        assert f"{result.metrics.score:.6g}" == README_SCORES[name], name
        times = [minutes(f) for f in sorted(folder.glob("result_*.txt"))]
        dropped = [r.index - 1 for r in result.repeats if r.status != RepeatStatus.ok]
        kept = [t for i, t in enumerate(times) if i not in dropped]
        scaling = folder / "scaling.json"
        factor = json.loads(scaling.read_text())["scaling_factor"] if scaling.exists() else 1.0
        assert result.metrics.score == pytest.approx(olympic(kept, len(dropped)) * factor, abs=1e-6)
        assert result.metrics.score_unit == "min" and result.status == ResultStatus.ok
        assert [r.training.time_to_train_min for r in result.repeats] == pytest.approx(times)
        peer = result.metrics.peer["mlperf-training"]["score"]
        assert peer.value == result.metrics.score and "olympic mean" in peer.rule
        assert result.origin == "parse" and result.spec.options["suite"] == "mlperf-training"


def test_the_run_that_fails_its_check_is_kept_outside_the_median(published) -> None:
    paddle = published[PADDLE]
    bad = [r for r in paddle.repeats if r.status != RepeatStatus.ok]
    assert [Path(r.log_path).name for r in bad] == ["result_6.txt"]
    (run,) = bad
    assert run.status == RepeatStatus.invalid and run.throughput > 0
    assert not run.training.compliant and not run.training.converged
    assert "eval_accuracy" in run.message and "2.0.0" in run.message
    assert (
        paddle.metrics.throughput.n == 9 and run.throughput not in paddle.metrics.throughput.values
    )


def test_systems_frameworks_and_models_come_from_the_submission(published) -> None:
    expect = {  # framework, model, device, nodes, per node, global batch, accelerator
        MXNET: ("mxnet", "resnet50", "cuda", 1, 8, 3200, "NVIDIA H200-SXM5-141GB"),
        PYTORCH: ("pytorch", "bert-large", "cuda", 1, 8, 768, "NVIDIA H200-SXM5-141GB"),
        PADDLE: ("paddle", "bert-large", "cuda", 1, 8, 448, "NVIDIA A100-SXM4-80GB"),
        JAX: ("jax", "resnet50", "tpu", 32, 4, 32768, "TPU"),
    }
    for name, (framework, model, device, nodes, per_node, batch, accelerator) in expect.items():
        r = published[name]
        s = r.spec
        assert (s.framework, s.model, s.device) == (framework, model, device), name
        assert (s.nodes, s.devices_per_node, r.job.global_batch) == (nodes, per_node, batch)
        assert r.environment.gpu == accelerator and r.environment.gpu_count == nodes * per_node
        assert s.options["round"] == name.split("-")[0]
    assert published[MXNET].spec.options["submitter"] == "NVIDIA"
    assert published[JAX].spec.options["division"] == "open"


def test_throughput_is_the_samples_over_the_training_marks(published, fixtures) -> None:
    # MXNet ResNet50: 35 epochs of ImageNet's 1,281,167 images over the epoch intervals.
    mxnet = published[MXNET]
    log = events(fixtures / "mlperf_training" / MXNET / "result_0.txt")
    starts = [e["time_ms"] for e in log if e["key"] == "epoch_start"]
    stops = [e["time_ms"] for e in log if e["key"] == "epoch_stop"]
    seconds = sum(b - a for a, b in zip(starts, stops, strict=True)) / 1000
    first = mxnet.repeats[0]
    assert first.training.samples == len(stops) * 1_281_167 == 35 * 1_281_167
    assert first.throughput == pytest.approx(first.training.samples / seconds, rel=1e-6)
    per_gpu = mxnet.metrics.throughput.median / 8
    assert 7_700 < per_gpu < 8_000  # MLPerf's tracked_stats say ~7,950 per GPU per epoch
    # PyTorch BERT: train_samples sequences over its one epoch, the 16 evaluations taken out.
    bert = published[PYTORCH].repeats[0]
    log = events(fixtures / "mlperf_training" / PYTORCH / "result_0.txt")
    at = {e["key"]: e for e in log}
    evals = zip(
        [e["time_ms"] for e in log if e["key"] == "eval_start"],
        [e["time_ms"] for e in log if e["key"] == "eval_stop"],
        strict=True,
    )
    eval_s = sum(b - a for a, b in evals) / 1000
    epoch_s = (at["epoch_stop"]["time_ms"] - at["epoch_start"]["time_ms"]) / 1000
    assert bert.training.samples == at["train_samples"]["value"]
    assert bert.training.eval_s == pytest.approx(eval_s, abs=1e-3)
    assert bert.throughput == pytest.approx(bert.training.samples / (epoch_s - eval_s), rel=1e-5)
    # Paddle's log has no eval marks, JAX's only blocks: said, not hidden.
    assert "evaluation time included" in published[PADDLE].repeats[0].training.note
    assert published[JAX].repeats[0].training.intervals == "block"


def test_mfu_where_the_peak_is_known_and_plausible(published) -> None:
    mxnet = published[MXNET]
    flops = mxnet.model.flops_per_sample
    assert flops == pytest.approx(24.5e9, rel=0.01)
    expected = flops * mxnet.metrics.throughput.median / (8 * H200_BF16)
    assert mxnet.metrics.mfu == pytest.approx(expected)
    assert published[JAX].metrics.mfu is None  # no TPU peak held
    for name in (PYTORCH, PADDLE):  # over 100% at 512 padded tokens: refused, with the reason
        bert = published[name]
        assert bert.metrics.mfu is None
        assert any(w.startswith("no MFU:") and "padding" in w for w in bert.warnings)


@pytest.mark.multiprocess
def test_the_command_imports_a_tree_and_says_each_score(fixtures, tmp_path) -> None:
    code, out = parse(str(fixtures / "mlperf_training"), "--results-dir", str(tmp_path))
    assert code == 0, out
    line = "mxnet resnet50 train 1n8d b400: MLPerf score 12.0776 min, 7823 samples/s per"
    assert line in out
    assert len(list(tmp_path.rglob("*.json"))) == 4
    code, out = parse(str(fixtures / "mlperf_training"), "--model", "x")
    assert code == 1 and "--model not used by `dlperf parse mlperf-training`" in out


def test_a_truncated_run_is_dropped_as_mlperf_drops_it(fixtures, tmp_path) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    times = [minutes(f) for f in sorted(folder.glob("result_*.txt"))]
    log = folder / "result_2.txt"
    lines = log.read_text(encoding="latin-1").splitlines(keepends=True)
    log.write_text("".join(lines[: len(lines) // 2]), encoding="latin-1")
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    run = result.repeats[2]
    assert run.status == RepeatStatus.invalid and "run_stop" in run.message
    assert run.training.time_to_train_min is None and not run.training.converged
    factor = json.loads((folder / "scaling.json").read_text())["scaling_factor"]
    kept = times[:2] + times[3:]
    assert result.metrics.score == pytest.approx(olympic(kept, 1) * factor, abs=1e-6)
    assert result.status == ResultStatus.ok  # MLPerf's rules allow one dropped run


@pytest.mark.multiprocess
def test_too_few_runs_give_no_score(fixtures, tmp_path) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    (folder / "result_4.txt").unlink()
    code, out = parse(str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 2, out
    assert "MLPerf requires 5 for resnet" in " ".join(out.split())
    (stored,) = (tmp_path / "r").rglob("*.json")
    data = json.loads(stored.read_text())
    assert data["status"] == "partial" and data["metrics"]["score"] is None
    assert "mlperf-training" not in data["metrics"]["peer"]


def test_two_failed_runs_give_no_score(fixtures, tmp_path) -> None:
    folder = copy(fixtures, PADDLE, tmp_path)  # result_6 already fails its check
    log = folder / "result_0.txt"
    kept = [x for x in log.read_text(encoding="latin-1").splitlines(True) if "run_stop" not in x]
    log.write_text("".join(kept), encoding="latin-1")
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    assert result.metrics.score is None and result.status == ResultStatus.partial
    assert any("more than 1 run(s) failed" in w for w in result.warnings)


def test_without_scaling_json_the_score_is_the_unscaled_mean(fixtures, tmp_path) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    (folder / "scaling.json").unlink()
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    times = [minutes(f) for f in sorted(folder.glob("result_*.txt"))]
    assert result.metrics.score == pytest.approx(olympic(times), abs=1e-6)
    assert "(no scaling.json: unscaled)" in result.metrics.peer["mlperf-training"]["score"].rule


def test_a_file_that_is_not_an_mllog_is_that_run_marked(fixtures, tmp_path) -> None:
    folder = copy(fixtures, MXNET, tmp_path)
    (folder / "result_1.txt").write_bytes(b"\x00\xffnot a log\n:::MLLOG {broken\n")
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    run = result.repeats[1]
    assert run.status == RepeatStatus.bad_output and run.throughput is None
    assert "compliance check" in run.message and run.training.messages
    assert result.metrics.score is not None  # four good runs and one dropped: still scored


@pytest.mark.multiprocess
def test_bad_folders_are_refused_with_what_to_do(fixtures, tmp_path) -> None:
    empty = tmp_path / "v4.0-empty"
    empty.mkdir()
    code, out = parse(str(empty))
    assert code == 1 and "no result_*.txt files" in out and "Traceback" not in out
    code, out = parse(str(tmp_path / "nowhere"))
    assert code == 1 and "no such file or folder" in out
    folder = copy(fixtures, MXNET, tmp_path)
    (folder / "system.json").unlink()
    code, out = parse(str(folder))
    assert code == 1 and "no system description" in out and "systems/<system>.json" in out
    unnamed = tmp_path / "plain" / "resnet"
    shutil.copytree(fixtures / "mlperf_training" / JAX, unnamed)
    code, out = parse(str(unnamed), "--results-dir", str(tmp_path / "r"))
    assert code == 1 and "--round 4.0" in out
    code, out = parse(str(unnamed), "--round", "1.0", "--results-dir", str(tmp_path / "r"))
    assert code == 0 and "MLPerf score 3.31824 min" in out, out
    code, out = parse(str(unnamed), "--round", "0.1")
    assert code == 1 and "round '0.1' is not one mlperf-logging checks" in " ".join(out.split())


def test_a_results_tree_finds_the_system_description_in_systems(fixtures, tmp_path) -> None:
    """`<submitter>/results/<system>/<benchmark>/` with `<submitter>/systems/<system>.json`,
    as MLCommons publishes a round (no system.json beside the runs)."""
    root = tmp_path / "training_results_v4.0" / "NVIDIA"
    bench = root / "results" / "h200_ngc24.04_mxnet" / "resnet"
    shutil.copytree(fixtures / "mlperf_training" / MXNET, bench)
    (root / "systems").mkdir()
    (bench / "system.json").rename(root / "systems" / "h200_ngc24.04_mxnet.json")
    (result, _), = import_folders([tmp_path], results_dir=tmp_path / "r")  # fmt: skip
    assert f"{result.metrics.score:.6g}" == README_SCORES[MXNET]
    assert result.spec.options["round"] == "v4.0" and result.spec.world_size == 8


def test_refusal_leaves_nothing_half_imported(fixtures, tmp_path) -> None:
    good = copy(fixtures, MXNET, tmp_path)
    bad = copy(fixtures, PYTORCH, tmp_path)
    (bad / "system.json").write_text("[1, 2]")
    with pytest.raises(DlperfError, match="not a system description"):
        import_folders([good, bad], results_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("*.json"))


def test_a_benchmark_without_a_samples_count_is_not_imported_and_said(fixtures, tmp_path) -> None:
    """A tree holds benchmarks whose logs count progress in units dlperf cannot turn into
    samples: each is named, not stored; the others import."""
    other = tmp_path / "v4.0-other" / "minigo"
    shutil.copytree(fixtures / "mlperf_training" / MXNET, other)
    for log in other.glob("result_*.txt"):
        text = log.read_text(encoding="latin-1")
        log.write_text(text.replace('"value": "resnet"', '"value": "minigo"'), "latin-1")
    with pytest.raises(DlperfError, match="not imported: .*minigo .*nothing to import"):
        import_folders([other], results_dir=tmp_path / "r")
    good = copy(fixtures, MXNET, tmp_path)
    (result, _), = import_folders([good, other], results_dir=tmp_path / "r")  # fmt: skip
    assert result.spec.model == "resnet50"
    assert any(w.startswith(NOT_IMPORTED) and "samples_count" in w for w in result.warnings)
    assert not any(w.startswith(LEFT_OUT) for w in result.warnings)
    code, out = parse(str(good), str(other), "--results-dir", str(tmp_path / "cli"))
    assert code == 0, out  # a known limit, not damaged input: the exit code stays
    assert f"{NOT_IMPORTED}{other}" in " ".join(out.split())


# --- Throughput in each submitter's units (issue 30, row 14) ----------------------------------
# Small MLLOG logs written here, each timed by the test: the same training spelt in the units
# different submitters log must give one throughput.

T0 = 1_714_000_000_000  # ms


def mllog(folder: Path, benchmark: str, records: list[tuple[float, str, object, dict]]) -> Path:
    """A one-run benchmark folder (with a system.json of 1 node x 8 accelerators) whose
    result_0.txt holds `records` ((seconds after T0, key, value, metadata)) as :::MLLOG lines."""
    folder.mkdir(parents=True)
    (folder / "system.json").write_text(
        json.dumps({"submitter": "test", "number_of_nodes": "1", "accelerators_per_node": "8",
                    "accelerator_model_name": "NVIDIA H100-SXM5-80GB", "framework": "PyTorch"})
    )  # fmt: skip
    head = [(0, "submission_benchmark", benchmark, {}), (0, "run_start", None, {})]
    lines = []
    for seconds, key, value, meta in [*head, *records]:
        event = {"namespace": "", "time_ms": T0 + round(seconds * 1000), "event_type": "x",
                 "key": key, "value": value, "metadata": {"file": "t.py", **meta}}  # fmt: skip
        lines.append(f":::MLLOG {json.dumps(event)}\n")
    (folder / "result_0.txt").write_text("".join(lines))
    return folder


def epochs_log(epochs: int, seconds: float, eval_s: float) -> list[tuple]:
    """`epochs` epoch marks of `seconds` each, an evaluation of `eval_s` after each."""
    out, t = [], 1.0
    for e in range(epochs):
        out += [(t, "epoch_start", e, {"epoch_num": e}), (t + seconds, "epoch_stop", e, {})]
        t += seconds
        out += [(t, "eval_start", e, {}), (t + eval_s, "eval_accuracy", 0.3, {"epoch_num": e}),
                (t + eval_s, "eval_stop", e, {})]  # fmt: skip
        t += eval_s
    return [*out, (t, "run_stop", None, {"status": "success"})]


def one_run(folder: Path, tmp_path: Path):
    (result, _), = import_folders([folder], results_dir=tmp_path / "r" / folder.name)  # fmt: skip
    return result, result.repeats[0]


def test_retinanet_steps_per_epoch_are_counted_as_the_images_they_trained(tmp_path) -> None:
    """Lenovo's and NVIDIA's RetinaNet (`ssd`) logs give train_samples as the steps of an
    epoch at their global batch (4,572 at 256), not its 1,170,301 images."""
    batch, steps, images = 256, 4572, 1_170_301
    marks = epochs_log(epochs=5, seconds=500, eval_s=30)
    as_steps = mllog(tmp_path / "v4.0-a" / "ssd", "ssd", [
        (0, "global_batch_size", batch, {}), (0, "train_samples", steps, {}), *marks])  # fmt: skip
    as_images = mllog(tmp_path / "v4.0-b" / "ssd", "ssd", [
        (0, "global_batch_size", batch, {}), (0, "train_samples", images, {}), *marks])  # fmt: skip
    _, by_steps = one_run(as_steps, tmp_path)
    _, by_images = one_run(as_images, tmp_path)
    assert by_steps.throughput == pytest.approx(by_images.throughput, rel=1e-12)
    per_epoch = by_steps.training.samples / 5
    assert abs(per_epoch - steps * batch) < batch  # the images of 4,572 steps, to one batch
    assert by_steps.throughput == pytest.approx(by_steps.training.samples / (5 * 500))
    assert "steps per epoch at global batch 256" in by_steps.training.note
    # per accelerator: hundreds of images/s, not the 1-2 of train_samples x epochs
    assert 100 < by_steps.throughput / 8 < 1000


def test_unet3d_epoch_numbers_logged_as_samples_or_epochs_give_one_throughput(tmp_path) -> None:
    """NVIDIA-derived UNet3D logs first_epoch_num/epoch_count in samples (168, 3360, 6720...),
    the reference in epochs (1, 20, 40...); KiTS19 has 168 training cases."""
    blocks, each_s, cases = 6, 6.0, 168

    def blocks_log(first, count) -> list[tuple]:
        out = [(0, "global_batch_size", 56, {}), (0, "train_samples", cases, {})]
        for b in range(blocks):
            meta = {"first_epoch_num": first(b), "epoch_count": count}
            out += [(1 + b * each_s, "block_start", None, meta),
                    (1 + (b + 1) * each_s, "block_stop", None, meta)]  # fmt: skip
        return [*out, (1 + blocks * each_s, "run_stop", None, {"status": "success"})]

    nvidia = blocks_log(lambda b: cases if b == 0 else 20 * cases * b, 20 * cases)
    reference = blocks_log(lambda b: 1 if b == 0 else 20 * b, 20)
    in_samples = mllog(tmp_path / "v4.0-a" / "unet3d", "unet3d", nvidia)
    in_epochs = mllog(tmp_path / "v4.0-b" / "unet3d", "unet3d", reference)
    _, samples_run = one_run(in_samples, tmp_path)
    _, epochs_run = one_run(in_epochs, tmp_path)
    expected = blocks * 20 * cases / (blocks * each_s)  # 20 epochs of 168 cases a block
    assert epochs_run.throughput == pytest.approx(expected)
    assert samples_run.throughput == pytest.approx(expected)  # not 168 times as many
    assert "read as samples" in samples_run.training.note


def test_a_unit_that_cannot_be_told_stores_no_throughput_and_says_why(tmp_path, fixtures) -> None:
    from dlperf.published import NO_THROUGHPUT
    from dlperf.report.references import references_section

    folder = mllog(tmp_path / "v4.0-odd" / "ssd", "ssd", [
        (0, "global_batch_size", 256, {}), (0, "train_samples", 12345, {}),
        *epochs_log(epochs=5, seconds=500, eval_s=30)])  # fmt: skip
    result, run = one_run(folder, tmp_path)  # stored: MLPerf's verdicts stay
    assert run.throughput is None and result.metrics.throughput is None
    why = next(w for w in result.warnings if w.startswith(NO_THROUGHPUT))
    assert "train_samples 12,345 is neither ssd's data set" in why
    assert "steps per epoch at global batch 256" in why
    page = "\n".join(references_section([result], "ssd", []))
    assert "train_samples 12,345 is neither" in page  # the report's dash says why


@pytest.mark.multiprocess
def test_a_fraction_of_a_sample_per_accelerator_is_printed_with_its_digits(
    fixtures, tmp_path
) -> None:
    """LLM fine-tuning trains a fraction of a sample per second on each accelerator; the
    headline printed "0 samples/s". Here: a real BERT submission said to have run on 65,536
    accelerators."""
    folder = copy(fixtures, PADDLE, tmp_path)
    system = json.loads((folder / "system.json").read_text())
    system.update(number_of_nodes=64, accelerators_per_node=1024)
    (folder / "system.json").write_text(json.dumps(system))
    code, out = parse(str(folder), "--results-dir", str(tmp_path / "r"))
    assert code == 0, out
    (path,) = (tmp_path / "r").rglob("*.json")
    stored = json.loads(path.read_text())
    per = stored["metrics"]["throughput"]["median"] / 65_536
    assert per < 1
    assert f"MLPerf score {README_SCORES[PADDLE]} min, {per:.3g} samples/s per accelerator" in out


# --- When a submission ran, and what its system is called (issue 32, row 12) ------------------


def test_a_submission_is_created_when_its_runs_started(published, fixtures) -> None:
    """`created` is the earliest run_start of the folder's logs (each line's time_ms), read
    here without dlperf: a v1.0 submission is of May 2021, not of the day it was imported."""
    from datetime import datetime, timezone

    for name, result in published.items():
        files = sorted((fixtures / "mlperf_training" / name).glob("result_*.txt"))
        first = min(e["time_ms"] for f in files for e in events(f) if e["key"] == "run_start")
        started = datetime.fromtimestamp(first / 1000, timezone.utc).replace(microsecond=0)
        assert result.created_at == started, name
    assert published[JAX].created == "2021-05-19T04:39:57+00:00"
    assert published[MXNET].created.startswith("2024-04-")  # v4.0: spring 2024


def test_logs_without_a_plausible_time_keep_the_imports_and_say_so(tmp_path) -> None:
    """A log whose clock was never set (time_ms near 0: 1970) is no date of an MLPerf run."""
    from datetime import datetime, timedelta, timezone

    folder = mllog(tmp_path / "v4.0-clock" / "ssd", "ssd", [
        (0, "global_batch_size", 256, {}), (0, "train_samples", 1_170_301, {}),
        *epochs_log(epochs=2, seconds=500, eval_s=30)])  # fmt: skip
    log = folder / "result_0.txt"
    log.write_text(log.read_text().replace(f'"time_ms": {T0}', '"time_ms": 1'))
    result, _ = one_run(folder, tmp_path)
    assert datetime.now(timezone.utc) - result.created_at < timedelta(days=1)
    assert any(w.startswith("created is the import's time") for w in result.warnings)


def test_placeholders_of_a_system_description_name_nothing(published, fixtures, tmp_path) -> None:
    """Google's v1.0 system.json leaves most values "TODO" (its interconnect, OS): none of
    them reaches the machine's name or its environment; N/A and empty values neither."""
    from dlperf.identity import machine_of

    jax = published[JAX]
    assert machine_of(jax).label == "128 x TPU, AMD Rome"
    assert jax.environment.interconnect is None and jax.environment.os == "unknown"
    assert jax.spec.options["system"] == "tpu-v4-256"
    folder = copy(fixtures, MXNET, tmp_path)
    system = json.loads((folder / "system.json").read_text())
    system.update(accelerator_interconnect="N/A", host_processor_model_name=" todo ",
                  operating_system="", system_name="TBD")  # fmt: skip
    (folder / "system.json").write_text(json.dumps(system))
    (result, _), = import_folders([folder], results_dir=tmp_path / "r")  # fmt: skip
    assert machine_of(result).label == "8 x NVIDIA H200-SXM5-141GB"
    assert result.spec.options["system"] == folder.parent.name  # the results folder's name
    env = result.environment.model_dump_json()
    assert not any(p in env for p in ('"N/A"', '" todo "', '"TBD"'))
