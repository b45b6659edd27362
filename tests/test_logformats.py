"""Log adapters: real logs (../shared/fixtures) and lines shaped exactly like upstream's
format strings (file:line cited per test), including truncated, corrupt and failed runs."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from dlperf.logformats import FORMATS, LogContext, parse_log
from dlperf.stats import TooFewSteps, window_throughput

TF2 = "dlperf/tf2_resnet50"
DLPERF_PUBLISHED = {"1n1g": 321.8, "1n2g": 574.66, "1n4g": 1143.46, "1n8g": 2458.74}


def test_every_manifest_format_has_a_parser() -> None:
    from dlperf.official.manifest import load_manifests

    used = {m.log_format for m in load_manifests().values()}
    assert used <= set(FORMATS), used - set(FORMATS)


# ----------------------------------------------------------------- Keras TimeHistory (real logs)


@pytest.mark.parametrize("config", sorted(DLPERF_PUBLISHED))
def test_keras_time_history_reproduces_dlperf(fixtures: Path, config: str) -> None:
    devices = int(config[2:-1])
    values = []
    for log in sorted((fixtures / TF2 / config).glob("*.log")):
        run = parse_log("keras_time_history", log.read_text(), LogContext(128, devices))
        assert run.failure is None and run.malformed == 0
        assert [m.step for m in run.marks] == [0, 100, 200, 300, 400, 500, 600]
        w = window_throughput(run.marks, 100, 500)
        assert (w.start_step, w.end_step, w.samples) == (100, 600, 500 * 128 * devices)
        values.append(w.throughput)
    assert len(values) == 5
    assert statistics.median(values) == pytest.approx(DLPERF_PUBLISHED[config], rel=0.001)


def test_keras_truncated_log_keeps_what_it_has(fixtures: Path) -> None:
    text = (fixtures / TF2 / "1n1g" / "rn50_b128_fp32_1.log").read_text()
    cut = text[: text.index("between steps 300 and 400")]  # dies mid-line
    run = parse_log("keras_time_history", cut, LogContext(128))
    assert [m.step for m in run.marks] == [0, 100, 200, 300]
    with pytest.raises(TooFewSteps, match="marks up to step 300"):
        window_throughput(run.marks, 100, 500)


def test_keras_corrupt_and_missing_lines(fixtures: Path) -> None:
    text = (fixtures / TF2 / "1n1g" / "rn50_b128_fp32_1.log").read_text()
    corrupt = text.replace("327.08 examples/second", "nan examples/second").replace(
        "39.13 seconds", "x seconds"
    )
    run = parse_log("keras_time_history", corrupt, LogContext(128))
    assert run.malformed == 1 and [m.step for m in run.marks] == [0, 100]
    assert any("no throughput line covers steps 100..200" in n for n in run.notes)


# ----------------------------------------------------------------- failures in logs


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
        ("tensorflow...errors_impl.ResourceExhaustedError: OOM when", "out of memory"),
        ("INFO:root:[step 30]\tmlm_loss=nan\tnsp_loss= 0.69", "the loss became NaN"),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom",
         "an uncaught Python exception (ValueError: boom)"),
    ],
)  # fmt: skip
def test_failures_are_detected(line: str, what: str) -> None:
    run = parse_log("keras_time_history", f"some output\n{line}\nmore\n", LogContext(128))
    assert run.failure.startswith(what)


def test_a_clean_log_has_no_failure(fixtures: Path) -> None:
    text = (fixtures / TF2 / "1n8g" / "rn50_b128_fp32_1.log").read_text()
    assert parse_log("keras_time_history", text, LogContext(128)).failure is None


# ----------------------------------------------------------------- pytorch/examples
# imagenet/main.py @49ec0bd: AverageMeter '{name} {val:6.3f} ({avg:6.3f})' (:383), batch part
# '[{:Nd}/N]' (:398-401), meters joined by tabs (:394-396), printed by every rank.

PYEX = (
    "Epoch: [{e}][{i:4d}/5005]\tTime {v:6.3f} ({a:6.3f})\tData  0.100 ( 0.090)\t"
    "Loss 6.9828e+00 (6.9828e+00)\tAcc@1   0.78 (  0.78)\tAcc@5   1.56 (  1.56)"
)


def pyex_log(times: list[float], ranks: int = 1, epoch: int = 0) -> str:
    lines, total = [], [0.0] * ranks
    for i, t in enumerate(times):
        for r in range(ranks):
            step = t * (1 + 0.1 * r)  # rank r is 10 % slower
            total[r] += step
            lines.append(PYEX.format(e=epoch, i=i, v=step, a=total[r] / (i + 1)))
    return "Use GPU: 0 for training\n=> creating model 'resnet50'\n" + "\n".join(lines) + "\n"


def test_pytorch_examples_single_rank_sums_batch_times() -> None:
    times = [5.0] + [0.25] * 59  # a slow first batch, then 0.25 s per batch
    run = parse_log("pytorch_examples", pyex_log(times), LogContext(128))
    w = window_throughput(run.marks, 20, 40)
    assert w.throughput == pytest.approx(128 / 0.25, rel=1e-6)
    assert run.failure is None and not run.notes


def test_pytorch_examples_ranks_keep_the_slowest() -> None:
    times = [0.5] * 60
    run = parse_log("pytorch_examples", pyex_log(times, ranks=2), LogContext(64, 2))
    w = window_throughput(run.marks, 20, 40)
    # The slower rank (0.55 s per batch) paces the job's global batch of 128.
    assert w.throughput == pytest.approx(128 / 0.55, rel=0.003)
    assert any("running averages" in n for n in run.notes)


def test_pytorch_examples_later_epochs_and_validation_are_ignored() -> None:
    text = (
        pyex_log([0.2] * 30) + "Test: [ 0/196]\tTime  1.000 ( 1.000)\n" + pyex_log([9.0] * 5, 1, 1)
    )
    run = parse_log("pytorch_examples", text, LogContext(32))
    assert run.marks[-1].step == 30
    assert any("only epoch 0" in n for n in run.notes)


# ----------------------------------------------------------------- gluon-nlp BERT
# scripts/bert/pretraining_utils.py @7b7bf60:274-276 (log_noacc), every Horovod rank.

NLP = ("INFO:root:[step {s}]\tmlm_loss={l:7.5f}\tnsp_loss= 0.69\tthroughput=2.8K tks/s\t"
       "lr=0.0000250 time={t:.2f}, latency={ms:.1f} ms/batch")  # fmt: skip


def test_gluonnlp_every_rank_prints_each_step() -> None:
    lines = []
    for step in range(1, 201):
        for rank_ms in (200.0, 210.0):  # two ranks; the slower one paces the step
            lines.append(NLP.format(s=step, l=7.1, t=rank_ms / 1000, ms=rank_ms))
    run = parse_log("gluonnlp", "\n".join(lines) + "\nINFO:root:Train cost=42.0s\n",
                    LogContext(32, 2))  # fmt: skip
    w = window_throughput(run.marks, 100, 100)
    assert w.throughput == pytest.approx(64 / 0.210, rel=1e-6)
    assert run.losses[0] == pytest.approx(7.1)
    # Whichever rank prints first, the slower one paces the step.
    lines = [NLP.format(s=st, l=7.1, t=ms / 1000, ms=ms) for st in range(1, 201)
             for ms in (210.0, 200.0)]  # fmt: skip
    run = parse_log("gluonnlp", "\n".join(lines), LogContext(32, 2))
    assert window_throughput(run.marks, 100, 100).throughput == pytest.approx(64 / 0.210)


def test_gluonnlp_interval_and_nan_loss() -> None:
    text = "\n".join(NLP.format(s=s, l=7.0, t=1.0, ms=100.0) for s in range(10, 110, 10))
    run = parse_log("gluonnlp", text, LogContext(8))
    assert [m.step for m in run.marks][:3] == [0, 10, 20]
    assert window_throughput(run.marks, 20, 50).throughput == pytest.approx(80.0)
    bad = text + "\n" + NLP.format(s=110, l=float("nan"), t=1.0, ms=100.0)
    assert parse_log("gluonnlp", bad, LogContext(8)).failure.startswith("the loss became NaN")


# ----------------------------------------------------------------- MXNet Speed lines
# gluon-cv train_horovod.py @f9a8a28:495-497 'Epoch[%d] Batch[%d]\tSpeed: %.2f samples/sec'
# (rank 0, global); MXNet Speedometer 'Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec'.


def test_mxnet_speed_gluoncv_horovod_lines() -> None:
    text = "\n".join(
        f"INFO:root:Epoch[0] Batch[{b}]\tSpeed: {300.0 if b < 10 else 400.0:.2f} samples/sec"
        for b in range(1, 121)
    )
    run = parse_log("mxnet_speed", text, LogContext(128, 8))
    assert run.marks[0].step == 0 and run.marks[-1].step == 120
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(400.0)


def test_mxnet_speedometer_ranges_and_a_second_epoch() -> None:
    text = "\n".join(
        f"Epoch[{e}] Batch [{a}-{a + 20}]\tSpeed: 1000.00 samples/sec\taccuracy=0.001"
        for e in (0, 1)
        for a in range(0, 200, 20)
    )
    run = parse_log("mxnet_speed", text, LogContext(256))
    assert [m.step for m in run.marks][-1] == 200
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(1000.0)


# ----------------------------------------------------------------- NVIDIA DLLogger
# dllogger@26a0f8f logger.py:81-82 prefix "DLL {datetime} - ", metrics "{} : {} {}" (:73-78).
# PyTorch ResNet50 lines verbatim from DLPerf's NVIDIADeepLearningExamples README (2n8g, b128).

DLL_PYTORCH_REAL = """\
DLL 2020-09-15 14:28:53.498443 - PARAMETER data : /data/image  data_backend : dali-cpu  arch : resnet50  world_size : 16 
DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  train.total_ips : 267.44 img/s
DLL 2020-09-15 14:29:14.427490 - Epoch: 0 Iteration: 2  train.loss : 6.93504  train.total_ips : 4294.91 img/s
DLL 2020-09-15 14:29:15.018767 - Epoch: 0 Iteration: 3  train.loss : 6.85957  train.total_ips : 6928.79 img/s
DLL 2020-09-15 14:29:16.538463 - Epoch: 0 Iteration: 7  train.loss : 6.72415  train.total_ips : 10879.48 img/s
DLL 2020-09-15 14:29:18.553769 - Epoch: 0 Iteration: 12  train.loss : 6.67351  train.total_ips : 10393.54 img/s
"""  # noqa: E501, W291


def test_dllogger_pytorch_real_lines() -> None:
    run = parse_log("dllogger_pytorch", DLL_PYTORCH_REAL, LogContext(128, 8, 2))
    assert [m.step for m in run.marks] == [1, 2, 3, 7, 12]
    w = window_throughput(run.marks, 2, 10)  # marks at iterations 2 and 12
    elapsed = 18.553769 - 14.427490
    assert w.throughput == pytest.approx(10 * 128 * 16 / elapsed)
    assert run.losses[:2] == [7.09304, 6.93504] and run.failure is None


def dll(ts_seconds: float, rest: str) -> str:
    from datetime import datetime, timedelta

    stamp = datetime(2020, 8, 26, 23, 59, 0) + timedelta(seconds=ts_seconds)
    return f"DLL {stamp} - {rest}"


def test_dllogger_pytorch_bert_crosses_midnight_and_ignores_the_summary() -> None:
    lines = [
        dll(0.5 * i, f"Training Epoch: 0 Training Iteration: {i}  average_loss : 9.1  "
                     f"step_loss : 9.0  learning_rate : 0.006 ")
        for i in range(1, 151)
    ]  # fmt: skip
    lines.append(dll(80, " e2e_train_time : 80.0  training_sequences_per_second : 1.0 "))
    run = parse_log("dllogger_pytorch", "\n".join(lines), LogContext(32, 8))
    assert run.marks[-1].step == 150  # 23:59:00 + 75 s: past midnight
    assert window_throughput(run.marks, 25, 100).throughput == pytest.approx(256 / 0.5)


def test_dllogger_tf1_resnet_and_bert_shapes() -> None:
    resnet = "\n".join(
        dll(0.2 * s, f"({s // 5005}, {s}) imgs_per_sec : 640.1 cross_entropy : 6.9 l2_loss : 0.3 "
                     "total_loss : 7.2 learning_rate : 0.001")
        for s in range(20, 121)
    )  # fmt: skip
    resnet += "\n" + dll(30, "() train_throughput : 640.0")
    run = parse_log("dllogger_tf1", resnet, LogContext(128))
    assert (run.marks[0].step, run.marks[-1].step) == (20, 120)
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(128 / 0.2)

    bert = "\n".join(
        dll(0.3 * n, f"Iteration: {n}  throughput_train : 106.667 seq/s mlm_loss : 7.1000  "
                     "nsp_loss : 0.6900  total_loss : 7.7900  avg_loss_step : 7.7900  "
                     "learning_rate : 1e-04 ")
        for n in [1, *range(10, 130, 10)]
    )  # fmt: skip
    run = parse_log("dllogger_tf1", bert, LogContext(32))
    w = window_throughput(run.marks, 20, 100)
    assert (w.start_step, w.end_step) == (20, 120)
    assert w.throughput == pytest.approx(32 / 0.3)


def test_mxnet_nvidia_fit_inclusive_ranges_from_every_rank() -> None:
    # DLE MXNet fit.py:360-372: '{asctime}:INFO: Epoch[0] Batch [i-i]\tSpeed: X samples/sec'
    lines = []
    for i in range(0, 130):
        for _rank in range(2):
            lines.append(f"2020-06-20 10:00:{i % 60:02d},123:INFO: Epoch[0] Batch [{i}-{i}]\t"
                         f"Speed: {2048.0:.6f} samples/sec\tLR: 0.256000\t")  # fmt: skip
    run = parse_log("mxnet_speed", "\n".join(lines), LogContext(256, 8))
    assert run.marks[-1].step == 130
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(2048.0)


# ----------------------------------------------------------------- OneFlow-Benchmark
# Lines verbatim from DLPerf's OneFlow extract scripts (extract_cnn_result.py /
# extract_bert_result.py docstrings); cnns/util.py:120,159-160, BERT/util.py:158-159.

ONEFLOW_CNN = """\
train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.9863544
train: epoch 0, iter 120, loss: 1.050499, top_1: 1.000000, top_k: 1.000000, samples/s: 5917.583 1597933977.6064055
"""  # noqa: E501
ONEFLOW_BERT = """\
step: 19, total_loss: 9.725, mlm_loss: 8.960, nsp_loss: 0.766, throughput: 54.982 1598056519.8844702
step: 119, total_loss: 8.010, mlm_loss: 7.331, nsp_loss: 0.679, throughput: 139.896 1598056537.0029895
"""  # noqa: E501


def test_oneflow_benchmark_real_lines() -> None:
    run = parse_log("oneflow_benchmark", ONEFLOW_CNN, LogContext(256, 8))
    w = window_throughput(run.marks, 20, 100)
    assert w.throughput == pytest.approx(2048 * 100 / (1597933977.6064055 - 1597933942.9863544))
    # The upstream's own rate over its last 20 iterations agrees with the timestamps.
    assert w.throughput == pytest.approx(5917.583, rel=0.001)
    assert run.losses == [7.087004, 1.050499]

    run = parse_log("oneflow_benchmark", ONEFLOW_BERT, LogContext(24, 1))
    assert [m.step for m in run.marks] == [20, 120]  # step 19 is the 20th step
    w = window_throughput(run.marks, 20, 100)
    assert w.throughput == pytest.approx(24 * 100 / (1598056537.0029895 - 1598056519.8844702))


def test_oneflow_validation_lines_and_a_crash() -> None:
    text = ONEFLOW_CNN + (
        "validation: epoch 0, iter 100, top_1: 0.001, top_k: 0.005, samples/s: 9000.000 "
        "1597933999.0\nF0820 12:00:00 check failed: cudaMalloc: out of memory\n"
    )
    run = parse_log("oneflow_benchmark", text, LogContext(256, 8))
    assert [m.step for m in run.marks] == [20, 120]
    assert run.failure.startswith("out of memory")


# ----------------------------------------------------------------- Paddle
# PaddleCV image_classification/utils/utility.py:448-453, PaddleNLP BERT train.py:401-407
# (README.md:114-118 example line), PaddleClas `[Train][Epoch e/E][Iter: i/N]... ips:` lines.


def test_paddle_elapse_lines_chain_per_batch() -> None:
    text = "\n".join(
        f"2020-08-20 10:00:{b % 60:02d},000-INFO: [Pass 0, train batch {b}] \tloss 6.90421, "
        f"acc1 0.00000, acc5 0.00781, lr 0.00100, elapse {0.5 if b < 5 else 0.25:2.4f} sec"
        for b in range(120)
    )
    run = parse_log("paddle", text, LogContext(128, 8))
    assert run.marks[-1].step == 120
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(1024 / 0.25)


def test_paddle_elapse_every_tenth_batch_cannot_chain() -> None:
    text = "\n".join(
        f"[Pass 0, train batch {b}] \tloss 6.9, acc1 0.0, acc5 0.0, lr 0.1, elapse 0.2500 sec"
        for b in range(0, 120, 10)
    )
    run = parse_log("paddle", text, LogContext(128))
    assert run.marks[-1].step == 1 and any("no throughput line covers" in n for n in run.notes)


def test_paddle_bert_speed_counts_every_node() -> None:
    text = "\n".join(
        f"feed_queue size: 70, current learning_rate: 0.0001\nepoch: 1, progress: 1/1, "
        f"step: {s}, loss: 10.487363, ppl: 17796.216797, next_sent_acc: 0.560417, "
        f"speed: 4.000000 steps/s, file: demo_wiki_train.gz"
        for s in range(1, 121)
    )
    # Two nodes: the upstream multiplies the rate by the node count, so the job did 2 steps/s.
    run = parse_log("paddle", text, LogContext(32, 8, 2))
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(2 * 32 * 16)
    assert run.losses[0] == pytest.approx(10.487363)


def test_paddleclas_ips_lines_are_per_card() -> None:
    text = "\n".join(
        f"[2022/04/04 17:51:{i % 60:02d}] ppcls INFO: [Train][Epoch 1/20][Iter: {i}/5005]lr: "
        f"0.00031, CELoss: 4.64081, loss: 4.64081, batch_cost: 0.25000s, reader_cost: 0.01, "
        f"ips: 512.00000 images/sec, eta: 0:08:23"
        for i in range(0, 200, 10)
    )
    run = parse_log("paddle", text, LogContext(128, 4))
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(4 * 512.0)
    assert any("1 of 4 ranks" in n for n in run.notes)


# ----------------------------------------------------------------- tensorflow/models BERT
# official/nlp/bert/model_training_utils.py:484-505 'Train Step: %d/%d  / loss = %s' via absl.


def test_absl_train_steps_across_new_years_eve() -> None:
    from datetime import datetime, timedelta

    start = datetime(2000, 12, 31, 23, 59, 30)
    lines = []
    for step in range(1, 121):
        t = start + timedelta(seconds=0.4 * step)
        lines.append(f"I{t:%m%d %H:%M:%S.%f} 140405777 model_training_utils.py:505] "
                     f"Train Step: {step}/120  / loss = 10.5  lr = 0.0001")  # fmt: skip
    run = parse_log("absl_train_step", "\n".join(lines), LogContext(32, 8))
    assert run.marks[-1].step == 120 and run.failure is None
    assert window_throughput(run.marks, 20, 100).throughput == pytest.approx(256 / 0.4)


def test_mpirun_rank_tags_are_stripped() -> None:
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in DLL_PYTORCH_REAL.splitlines())
    run = parse_log("dllogger_pytorch", tagged, LogContext(128, 8, 2))
    assert [m.step for m in run.marks] == [1, 2, 3, 7, 12]


# ----------------------------------------------------------------- CLU metric writers (Flax)
# clu/metric_writers/logging_writer.py:48 LoggingWriter.write_scalars: logging.info("[%d]%s %s",
# step, collection, ", ".join(sorted f"{k}={v:.6g}" for floats, else f"{k}={v}")).


def _clu_line(step: int, rate: str, loss: str = "6.92", collection: str = "") -> str:
    return (
        f"I0102 03:04:05.000006 1400 logging_writer.py:48] [{step}]{collection} "
        f"steps_per_second={rate}, train_accuracy=0.0, train_learning_rate=1e-08, "
        f"train_loss={loss}"
    )


def test_clu_reports_chain_from_the_first_and_count_the_global_batch() -> None:
    text = "\n".join(_clu_line(step, rate) for step, rate in
                     ((100, "0.05"), (200, "2.5"), (300, "2"), (400, "4")))  # fmt: skip
    run = parse_log("clu", text, LogContext(16, 8, 2))
    # The first report's interval (steps 0..100, compilation) is no mark's: marks start at 100.
    assert [(m.step, m.time, m.samples) for m in run.marks] == [
        (100, 0.0, 0.0), (200, 40.0, 25600.0), (300, 90.0, 25600.0), (400, 115.0, 25600.0)
    ]  # fmt: skip
    assert window_throughput(run.marks, 0, 400).start_step == 100  # never the compilation
    assert run.losses == [6.92] * 4 and run.failure is None


def test_clu_collections_malformed_rates_and_nan_losses() -> None:
    text = "\n".join([
        _clu_line(20, "0.5", collection=" collection=train"),
        _clu_line(40, "0.5", collection=" collection=train"),
        _clu_line(60, "0"),                          # no rate: malformed
        _clu_line(60, "inf"),                        # nor this
        _clu_line(60, "1e-400"),                     # 0 once read
        _clu_line(60, "0.5", loss="nan"),
        "I0102 03:04:05.000006 1400 logging_writer.py:48] [60] eval_loss=7.0, eval_accuracy=0",
        "I0102 03:04:05.000006 1400 logging_writer.py:48] [Hyperparameters] {'lr': 0.1}",
    ])  # fmt: skip
    run = parse_log("clu", text, LogContext(4))
    assert [m.step for m in run.marks] == [20, 40, 60] and run.marks[-1].time == 80.0
    assert run.malformed == 3
    assert run.notes == ["3 malformed or out-of-order CLU steps_per_second lines ignored"]
    assert run.losses == [6.92, 6.92] and run.failure.startswith("the loss became NaN")
    one = parse_log("clu", _clu_line(20, "0.5"), LogContext(4))
    assert [(m.step, m.time) for m in one.marks] == [(20, 0.0)]  # no interval to time
