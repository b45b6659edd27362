"""dlperf.report: exact Markdown for hand-built results, determinism, files on disk."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf.adapters import get_adapter
from dlperf.assemble import summary_stats
from dlperf.report import render_chart, render_model_report, write_reports
from dlperf.report.markdown import GENERATED
from dlperf.schema import (
    BenchmarkSpec,
    Environment,
    MachineLoad,
    MetricRange,
    Metrics,
    ModelInfo,
    Repeat,
    RepeatStatus,
    Result,
    ResultStatus,
    SummaryStats,
    Telemetry,
    Window,
)
from dlperf.spec import with_practice
from dlperf.stats import RERUN_WITH_REPEATS, noise_warnings, summarize
from dlperf.store import ResultStore

FLOPS_PER_SAMPLE = 24.6e9  # ResNet50 training: ~3 x 8.2 GFLOPs forward per 224x224 image
H100 = "NVIDIA H100 80GB HBM3"
CPU = "AMD EPYC 7R13 Processor"
H100_PEAK = (67e12, "NVIDIA H100 SXM datasheet, FP32 (non-tensor)")
CPU_PEAK = (
    2.5e12,
    "measured fp32 GEMM (numpy, n=1024, best of repeated runs over 2 s, all BLAS threads)",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _stats(values: list[float]) -> SummaryStats:
    return summary_stats(values, "samples/s")


def make_result(
    framework: str,
    outcomes: list[float | tuple[str, str]],
    *,
    nodes: int = 1,
    devices_per_node: int = 1,
    device: str = "cuda",
    peak: tuple[float, str] | None = None,
    version: str = "2.3.1",
    created: str = "2024-06-01T12:00:00+00:00",
    practice: dict[str, str] | None = None,
    busy: float = 0.0,
) -> Result:
    """A Result as the runner would build it: a float is an ok repeat's samples/s, a
    (status, message) pair a failed repeat. The spec carries the framework's best practice,
    `practice` overriding some of it as `--set` does (an ablation)."""
    spec = with_practice(
        get_adapter(framework),
        BenchmarkSpec(
            framework=framework,
            model="resnet50",
            device=device,
            nodes=nodes,
            devices_per_node=devices_per_node,
            batch_size=128,
            image_size=224,
            repeats=len(outcomes),
            preset="dlperf",
            options=practice or {},
        ),
    )
    load = MachineLoad(
        cpu_count=48, wall_s=60.0, other_cpu_s=busy * 48 * 60, other_share=busy, load1_start=1.0
    )
    start = {"framework_version": version, "device_name": H100 if device == "cuda" else "cpu"}
    repeats, warnings = [], []
    for index, outcome in enumerate(outcomes, start=1):
        if isinstance(outcome, tuple):
            status, message = outcome
            repeats.append(
                Repeat(index=index, status=RepeatStatus(status), exit_code=1, message=message)
            )
            warnings.append(f"repeat {index} {status}: {message}")
            continue
        samples = float(spec.global_batch * spec.measure)
        window = Window(start_step=20, end_step=120, samples=samples, elapsed_s=samples / outcome)
        repeats.append(
            Repeat(
                index=index,
                status=RepeatStatus.ok,
                throughput=outcome,
                window=window,
                exit_code=0,
                workload=start,
                machine_load=load,
            )
        )
    ok = [r.throughput for r in repeats if r.status == RepeatStatus.ok]
    throughput = _stats(ok) if ok else None
    if ok:
        warnings += noise_warnings(summarize(ok), more_repeats=RERUN_WITH_REPEATS)  # as `run`
    if busy > 0.1:
        warnings.append(f"the machine was busy: other processes took up to {busy:.0%} of its CPUs")
    metrics = Metrics(throughput=throughput, noisy=busy > 0.1)
    if throughput and peak:
        achieved = FLOPS_PER_SAMPLE * throughput.median
        metrics = Metrics(
            throughput=throughput,
            achieved_flops=achieved,
            peak_flops=peak[0],
            peak_source=peak[1],
            mfu=achieved / peak[0],
            noisy=busy > 0.1,
        )
    failed = len(ok) < len(repeats)
    status = ResultStatus.ok if not failed else ResultStatus.partial if ok else ResultStatus.failed
    world = f"{nodes}x{devices_per_node}"
    tag = "".join(v for _, v in sorted((practice or {}).items()))
    return Result(
        id=f"20240601T120000Z-{framework[:2]}{world}{device}{tag}",
        created=created,
        status=status,
        spec=spec,
        repeats=repeats,
        metrics=metrics,
        model=ModelInfo(params=25_557_032, flops_per_sample=FLOPS_PER_SAMPLE if peak else None),
        environment=Environment(
            dlperf_version="0.1.0",
            host="gpu-node-01",
            os="Linux-5.15.0-105-generic-x86_64-with-glibc2.35",
            python="3.11.9",
            framework_version=version,
            cpu=CPU,
            cpu_count=48,
            gpu=H100,
            device_name=start["device_name"],
            threads=48 if device == "cpu" else None,
        ),
        warnings=warnings,
    )


def sample_results() -> list[Result]:
    return [
        make_result("pytorch", [1010.5, 1003.2, 1008.9], peak=H100_PEAK),
        make_result("pytorch", [1985.0, 1990.4, 1979.7], devices_per_node=2),
        # an ablation: channels_last off (`--set channels_last=0`) against the default
        make_result("pytorch", [702.0, 700.5, 703.1], practice={"channels_last": "0"}),
        make_result("pytorch", [31.2, 30.85, 31.47], device="cpu", peak=CPU_PEAK),
        # two simulated nodes on a busy host: more than linear, suspect
        make_result("pytorch", [80.1, 79.5, 80.4], device="cpu", nodes=2, busy=0.35),
        make_result(
            "tensorflow",
            [995.1, ("hung", "no output for 600 s after 57 of 120 steps; killed"), 990.3],
            version="2.16.1",
        ),
        make_result(
            "tensorflow",
            [("crashed", "exited with status 134 after 0 of 120 steps")] * 3,
            devices_per_node=2,
            version="2.16.1",
        ),
    ]


EXPECTED = """\
# resnet50: ResNet50-v1.5 image classification training (stride on the 3x3 conv), 1000 classes

Generated by `dlperf report` from results/; do not edit by hand.

Made from 7 results measured or imported 2024-06-01 12:00 (UTC) by dlperf 0.1.0.

Every number on this page is from one machine: **NVIDIA H100 80GB HBM3, AMD EPYC 7R13 Processor, 48 CPUs** (machine `1bf21ab1cc110ac4`; host gpu-node-01).

7 configurations (5 ok, 1 partial, 1 failed); frameworks: pytorch, tensorflow. Units: samples/s.

## How these numbers were measured

Each repeat is its own process. The throughput of a repeat is the samples processed in its measured window divided by the time between the window's first and last step mark; the window skips the first *skip* iterations (warm-up) and measures the next *measure* iterations, taken from the spec and listed per table row as `window`. The headline number is the median over the ok repeats (as DLPerf); the spread is the min–max and the coefficient of variation (CV = standard deviation / mean) over the same repeats. The 95% CI is the median's distribution-free confidence interval: the order statistics (x(k), x(n+1-k)) of the n ok repeats, k the largest rank whose binomial(n, 1/2) coverage is still at least 95%, so it never leaves the min–max (7 repeats: the min–max itself, coverage 98.4%); below 6 repeats no interval reaches 95% and it reads n/a. Speedup is the median divided by the median of the 1x1 (one node, one device) row of the same table, batch size per device and settings; scaling efficiency is the speedup divided by the number of devices (nodes x devices per node). MFU (model FLOP utilization) is the achieved model FLOP/s (FLOPs per sample x median samples/s) divided by the device's peak FLOP/s (a CPU's is measured only on an idle machine). A scaling efficiency above 105% is marked *suspect*: more than linear speedup means the 1x1 baseline or the run itself was disturbed.

A number belongs to one machine: its CPU model and count, its GPUs' model, count and memory (two identical hosts are one machine; the host names are listed under *Hardware*). Numbers from different machines never share a table, chart or median.

Every framework runs with its own best practice, named beside its numbers (for example PyTorch's `channels_last`, `fused_optimizer`) and switchable with `--set KEY=VALUE`; on a CPU every framework gets the same thread budget (`threads`). The cross-framework table shows each framework with its default settings; a run with other settings (an ablation) is a row of its framework's table (`settings`) and of the *Ablation* table, against the default. *busy* is the largest share of the machine's CPUs that other processes took while a repeat ran; `(noisy)` marks a median whose repeats disagree or ran on a busy machine (see *Warnings*).

Peak FLOP/s sources (marked on each MFU value):

[^1]: NVIDIA H100 SXM datasheet, FP32 (non-tensor)
[^2]: measured fp32 GEMM (numpy, n=1024, best of repeated runs over 2 s, all BLAS threads)

## Hardware

| machine | id | hosts | os | frameworks |
|---|---|---|---|---|
| NVIDIA H100 80GB HBM3, AMD EPYC 7R13 Processor, 48 CPUs | `1bf21ab1cc110ac4` | gpu-node-01 | Linux-5.15.0-105-generic-x86_64-with-glibc2.35 | pytorch, tensorflow |

Framework versions: pytorch 2.3.1 (Python 3.11.9), pytorch 2.3.1 (Python 3.11.9, 48 CPU threads), tensorflow 2.16.1 (Python 3.11.9).

## Cross-framework

Median samples/s per configuration and framework, each framework with its default best practice (its settings: per-framework sections); `(k/n ok)` marks a partial result (statistics over the ok repeats only), — a configuration not run. `ootb` is dlperf's own workload, `official` the framework's official upstream script (which upstream and commit: per-framework sections and *Implementations* below). Results with other settings are in *Ablation*.

| mode | precision | device | batch/device | shape | nodes x devices | impl | pytorch | tensorflow |
|---|---|---|---|---|---|---|---|---|
| train | fp32 | cpu | 128 | image 224 | 1x1 | ootb | 31.20 | — |
| train | fp32 | cpu | 128 | image 224 | 2x1 | ootb | 80.10 (noisy) | — |
| train | fp32 | cuda | 128 | image 224 | 1x1 | ootb | 1008.90 | 992.70 (2/3 ok) |
| train | fp32 | cuda | 128 | image 224 | 1x2 | ootb | 1985.00 | failed (crashed) |

![resnet50 throughput](resnet50.png)

## Scaling

Speedup vs devices per framework, with the ideal line:

![resnet50 scaling](resnet50-scaling.png)

## Ablation

The same benchmark on this machine with other settings: each variant against the baseline (the framework's default best practice where it ran, else the newest settings), medians of the ok repeats in samples/s. The verdict is `dlperf compare`'s: a change beyond 5% that is significant (exact Mann-Whitney U, or the means' 95% t-intervals not overlapping for three repeats or fewer) is an improvement or a regression.

| benchmark | baseline settings | variant settings | differs | baseline median | variant median | change | verdict | test |
|---|---|---|---|---|---|---|---|---|
| `pytorch-resnet50-train-fp32-cuda-1x1-b128-i224` | channels_last=1, cudnn_benchmark=1, fused_optimizer=1 | channels_last=0, cudnn_benchmark=1, fused_optimizer=1 | channels_last 1 -> 0 | 1008.90 | 702.00 | -30.4% | regression | 95% CI overlap |

## pytorch

### train · fp32 · cpu · image 224 · ootb

| nodes | devices/node | batch/device | settings | median samples/s | speedup | scaling efficiency | min–max | 95% CI | CV | repeats ok | MFU | busy | window |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
| 1 | 1 | 128 | channels_last=1, fused_optimizer=1 | 31.20 | 1.00 | 100.0% | 30.85–31.47 | n/a (3 < 6 repeats) | 1.0% | 3/3 | 30.70%[^2] | 0% | skip 20, measure 100 |
| 2 | 1 | 128 | channels_last=1, fused_optimizer=1 | 80.10 (noisy) | 2.57 | 128.4% (suspect) | 79.50–80.40 | n/a (3 < 6 repeats) | 0.6% | 3/3 | — | 35% | skip 20, measure 100 |

### train · fp32 · cuda · image 224 · ootb

| nodes | devices/node | batch/device | settings | median samples/s | speedup | scaling efficiency | min–max | 95% CI | CV | repeats ok | MFU | busy | window |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
| 1 | 1 | 128 | channels_last=0, cudnn_benchmark=1, fused_optimizer=1 | 702.00 | 1.00 | 100.0% | 700.50–703.10 | n/a (3 < 6 repeats) | 0.2% | 3/3 | — | 0% | skip 20, measure 100 |
| 1 | 1 | 128 | channels_last=1, cudnn_benchmark=1, fused_optimizer=1 (default) | 1008.90 | 1.00 | 100.0% | 1003.20–1010.50 | n/a (3 < 6 repeats) | 0.4% | 3/3 | 37.04%[^1] | 0% | skip 20, measure 100 |
| 1 | 2 | 128 | channels_last=1, cudnn_benchmark=1, fused_optimizer=1 | 1985.00 | 1.97 | 98.4% | 1979.70–1990.40 | n/a (3 < 6 repeats) | 0.3% | 3/3 | — | 0% | skip 20, measure 100 |

## tensorflow

### train · fp32 · cuda · image 224 · ootb

| nodes | devices/node | batch/device | settings | median samples/s | speedup | scaling efficiency | min–max | 95% CI | CV | repeats ok | MFU | busy | window |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
| 1 | 1 | 128 | data_format=channels_first, gpu_thread_mode=gpu_private | 992.70 | 1.00 | 100.0% | 990.30–995.10 | n/a (2 < 6 repeats) | 0.3% | 2/3 | — | 0% | skip 20, measure 100 |
| 1 | 2 | 128 | data_format=channels_first, gpu_thread_mode=gpu_private | failed (crashed) | — | — | — | — | — | 0/3 | — | — | skip 20, measure 100 |

- 1x1, batch 128: partial; repeat 2 hung: no output for 600 s after 57 of 120 steps; killed
- 1x2, batch 128: failed; repeat 1 crashed: exited with status 134 after 0 of 120 steps

## All results

Every repeat's samples/s in repeat order (a failed repeat shows its status). The configuration is the benchmark id (its folder under results/) with its settings in brackets, the result id the file in it.

| configuration | result | origin | status | samples/s per repeat |
|---|---|---|---|---|
| `pytorch-resnet50-train-fp32-cpu-1x1-b128-i224 [channels_last=1, fused_optimizer=1]` | 20240601T120000Z-py1x1cpu | run | ok | 31.20, 30.85, 31.47 |
| `pytorch-resnet50-train-fp32-cpu-2x1-b128-i224 [channels_last=1, fused_optimizer=1]` | 20240601T120000Z-py2x1cpu | run | ok | 80.10, 79.50, 80.40 |
| `pytorch-resnet50-train-fp32-cuda-1x1-b128-i224 [channels_last=0, cudnn_benchmark=1, fused_optimizer=1]` | 20240601T120000Z-py1x1cuda0 | run | ok | 702.00, 700.50, 703.10 |
| `pytorch-resnet50-train-fp32-cuda-1x1-b128-i224 [channels_last=1, cudnn_benchmark=1, fused_optimizer=1]` | 20240601T120000Z-py1x1cuda | run | ok | 1010.50, 1003.20, 1008.90 |
| `pytorch-resnet50-train-fp32-cuda-1x2-b128-i224 [channels_last=1, cudnn_benchmark=1, fused_optimizer=1]` | 20240601T120000Z-py1x2cuda | run | ok | 1985.00, 1990.40, 1979.70 |
| `tensorflow-resnet50-train-fp32-cuda-1x1-b128-i224 [data_format=channels_first, gpu_thread_mode=gpu_private]` | 20240601T120000Z-te1x1cuda | run | partial | 995.10, hung, 990.30 |
| `tensorflow-resnet50-train-fp32-cuda-1x2-b128-i224 [data_format=channels_first, gpu_thread_mode=gpu_private]` | 20240601T120000Z-te1x2cuda | run | failed | crashed, crashed, crashed |

### Warnings

- the machine was busy: other processes took up to 35% of its CPUs — `pytorch-resnet50-train-fp32-cpu-2x1-b128-i224 [channels_last=1, fused_optimizer=1]`
- repeat 2 hung: no output for 600 s after 57 of 120 steps; killed — `tensorflow-resnet50-train-fp32-cuda-1x1-b128-i224 [data_format=channels_first, gpu_thread_mode=gpu_private]`
- only 2 repeat(s) of throughput: too few to judge stability; use --repeats 7 — `tensorflow-resnet50-train-fp32-cuda-1x1-b128-i224 [data_format=channels_first, gpu_thread_mode=gpu_private]`
- repeat 1–3 crashed: exited with status 134 after 0 of 120 steps — `tensorflow-resnet50-train-fp32-cuda-1x2-b128-i224 [data_format=channels_first, gpu_thread_mode=gpu_private]`
"""  # noqa: E501


def test_render_model_report_exact() -> None:
    assert render_model_report(sample_results(), "resnet50") == EXPECTED


def test_three_configurations_sharing_a_warning_kind_get_one_line() -> None:
    """Issue 24: warnings grouped, one line per kind naming the configurations it applies to;
    a number that differs is shown as its range."""
    busy = [
        make_result("pytorch", [31.2, 30.9, 31.4], device="cpu", busy=0.5),
        make_result("pytorch", [80.1, 79.5, 80.4], device="cpu", nodes=2, busy=0.35),
        make_result("tensorflow", [30.1, 30.5, 30.4], device="cpu", busy=0.5, version="2.16.1"),
    ]
    report = render_model_report(busy, "resnet50")
    warnings = report.split("### Warnings\n\n", 1)[1].strip().splitlines()
    assert warnings == [
        "- the machine was busy: other processes took up to 35–50% of its CPUs — "
        "`pytorch-resnet50-train-fp32-cpu-1x1-b128-i224 [channels_last=1, fused_optimizer=1]`, "
        "`pytorch-resnet50-train-fp32-cpu-2x1-b128-i224 [channels_last=1, fused_optimizer=1]`, "
        "`tensorflow-resnet50-train-fp32-cpu-1x1-b128-i224 [data_format=channels_last]`"
    ]


def test_render_is_deterministic_under_shuffling() -> None:
    results = sample_results()
    expected = render_model_report(results, "resnet50")
    for seed in range(5):
        shuffled = list(results)
        random.Random(seed).shuffle(shuffled)
        assert render_model_report(shuffled, "resnet50") == expected


def test_newest_result_per_config_wins_and_other_models_are_ignored() -> None:
    older = make_result("pytorch", [5.0, 5.0, 5.0], created="2024-05-01T00:00:00+00:00")
    other = make_result("pytorch", [7.0, 7.0, 7.0]).model_copy(
        update={"spec": BenchmarkSpec(framework="pytorch", model="bert", batch_size=32)}
    )
    text = render_model_report([older, *sample_results(), other], "resnet50")
    assert text == EXPECTED


def test_smoke_results_are_flagged() -> None:
    result = make_result("pytorch", [12.0, 12.5, 11.8], device="cpu")
    smoke = result.model_copy(update={"spec": result.spec.model_copy(update={"preset": "smoke"})})
    small = result.model_copy(update={"spec": result.spec.model_copy(update={"image_size": 64})})
    note = (
        "> **Note:** smoke shapes: tiny images/sequences and few steps; these numbers show the "
        "pipeline works, they are not comparable to published full-size results."
    )
    assert note in render_model_report([smoke], "resnet50")
    assert note in render_model_report([small], "resnet50")
    assert note not in render_model_report([result], "resnet50")


def test_report_shows_the_medians_interval_or_why_not() -> None:
    # 7 ok repeats: the interval is (x(1), x(7)), the min-max (coverage 98.4 %); 5: none
    seven = make_result("pytorch", [30.0, 31.5, 29.0, 32.0, 30.5, 31.0, 28.5], device="cpu")
    five = make_result("pytorch", [30.0, 31.5, 29.0, 32.0, 30.5], device="cpu", nodes=2)
    text = render_model_report([seven, five], "resnet50")
    assert "| 28.50–32.00 | 28.50–32.00 | " in text
    assert "| 29.00–32.00 | n/a (5 < 6 repeats) | " in text
    assert "None |" not in text and "| None" not in text  # ("Warnings: None." is prose)


def test_no_results_and_unknown_model() -> None:
    text = render_model_report(sample_results(), "mystery")
    assert text.startswith("# mystery: mystery\n")
    assert "No results for this model yet." in text


def test_long_messages_are_one_truncated_line() -> None:
    message = "Traceback:\n" + "x" * 300
    result = make_result("pytorch", [("crashed", message)] * 3)
    note = next(
        line
        for line in render_model_report([result], "resnet50").splitlines()
        if line.startswith("- 1x1, batch 128: failed")
    )
    assert "\n" not in note and note.endswith("…")
    assert len(note.split(": ", 2)[-1]) <= 120


def test_write_reports(tmp_path: Path) -> None:
    results_dir, reports_dir = tmp_path / "results", tmp_path / "reports"
    for result in sample_results():
        ResultStore(results_dir).write(result)
    written = write_reports(results_dir, reports_dir)
    assert written == [
        reports_dir / "resnet50.md",
        reports_dir / "resnet50.png",
        reports_dir / "resnet50-scaling.png",  # pytorch cuda has 1x1 and 1x2
        reports_dir / "README.md",
    ]
    assert (reports_dir / "resnet50.md").read_text() == EXPECTED
    assert (reports_dir / "resnet50.png").read_bytes().startswith(PNG_MAGIC)
    assert (reports_dir / "resnet50-scaling.png").read_bytes().startswith(PNG_MAGIC)
    index = (reports_dir / "README.md").read_text()
    assert "Generated by `dlperf report` from results/; do not edit by hand." in index
    assert "| [resnet50](resnet50.md) | ResNet50-v1.5" in index
    # one machine, 4 cross-framework rows; 7 results, each once ok, partial or failed.
    assert "| pytorch, tensorflow | 1 | 4 | 7 | 5 | 1 | 1 |" in index

    png = (reports_dir / "resnet50.png").read_bytes()
    write_reports(results_dir, reports_dir)  # same results, same bytes
    assert (reports_dir / "resnet50.png").read_bytes() == png
    assert (reports_dir / "resnet50.md").read_text() == EXPECTED


def test_scaling_series_is_speedup_per_device_count() -> None:
    from dlperf.report._data import scaling_series

    series = scaling_series(sample_results(), "resnet50")
    # PyTorch has two topologies on CUDA (TensorFlow's 1x2 failed) and on the CPU; its
    # channels_last=0 ablation ran at 1x1 only, so the one CUDA line needs no settings label.
    cuda = "pytorch cuda fp32 b128"
    assert sorted(series) == ["pytorch cpu fp32 b128", cuda]
    points = series[cuda]
    assert points[0] == (1, 1.0) and points[1][0] == 2
    assert points[1][1] == pytest.approx(1985.0 / 1008.9)
    assert series["pytorch cpu fp32 b128"][1] == (2, pytest.approx(80.1 / 31.2))


def test_pages_of_models_without_results_are_removed(tmp_path: Path) -> None:
    results_dir, reports_dir = tmp_path / "results", tmp_path / "reports"
    for result in sample_results():
        ResultStore(results_dir).write(result)
    reports_dir.mkdir()
    (reports_dir / "bert.md").write_text("# bert\n\n" + GENERATED + "\n")  # an old page
    (reports_dir / "bert.png").write_bytes(PNG_MAGIC)
    (reports_dir / "notes.md").write_text("# my own notes\n")  # not ours: kept
    write_reports(results_dir, reports_dir)
    assert not (reports_dir / "bert.md").exists() and not (reports_dir / "bert.png").exists()
    assert (reports_dir / "notes.md").exists() and (reports_dir / "resnet50.md").exists()


def test_write_reports_without_results(tmp_path: Path) -> None:
    written = write_reports(tmp_path / "results", tmp_path / "reports")
    assert written == [tmp_path / "reports" / "README.md"]
    assert "No results yet" in written[0].read_text()


def test_render_chart_png(tmp_path: Path) -> None:
    path = tmp_path / "charts" / "resnet50.png"
    render_chart(sample_results(), "resnet50", path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert b"Software" not in data and b"matplotlib" not in data.lower()
    empty = tmp_path / "empty.png"
    render_chart([], "resnet50", empty)
    assert empty.read_bytes().startswith(PNG_MAGIC)


def test_importing_report_does_not_import_matplotlib() -> None:
    code = "import sys, dlperf.report; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_a_mixed_train_inference_and_loadgen_report_reads_right(
    fixtures: Path, tmp_path: Path
) -> None:
    """One model trained, served without LoadGen and served under three LoadGen scenarios (real
    submitters' logs): each kind of run is its own row and table, a LoadGen row shows its
    scenario's metric with its unit and validity, no single-topology table carries a speedup,
    and no `None` reaches the page."""
    from dlperf.importers.loadgen import import_dirs

    train = make_result("pytorch", [100.0, 101.0, 99.0], device="cpu")
    infer = make_result("pytorch", [300.0, 310.0, 290.0], device="cpu")
    infer = infer.model_copy(
        update={
            "id": "20240601T120000Z-infer",
            "spec": infer.spec.model_copy(update={"mode": "infer"}),
            "metrics": infer.metrics.model_copy(update={"latency_ms": {"p50": 12.5, "p99": 19.25}}),
        }
    )
    folders = [
        fixtures / "mlperf_loadgen" / "offline_valid",
        fixtures / "mlperf_real" / "v30-krai-firefly-tflite-resnet50-singlestream",
        fixtures / "mlperf_real" / "v30-nvidia-dgxa100x8-resnet50-server-test04b-invalid",
    ]
    served = [
        result
        for folder in folders
        for result, _ in import_dirs([folder], framework="pytorch", model="resnet50",
                                     batch_size=128, device="cpu", results_dir=tmp_path)
    ]  # fmt: skip
    page = render_model_report([train, infer, *served], "resnet50")
    assert "None" not in page
    # LoadGen's logs say nothing of the machine: their numbers are another machine's section
    assert "\n## unknown machine (no hardware recorded)\n" in page
    assert "\n## NVIDIA H100 80GB HBM3, AMD EPYC 7R13 Processor, 48 CPUs (machine " in page
    tables = [part.split("![")[0] for part in page.split("### Cross-framework")[1:]]
    assert len(tables) == 2
    cross = "".join(tables)
    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for table in tables
        for line in [line for line in table.splitlines() if line.startswith("| ")][1:]
    }
    assert set(rows) == {
        "train",
        "infer",
        "infer · LoadGen offline (min_duration_s=1, min_query_count=1, target_qps=400000)",
        "infer · LoadGen singlestream (min_duration_s=600, min_query_count=1024, "
        "target_qps=8.92857)",
        "infer · LoadGen server (min_duration_s=600, min_query_count=270336, "
        "target_latency_ms=15, target_qps=260000)",
    }
    assert "| 100.00 |" in rows["train"] and "| 300.00 |" in rows["infer"]
    assert "| 307629.00 samples/s, VALID |" in cross
    assert "| 125.06 ms early-stopping p90, VALID |" in cross
    assert "INVALID (1/1)" in rows[next(r for r in rows if "server" in r)]
    assert "| speedup |" not in page and "## Scaling" not in page  # one topology each
    sections = page.split("### ")
    plain = next(s for s in sections if s.startswith("infer · fp32"))
    assert "latency p50 / p99 (ms, interpolated)" in plain and "| 12.5 / 19.2 |" in plain
    loadgen = next(s for s in sections if s.startswith("infer · LoadGen server"))
    assert "LoadGen metric" in loadgen and "LoadGen judged the run INVALID" in loadgen
    assert "LoadGen metrics in their own units" in page
    # The detail log's completed rate (rounded there), the summary's headline as printed.
    assert "completed 156469.00 samples/s; scheduled 282536.09 samples/s" in loadgen
    single = next(s for s in sections if s.startswith("infer · LoadGen singlestream"))
    assert "early-stopping p90 125.06 ms; early-stopping p99 147.08 ms" in single


def test_pages_name_the_results_git_commit(tmp_path: Path) -> None:
    """A team that commits its results gets the commit on every page; a folder git does not
    track gets none (the same results give the same page either way)."""
    results_dir, reports_dir = tmp_path / "results", tmp_path / "reports"
    for result in sample_results():
        ResultStore(results_dir).write(result)
    write_reports(results_dir, reports_dir)
    assert "git commit" not in (reports_dir / "resnet50.md").read_text()

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True,
                              text=True, check=True)  # fmt: skip
        return done.stdout.strip()

    git("init", "-q")
    git("add", "results")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results")
    write_reports(results_dir, reports_dir)
    commit = git("log", "-1", "--format=%h")
    assert (
        f"the results folder is at git commit {commit}."
        in (reports_dir / "resnet50.md").read_text()
    )


def test_official_numbers_of_two_profiles_never_share_a_row() -> None:
    from dlperf.schema import SourceInfo

    def official(profile: str, value: float, commit: str) -> Result:
        r = make_result("pytorch", [value, value, value])
        spec = r.spec.model_copy(update={"impl": "official", "source": f"pt-{profile}"})
        source = SourceInfo(name="pytorch-examples", url="https://github.com/pytorch/examples",
                            commit=commit * 40, profile=profile)  # fmt: skip
        return r.model_copy(update={"spec": spec, "source": source, "id": f"{r.id}-{profile}"})

    old, new = official("dlperf-2020", 900.0, "a"), official("current", 2900.0, "b")
    text = render_model_report([old, new], "resnet50")
    (table,) = [part for part in text.split("\n\n") if part.startswith("| mode ")]
    rows = [line for line in table.splitlines() if "official" in line]
    assert len(rows) == 2  # one row per profile, never the two in one cell
    assert any("official (current)" in r and "| 2900.00" in r and "| 900.00" not in r for r in rows)
    assert any("official (dlperf-2020)" in r and "| 900.00" in r for r in rows)
    assert "| pytorch | current | pt-current | `https://github.com/pytorch/examples` @ " in text
    assert "| pytorch | dlperf-2020 | pt-dlperf-2020 |" in text


def with_telemetry(result: Result, energy_j: float | None, throttled: bool = False) -> Result:
    """`result` as if its ok repeats had been sampled: a GPU's NVML readings, or a CPU's
    without RAPL."""
    cuda = result.spec.device == "cuda"
    repeats = []
    for r in result.repeats:
        if r.status == RepeatStatus.ok:
            r = r.model_copy(
                update={
                    "telemetry": Telemetry(
                        device=result.spec.device,
                        period_s=0.2,
                        samples=40,
                        utilization_pct=MetricRange(min=90.0, mean=96.5, max=100.0),
                        clock_mhz=MetricRange(
                            min=1500.0 if throttled else 1980.0, mean=1900.0, max=1980.0
                        )
                        if cuda
                        else MetricRange(min=2600.0, mean=2600.0, max=2600.0),
                        power_w=MetricRange(min=650.0, mean=690.0, max=700.0) if cuda else None,
                        energy_j=energy_j,
                        energy_source="nvml" if energy_j else None,
                        energy_method="counter" if energy_j else None,
                        energy_note=None
                        if energy_j
                        else "RAPL not readable: /sys/class/powercap does not exist",
                        throttled=throttled,
                        throttle_reasons=["SwPowerCap"] if throttled else [],
                    )
                }
            )
        repeats.append(r)
    per_joule = None
    if energy_j:
        per_joule = repeats[0].window.samples / energy_j
    metrics = result.metrics.model_copy(update={"samples_per_joule": per_joule})
    return result.model_copy(update={"repeats": repeats, "metrics": metrics})


EXPECTED_TELEMETRY = """\
## Telemetry

The devices during the measured windows, sampled by the host every 0.2 s (GPUs through NVML, CPUs through psutil and RAPL): mean utilization and power, the clock's min–max (SM clock, or CPU frequency), and the median energy of a window (with its source) over the ok repeats; samples/J is the window's samples per joule. *throttled* counts the windows whose clocks were pulled down by heat or power. `(repeat)`: a window that could not be placed in time, so the numbers cover the whole repeat.

| configuration | device | utilization % | clock MHz | power W | energy J | samples/J | throttled |
|---|---|---|---|---|---|---|---|
| `pytorch-resnet50-train-fp32-cpu-1x1-b128-i224 [channels_last=1, fused_optimizer=1]` | cpu | 96.5 | 2600 | — | not readable (1) | — | no |
| `pytorch-resnet50-train-fp32-cuda-1x1-b128-i224 [channels_last=1, cudnn_benchmark=1, fused_optimizer=1]` | cuda | 96.5 | 1980 | 690 | 8800 (nvml, counter) | 1.455 | no |
| `tensorflow-resnet50-train-fp32-cuda-1x1-b128-i224 [data_format=channels_first, gpu_thread_mode=gpu_private]` | cuda | 96.5 | 1500–1980 | 690 | 9100 (nvml, counter) | 1.407 | yes, 2/2 (SwPowerCap) |

Why the energy was not readable:

1. RAPL not readable: /sys/class/powercap does not exist
"""  # noqa: E501


def test_the_telemetry_table_and_samples_per_joule() -> None:
    results = sample_results()
    sampled = {
        "20240601T120000Z-py1x1cuda": (8800.0, False),
        "20240601T120000Z-te1x1cuda": (9100.0, True),
        "20240601T120000Z-py1x1cpu": (None, False),
    }
    results = [with_telemetry(r, *sampled[r.id]) if r.id in sampled else r for r in results]
    text = render_model_report(results, "resnet50")
    section = text[text.index("## Telemetry") : text.index("## All results")]
    assert section == EXPECTED_TELEMETRY + "\n"
    # samples/J beside the median, in the tables of configurations that have it
    cuda = "channels_last=1, cudnn_benchmark=1, fused_optimizer=1 (default)"
    assert f"| 1 | 1 | 128 | {cuda} | 1008.90 | 1.455 | 1.00 | 100.0% | 1003.20–1010.50 |" in text
    cpu = "channels_last=1, fused_optimizer=1"
    assert f"| 1 | 1 | 128 | {cpu} | 31.20 | 1.00 |" in text  # no energy there: no column
    # results without telemetry (older files) give the report it had before
    assert render_model_report(sample_results(), "resnet50") == EXPECTED


# ---------------------------------------------------------------- issue 32, points 12 and 13


def published_reference() -> Result:
    """A published MLPerf Training result as `dlperf parse mlperf-training` imports it: another
    system's, scored in minutes by MLPerf's rules."""
    from dlperf.published import SUITE

    run = make_result("pytorch", [1000.0, 1001.0, 999.0])
    options = {"suite": SUITE, "submitter": "NVIDIA", "round": "v4.0"}
    spec = run.spec.model_copy(update={"options": options, "practice": {}})
    metrics = run.metrics.model_copy(update={"score": 12.5, "score_unit": "minutes"})
    return run.model_copy(
        update={"id": "published-1", "origin": "parse", "spec": spec, "metrics": metrics}
    )


def test_fambench_style_keeps_published_references_out_of_dlperfs_rows(tmp_path: Path) -> None:
    from dlperf.published import is_published_reference
    from dlperf.report.writer import FAMBENCH_SUMMARY_FILE, write_fambench_report

    results_dir, reports_dir = tmp_path / "results", tmp_path / "reports"
    reference = published_reference()
    assert is_published_reference(reference)
    ResultStore(results_dir).write(make_result("pytorch", [31.2, 30.9, 31.4], device="cpu"))
    stored = ResultStore(results_dir).write(reference)
    (md, summary), table = write_fambench_report(results_dir, reports_dir)
    rows = [line for line in md.read_text().splitlines() if line.startswith("| resnet50 ")]
    assert len(rows) == 1 and "ex/s" in rows[0] and "| minutes |" not in table
    assert "1 published MLPerf Training result(s), imported with `dlperf parse " in table
    assert "are left out: each is another system's time to train" in md.read_text()
    assert "minutes" not in summary.read_text() and summary.name == FAMBENCH_SUMMARY_FILE
    stored.unlink()
    (md, _), table = write_fambench_report(results_dir, reports_dir)
    assert "left out" not in table  # nothing to say without one


def test_a_warnings_commands_stay_code_spans_and_other_text_stays_text() -> None:
    result = make_result("pytorch", [31.2, 30.9, 31.4], device="cpu")
    said = [
        "MFU may be low; rerun when the machine is idle (`dlperf doctor` shows what runs)",
        "a lone ` backtick and *stars*",
        "a span a code span cannot hold: `a\\b`",
    ]
    report = render_model_report([result.model_copy(update={"warnings": said})], "resnet50")
    warnings = report.split("### Warnings\n\n", 1)[1]
    assert (
        "rerun when the machine is idle (`dlperf doctor` shows what runs) — `pytorch-" in warnings
    )
    assert "\\`dlperf doctor\\`" not in report
    # An unpaired backtick and emphasis stay text; a span a code span cannot hold is text.
    assert "- a lone \\` backtick and \\*stars\\* — `pytorch-" in warnings
    assert "- a span a code span cannot hold: a\\\\b — `pytorch-" in warnings


def test_report_writes_to_out_and_keeps_its_older_spelling(cli, tmp_path: Path) -> None:
    """`--out` names where every command writes (report, publish, export, compare); report's
    `--reports-dir` still works, hidden from its help."""
    ResultStore(tmp_path / "results").write(make_result("pytorch", [31.2], device="cpu"))
    code, text = cli("report", "--out", "new")
    assert code == 0, text
    assert (tmp_path / "new" / "resnet50.md").exists()
    code, text = cli("report", "--reports-dir", "old")
    assert code == 0, text
    assert (tmp_path / "old" / "resnet50.md").read_text() == (
        tmp_path / "new" / "resnet50.md"
    ).read_text()
    code, text = cli("report", "--out", "same", "--reports-dir", "same")
    assert code == 0 and (tmp_path / "same" / "README.md").exists(), text
    code, text = cli("report", "--help")
    assert code == 0 and "--out" in text and "--reports-dir" not in text, text
    assert not (tmp_path / "reports").exists()
