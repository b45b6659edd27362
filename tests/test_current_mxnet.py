"""MXNet's official implementations in profile `current`: NVIDIA DLE RN50v1.5 (frozen folder,
NGC image) and gluon-nlp 0.10.x BERT pre-training (MXNet is retired: both pin last commits).

Dry-runs need no network and run in CI. Fetch/verify use a local mirror (`upstream_mirror`,
skipped without DLPERF_TEST_MIRRORS). The CPU smoke run also needs an interpreter with mxnet
1.9.1 (CPU) and gluonnlp 0.10.0, named by DLPERF_TEST_GLUONNLP_PYTHON (no MXNet wheel runs on a
CPU-only host from the manifest's CUDA pins).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import upstream_mirror
from typer.testing import CliRunner

from dlperf.cli import app
from dlperf.logformats import LogContext, parse_log
from dlperf.official.checkout import fetch_source, verify_checkout
from dlperf.official.manifest import find_manifest, load_manifests

DLE = "nvidia-dle-mxnet-resnet50-current"
GLUONNLP = "gluonnlp-bert-current"


def dry_run(model: str, *extra: str) -> str:
    out = CliRunner().invoke(
        app,
        ["run", "mxnet", model, "--impl", "official", "--profile", "current", "--dry-run",
         *extra],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    return " ".join(out.output.split())  # rich wraps long lines


def test_the_manifests_load_as_the_current_defaults() -> None:
    manifests = load_manifests()
    for name, model, commit in (
        (DLE, "resnet50", "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd"),
        (GLUONNLP, "bert", "b4d7c0ffe358cdb52ad34d902f1cb2d43fb5a1c0"),
    ):
        m = manifests[name]
        assert (m.profile, m.framework, m.default, m.upstream.commit) == (
            "current",
            "mxnet",
            True,
            commit,
        )
        assert find_manifest("mxnet", model) is not None
        assert find_manifest("mxnet", model).name == name  # current is the default profile
        assert "retired" in m.notes.lower() or "RETIRED" in m.notes
    dle = manifests[DLE]
    assert dle.log_format == "dllogger_mxnet" and dle.environment.image.endswith(":24.06-py3")
    nlp = manifests[GLUONNLP]
    assert nlp.log_format == "gluonnlp" and "mxnet-cu117==1.9.1" in nlp.environment.requirements
    assert nlp.upstream.name != manifests["gluonnlp-bert"].upstream.name  # own patch folder


def test_dle_resnet50_dry_runs() -> None:
    one = dry_run("resnet50", "--device", "cuda")
    assert "docker run --rm" in one and "nvcr.io/nvidia/mxnet:24.06-py3 horovodrun -np 1" in one
    assert "-H localhost:1" in one and "python train.py --arch resnetv15" in one
    assert "--batch-size 128 --benchmark-iters 120 --data-backend synthetic --dtype float32" in one
    assert "-e MXNET_OPTIMIZER_AGGREGATION_SIZE=60" in one and "log format dllogger_mxnet" in one
    amp = dry_run("resnet50", "--device", "cuda", "--amp")
    assert "--batch-size 256 --benchmark-iters 120" in amp
    assert "--dtype float16 --amp --fuse-bn-relu 1 --fuse-bn-add-relu 1" in amp
    multi = dry_run(
        "resnet50", "--device", "cuda", "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b"
    )
    assert "horovodrun -np 16 -H a:8,b:8" in multi and "--gpus 0,1,2,3,4,5,6,7" in multi
    assert "--batch-size 2048" in multi and "node 1" not in multi  # one horovodrun on node 0


def test_gluonnlp_bert_dry_runs() -> None:
    one = dry_run("bert", "--device", "cuda")
    assert "mpirun --allow-run-as-root -oversubscribe -np 1 -H localhost:1" in one
    assert "run_pretraining.py --model bert_12_768_12" in one
    assert "--total_batch_size 32 --total_batch_size_eval 32 --num_steps 200" in one
    assert "--synthetic_data --synthetic_vocab_size 30522 --dtype float32" in one
    assert one.endswith("--comm_backend horovod") and "--skip_final_ckpt" in one
    amp = dry_run("bert", "--device", "cuda", "--amp")
    assert "--total_batch_size 64" in amp and "--dtype float16 --comm_backend horovod" in amp
    multi = dry_run(
        "bert", "--device", "cuda", "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b"
    )
    assert "-np 16 -H a:8,b:8" in multi and "--total_batch_size 512" in multi
    cpu = dry_run("bert", "--device", "cpu")
    assert cpu.endswith("--comm_backend device") and "--gpus" not in cpu


# Real lines: patches/gluon-nlp-current applied to b4d7c0ff, run on this project's CPU machine
# (mxnet 1.9.1 CPU, gluonnlp 0.10.0, Python 3.11; bert_12_768_12, seq 128, batch 2, fp32,
# --log_interval 1) through `dlperf run mxnet bert --impl official --device cpu`.
GLUONNLP_REAL = (
    "INFO:root:[step 1]\tmlm_loss=0.00000\tnsp_loss= 0.60\tthroughput=0.0K tks/s\t"
    "lr=0.0000333 time=27.48, latency=27481.0 ms/step\n"
    "INFO:root:[step 2]\tmlm_loss=0.00000\tnsp_loss= 0.01\tthroughput=0.0K tks/s\t"
    "lr=0.0000667 time=6.50, latency=6501.7 ms/step\n"
    "INFO:root:[step 3]\tmlm_loss=0.00000\tnsp_loss= 0.00\tthroughput=0.1K tks/s\t"
    "lr=0.0001000 time=4.39, latency=4392.8 ms/step\n"
)


def test_gluonnlp_ms_per_step_lines_parse_like_ms_per_batch() -> None:
    run = parse_log("gluonnlp", GLUONNLP_REAL, LogContext(2, 1))
    assert [m.step for m in run.marks][-3:] == [1, 2, 3]
    assert run.marks[-1].samples == 2
    elapsed = run.marks[-1].time - run.marks[-3].time
    assert elapsed == pytest.approx(6.5017 + 4.3928)
    old = parse_log("gluonnlp", GLUONNLP_REAL.replace("ms/step", "ms/batch"), LogContext(2, 1))
    assert [(m.step, m.time, m.samples) for m in old.marks] == [
        (m.step, m.time, m.samples) for m in run.marks
    ]


# NOT captured from a run (no GPU, no Horovod/DALI here): the shape upstream's code writes,
# dllogger v0.1.0 StdOutBackend ('DLL <datetime.now()> - ' + step + 'name : value' metrics) with
# RN50v1.5/log_utils.py format_step ('Epoch: e Iteration: i ') for fit.py's
# dllogger.log((epoch, i), {'train.loss', 'train.ips', 'train.lr'}), i = 0-based batch index.
DLL_MXNET_SHAPE = "\n".join(
    f"DLL 2024-04-04 10:00:{i:02d}.500000 - Epoch: 0 Iteration: {i}  train.loss : 6.9  "
    f"train.ips : 512.0 images/s train.lr : 0.256"
    for i in range(0, 30)
)


def test_dllogger_mxnet_iteration_is_the_zero_based_batch() -> None:
    run = parse_log("dllogger_mxnet", DLL_MXNET_SHAPE, LogContext(64, 8))
    assert [m.step for m in run.marks][:2] == [1, 2] and run.marks[-1].step == 30
    assert run.marks[1].samples == 64 * 8 and run.marks[-1].time - run.marks[0].time == 29
    assert run.losses[0] == 6.9


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.parametrize(
    ("name", "repo"),
    [(DLE, "NVIDIA/DeepLearningExamples"), (GLUONNLP, "dmlc/gluon-nlp")],
)
def test_fetch_and_verify_against_a_mirror(home: Path, name: str, repo: str) -> None:
    mirror = upstream_mirror(repo)
    manifest = load_manifests()[name]
    path = fetch_source(manifest.upstream, sources_dir=mirror)
    verify_checkout(manifest.upstream, path)
    if name == GLUONNLP:
        text = (path / "scripts/bert/run_pretraining.py").read_text()
        assert "--synthetic_vocab_size" in text and "--skip_final_ckpt" in text
        assert "StreamHandler(sys.stdout)" in text
    else:
        assert (path / "MxNet/Classification/RN50v1.5/train.py").is_file()


@pytest.mark.framework
def test_gluonnlp_bert_cpu_smoke_run(home: Path) -> None:
    mirror = upstream_mirror("dmlc/gluon-nlp")
    python = os.environ.get("DLPERF_TEST_GLUONNLP_PYTHON")
    if not python:
        pytest.skip(
            "set DLPERF_TEST_GLUONNLP_PYTHON to a Python with mxnet==1.9.1 (CPU), numpy<1.24 and "
            "gluonnlp==0.10.0 (pip install --no-build-isolation after cython, wheel)"
        )
    from dlperf.store import ResultStore

    results = home / "results"
    out = CliRunner().invoke(
        app,
        ["run", "mxnet", "bert", "--impl", "official", "--profile", "current", "--device", "cpu",
         "--python", python, "--batch-size", "2", "--skip", "1", "--measure", "2",
         "--repeats", "1", "--timeout", "500", "--results-dir", str(results),
         "--sources-dir", str(mirror), "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    (result,) = ResultStore(results).results()
    (repeat,) = result.repeats
    assert repeat.status == "ok" and result.source.profile == "current"
    assert (repeat.window.start_step, repeat.window.end_step) == (1, 3)
    # the throughput is the log's own marks: 2 steps x batch 2 over their latencies
    log = Path(repeat.log_path).read_text()
    run = parse_log("gluonnlp", log, LogContext(2, 1))
    marks = {m.step: m for m in run.marks}
    elapsed = marks[3].time - marks[1].time
    assert repeat.throughput == pytest.approx(4 / elapsed)
    assert "synthetic vocabulary of 30522 tokens" in log and "environ(" not in log
