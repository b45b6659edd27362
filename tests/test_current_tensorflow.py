"""TensorFlow's official implementations in profile `current`: tensorflow/models v2.20.0, the
Orbit trainers official/vision/train.py (resnet_imagenet) and official/nlp/train.py
(bert/pretraining), and their log format `orbit_train`.

The upstream is pinned by its release archive (the tf-models-official 2.20.0 sdist on PyPI,
by sha256). The fetch test downloads it from PyPI, as `dlperf sources fetch` does, or takes it
from $DLPERF_TEST_MIRRORS/pypi/ where there is no network; it skips when neither works. The
CPU smoke runs also need an interpreter with tensorflow 2.20 and tf-models-official 2.20.0's
dependencies (DLPERF_TEST_TF_MODELS_PYTHON): they run `dlperf run ... --impl official --profile
current --device cpu --python PY` on that checkout with a tiny model and log cadence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from dlperf import DlperfError
from dlperf.logformats import LogContext, parse_log
from dlperf.official.checkout import fetch_source, verify_checkout
from dlperf.official.manifest import find_manifest, load_manifests

NAMES = ("tensorflow-models-resnet50-current", "tensorflow-models-bert-current")


def dlperf(
    *args: str, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400", **(env or {})},
    )


# ----------------------------------------------------------------- manifests and dry runs


def test_manifests_load_in_profile_current_as_the_defaults() -> None:
    manifests = load_manifests()
    for name, model in zip(NAMES, ("resnet50", "bert"), strict=True):
        m = manifests[name]
        assert (m.profile, m.framework, m.model, m.default) == (
            "current",
            "tensorflow",
            model,
            True,
        )
        assert m.log_format == "orbit_train"
        assert m.upstream.name == "tensorflow-models-current"
        assert m.upstream.ref == "v2.20.0"
        assert "tensorflow[and-cuda]==2.20.0" in m.environment.requirements
        assert "tf-models-official==2.20.0" in m.environment.requirements
        assert find_manifest("tensorflow", model).name == name  # current is the default profile
    assert (manifests[NAMES[0]].window.skip, manifests[NAMES[0]].window.measure) == (100, 500)
    assert (manifests[NAMES[1]].window.skip, manifests[NAMES[1]].window.measure) == (20, 100)


@pytest.mark.parametrize(
    ("model", "extra", "expect", "absent"),
    [
        (
            "resnet50",
            [],
            [
                "official/vision/train.py",
                "--experiment=resnet_imagenet",
                "--mode=train",
                "runtime.num_gpus=1,task.train_data.global_batch_size=128,",
                "trainer.train_steps=600,trainer.steps_per_loop=100",
                "DLPERF_TF_DATA=,task.train_data.input_path=synthetic",
                "DLPERF_TF_DTYPE=,runtime.mixed_precision_dtype=float32,task.train_data.dtype=float32",
                "DLPERF_TF_XLA=,runtime.enable_xla=False",
                "CUDA_VISIBLE_DEVICES=0 ",
                "knobs applied: batch_size, steps, synthetic, fp32, no_xla; log format orbit_train",
            ],
            ["TF_CONFIG"],
        ),
        (
            "resnet50",
            ["--amp"],
            [
                "task.train_data.global_batch_size=256,",
                "DLPERF_TF_DTYPE=,runtime.mixed_precision_dtype=float16,runtime.loss_scale=dynamic,"
                "task.train_data.dtype=float16",
            ],
            ["TF_CONFIG"],
        ),
        (
            "bert",
            [],
            [
                "official/nlp/train.py",
                "--experiment=bert/pretraining",
                "task.model.cls_heads=[{activation: tanh, cls_token_idx: 0, dropout_rate: 0.1, "
                "inner_dim: 768, name: next_sentence, num_classes: 2}]",
                "task.train_data.global_batch_size=32,task.train_data.seq_length=128,"
                "task.train_data.max_predictions_per_seq=20",
                "trainer.train_steps=120,trainer.steps_per_loop=20",
                "DLPERF_TF_DATA=,task.train_data.input_path=synthetic",
                "DLPERF_TF_DTYPE=,runtime.mixed_precision_dtype=float32 ",
            ],
            ["TF_CONFIG"],
        ),
        (
            "bert",
            ["--amp"],
            [
                "task.train_data.global_batch_size=64,",
                "DLPERF_TF_DTYPE=,runtime.mixed_precision_dtype=float16,"
                "runtime.loss_scale=dynamic ",
            ],
            [],
        ),
    ],
)
def test_dry_run_one_device(model, extra, expect, absent, tmp_path) -> None:
    out = dlperf("run", "tensorflow", model, "--impl", "official", "--profile", "current",
                 "--dry-run", *extra, env={"DLPERF_HOME": str(tmp_path)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())  # rich wraps long lines
    upstream = find_manifest("tensorflow", model).upstream
    assert f"{upstream.archive} @ sha256:{upstream.sha256}" in text
    for piece in expect:
        assert piece in text, piece
    for piece in absent:
        assert piece not in text, piece
    assert "node 1" not in text


@pytest.mark.parametrize("model", ["resnet50", "bert"])
def test_dry_run_two_nodes_of_eight(model, tmp_path) -> None:
    out = dlperf("run", "tensorflow", model, "--impl", "official", "--profile", "current",
                 "--dry-run", "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b",
                 env={"DLPERF_HOME": str(tmp_path)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "node 0 (a):" in text and "node 1 (b):" in text
    batch = 2 * 8 * (128 if model == "resnet50" else 32)  # global batch: all workers
    assert text.count(f"task.train_data.global_batch_size={batch},") == 2
    assert text.count("runtime.num_gpus=8,") == 2
    assert text.count("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ") == 2
    dist = ",runtime.distribution_strategy=multi_worker_mirrored,runtime.all_reduce_alg=nccl"
    assert text.count(f"DLPERF_TF_DIST={dist}") == 2
    for rank in (0, 1):
        tf_config = (
            'TF_CONFIG=\'{"cluster": {"worker": ["a:29500", "b:29500"]}, "task": {"type": '
            f'"worker", "index": {rank}}}}}\''
        )
        assert tf_config in text


def test_data_dir_replaces_synthetic(tmp_path) -> None:
    out = dlperf("run", "tensorflow", "resnet50", "--impl", "official", "--dry-run",
                 "--data-dir", "/data/imagenet", env={"DLPERF_HOME": str(tmp_path)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "DLPERF_TF_DATA=" not in text
    assert "D=,task.train_data.input_path=/data/imagenet/train*;" in text


# ----------------------------------------------------------------- the log format

# Real lines: official/vision/train.py --experiment=resnet_imagenet (patched synthetic data,
# global batch 2, 64x64, steps_per_loop 2) under tf-models-official 2.20.0 + tensorflow 2.20.0
# on this project's CPU machine, 2026-11-26; stdout and stderr in one log as dlperf tees them.
RESNET_LOG = """\
I1126 16:24:12.009145 140052602669952 controller.py:278] train | step:      0 | training until step 6...
train | step:      0 | training until step 6...
I1126 16:24:27.550199 140052602669952 controller.py:535] train | step:      2 | steps/sec:    0.1 | output: 
    {'accuracy': np.float32(0.0),
     'learning_rate': np.float32(0.0020512822),
     'top_5_accuracy': np.float32(0.0),
     'training_loss': np.float32(9.571677)}
train | step:      2 | steps/sec:    0.1 | output: 
    {'accuracy': np.float32(0.0),
     'learning_rate': np.float32(0.0020512822),
     'top_5_accuracy': np.float32(0.0),
     'training_loss': np.float32(9.571677)}
I1126 16:24:28.378834 140052602669952 controller.py:535] train | step:      4 | steps/sec:    2.4 | output: 
    {'accuracy': np.float32(0.25),
     'learning_rate': np.float32(0.0041025644),
     'top_5_accuracy': np.float32(0.25),
     'training_loss': np.float32(6.8753576)}
train | step:      4 | steps/sec:    2.4 | output: 
    {'accuracy': np.float32(0.25),
     'learning_rate': np.float32(0.0041025644),
     'top_5_accuracy': np.float32(0.25),
     'training_loss': np.float32(6.8753576)}
I1126 16:24:29.282923 140052602669952 controller.py:535] train | step:      6 | steps/sec:    2.2 | output: 
    {'accuracy': np.float32(0.5),
     'learning_rate': np.float32(0.006153846),
     'top_5_accuracy': np.float32(1.0),
     'training_loss': np.float32(2.445294)}
train | step:      6 | steps/sec:    2.2 | output: 
    {'accuracy': np.float32(0.5),
     'learning_rate': np.float32(0.006153846),
     'top_5_accuracy': np.float32(1.0),
     'training_loss': np.float32(2.445294)}
I1126 16:24:29.290572 140052602669952 controller.py:580] Sync on async checkpoint saving.
"""  # noqa: E501, W291 (upstream's lines, as written: long, ending in a space)


def test_orbit_lines_are_timed_by_their_absl_stamps() -> None:
    run = parse_log("orbit_train", RESNET_LOG, LogContext(batch_size=2))
    assert run.what == "Orbit train lines" and run.malformed == 0 and not run.notes
    assert [(m.step, m.samples) for m in run.marks] == [(2, 0), (4, 4), (6, 4)]
    assert run.marks[1].time == pytest.approx(28.378834 - 27.550199, abs=1e-9)
    assert run.marks[2].time == pytest.approx(29.282923 - 27.550199, abs=1e-9)
    # 8 samples over steps 2..6: 4.617 samples/s (the printed rates say 2.4 and 2.2 steps/s)
    assert 8 / run.marks[2].time == pytest.approx(4.617, abs=1e-3)


def test_orbit_printed_rates_are_the_fallback() -> None:
    printed = "\n".join(line for line in RESNET_LOG.splitlines() if not line.startswith("I1126"))
    run = parse_log("orbit_train", printed, LogContext(batch_size=2, devices_per_node=2))
    assert run.what == "Orbit train lines"
    # intervals from 'training until step 0': 2 steps at 0.1, 2.4 and 2.2 steps/s
    assert [m.step for m in run.marks] == [0, 2, 4, 6]
    assert [m.samples for m in run.marks[1:]] == [8, 8, 8]  # global batch 2 x 2 devices
    assert run.marks[-1].time == pytest.approx(2 / 0.1 + 2 / 2.4 + 2 / 2.2)
    assert any("one decimal" in note for note in run.notes)


def test_orbit_eval_lines_and_other_programs_are_ignored() -> None:
    log = (
        "I0101 00:00:01.000000 1 controller.py:535] train | step:    100 | steps/sec:   9.0 |\n"
        " eval | step:    100 | steps/sec:   50.0 | eval time:    1.0 sec | output: {}\n"
        "I0101 00:00:02.500000 1 controller.py:535] train | step:    200 | steps/sec:  66.7 |\n"
        "I0101 00:00:02.400000 1 controller.py:535] train | step:    200 | steps/sec:  66.7 |\n"
    )
    run = parse_log("orbit_train", log, LogContext(batch_size=4))
    assert [(m.step, m.time, m.samples) for m in run.marks] == [(100, 0.0, 0), (200, 1.5, 400)]
    assert run.malformed == 1  # the second copy of step 200 (another worker's line)


# ----------------------------------------------------------------- fetch the release


@pytest.fixture(scope="module")
def tf_home(tmp_path_factory) -> Path:
    """A DLPERF_HOME holding the fetched, patched release: from PyPI, or from the folder
    $DLPERF_TEST_MIRRORS/pypi when PyPI is out of reach."""
    home = tmp_path_factory.mktemp("tf-home")
    upstream = find_manifest("tensorflow", "resnet50", profile="current").upstream
    saved = os.environ.get("DLPERF_HOME")
    os.environ["DLPERF_HOME"] = str(home)
    try:
        try:
            fetch_source(upstream)
        except DlperfError as exc:
            mirror = Path(os.environ.get("DLPERF_TEST_MIRRORS", "/nonexistent")) / "pypi"
            if "cannot download" not in str(exc) or not (mirror / upstream.archive_name).exists():
                pytest.skip(f"{exc} (and no {upstream.archive_name} in $DLPERF_TEST_MIRRORS/pypi)")
            fetch_source(upstream, sources_dir=mirror)
    finally:
        if saved is None:
            os.environ.pop("DLPERF_HOME")
        else:
            os.environ["DLPERF_HOME"] = saved
    return home


def test_the_release_fetches_verifies_and_takes_its_patches(tf_home, monkeypatch) -> None:
    monkeypatch.setenv("DLPERF_HOME", str(tf_home))
    for name in NAMES:  # one upstream, one checkout
        upstream = load_manifests()[name].upstream
        path = fetch_source(upstream)  # the cached checkout, verified
        verify_checkout(upstream, path)
    assert path.name == "tensorflow-models-current-sha256-90ffccda8e3a"
    assert (path / "official/vision/train.py").is_file() and (
        path / "orbit/controller.py"
    ).is_file()
    vision = (path / "official/vision/tasks/image_classification.py").read_text()
    assert "if params.input_path == 'synthetic':" in vision
    assert "input_path == 'synthetic'" in (path / "official/nlp/tasks/masked_lm.py").read_text()
    assert "Version: 2.20.0" in (path / "PKG-INFO").read_text()
    out = dlperf("sources", "verify", *NAMES, env={"DLPERF_HOME": str(tf_home)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok sha256:90ffccda8e3a") == 2


# ----------------------------------------------------------------- CPU smoke runs


def tf_models_python() -> Path:
    found = os.environ.get("DLPERF_TEST_TF_MODELS_PYTHON")
    if not found or not Path(found).exists():
        pytest.skip(
            "set DLPERF_TEST_TF_MODELS_PYTHON to an interpreter with tensorflow==2.20.0 and "
            "tf-models-official==2.20.0 (CPU is enough)"
        )
    return Path(found)


TINY = {  # the manifests' command with a tiny model and a log line every 2 steps
    "resnet50": ",task.model.input_size=[64,64,3]",
    "bert": ",task.model.encoder.bert.num_layers=2,task.model.encoder.bert.hidden_size=128,"
    "task.model.encoder.bert.num_attention_heads=2,task.model.encoder.bert.intermediate_size=256,"
    "task.train_data.seq_length=32,task.train_data.max_predictions_per_seq=5",
}


def smoke_manifests(root: Path) -> Path:
    folder = root / "manifests"
    folder.mkdir()
    for name in NAMES:
        text = (ROOT / "third_party_scripts" / f"{name}.toml").read_text()
        for every in ("100", "20"):
            text = text.replace(f"log_every = {every} ", "log_every = 2 ")
            text = text.replace(
                f"steps_per_loop={every},trainer.summary_interval={every}",
                "steps_per_loop=2,trainer.summary_interval=2",
            )
        model = "resnet50" if "resnet50" in name else "bert"
        text = text.replace(
            "trainer.checkpoint_interval=0$D", f"trainer.checkpoint_interval=0{TINY[model]}$D"
        )
        (folder / f"{name}.toml").write_text(text)
    return folder


@pytest.mark.framework
@pytest.mark.parametrize("model", ["resnet50", "bert"])
def test_cpu_smoke_run_of_the_release(model, tf_home, tmp_path) -> None:
    python = tf_models_python()
    env = {"DLPERF_HOME": str(tf_home), "DLPERF_MANIFESTS": str(smoke_manifests(tmp_path))}
    out = dlperf("run", "tensorflow", model, "--impl", "official", "--profile", "current",
                 "--device", "cpu", "--python", str(python),
                 "--batch-size", "2", "--skip", "2", "--measure", "4", "--repeats", "1",
                 "--timeout", "900", "--results-dir", str(tmp_path / "results"), "--json",
                 env=env, timeout=1200)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout[out.stdout.index("{") :])
    assert result["status"] == "ok", result.get("warnings")
    upstream = find_manifest("tensorflow", model, profile="current").upstream
    assert result["source"]["profile"] == "current"
    assert result["source"]["commit"] == upstream.revision
    assert result["source"]["url"] == upstream.archive
    assert set(result["source"]["patches"]) == {
        "0001-vision-synthetic-data.patch",
        "0002-bert-synthetic-data.patch",
    }
    (repeat,) = result["repeats"]
    assert repeat["status"] == "ok"
    assert (repeat["window"]["start_step"], repeat["window"]["end_step"]) == (2, 6)
    log = Path(repeat["log_path"])
    log = log if log.is_absolute() else Path.cwd() / log
    marks = parse_log("orbit_train", log.read_text(), LogContext(batch_size=2)).marks
    times = {m.step: m.time for m in marks}
    assert repeat["throughput"] == pytest.approx(2 * 4 / (times[6] - times[2]), rel=1e-6)
    print(f"{model}: {repeat['throughput']:.3f} samples/s over steps 2..6, "
          f"{times[6] - times[2]:.3f} s; wall {repeat.get('wall_s')}")  # fmt: skip
