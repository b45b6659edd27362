"""PaddlePaddle's own best-practice settings (adapters/paddle): the documented defaults per
device, and, in the built CPU env, each setting applied, falling back or refused cleanly, and
recorded in the start event. Tiny shapes: these are path tests, never timings."""

import json
import subprocess
from pathlib import Path

import pytest

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.spec import resolve_spec

CUDNN = (
    "cudnn_exhaustive_search",
    "conv_workspace_size_limit",
    "cudnn_batchnorm_spatial_persistent",
)


def practice(model: str, device: str, precision: str = "fp32", mode: str = "train") -> dict:
    overrides = {"device": device, "precision": precision, "mode": mode}
    return resolve_spec("paddle", model, preset="smoke", overrides=overrides).practice


def test_defaults_follow_the_official_configs_on_cuda_and_the_cpu_kernels_on_cpu():
    assert practice("resnet50", "cuda", "amp") == {
        "amp_level": "O2",
        "data_format": "NHWC",
        "multi_tensor": "1",
        "cudnn_exhaustive_search": "1",
        "conv_workspace_size_limit": "4096",
        "cudnn_batchnorm_spatial_persistent": "1",
    }
    assert practice("resnet50", "cuda") == {
        "data_format": "NCHW",  # PaddleClas's fp32 configs keep NCHW; NHWC is for fp16
        "multi_tensor": "1",
        "cudnn_exhaustive_search": "1",
        "conv_workspace_size_limit": "4096",
        "cudnn_batchnorm_spatial_persistent": "0",  # PaddleClas sets it with AMP only
    }
    # On a CPU: NCHW (Paddle's CPU conv transposes NHWC around every call), no cuDNN flags,
    # no AMP level (Paddle's auto_cast does nothing on a CPU).
    cpu = {"data_format": "NCHW", "multi_tensor": "1"}
    assert practice("resnet50", "cpu") == cpu
    assert practice("resnet50", "cpu", "amp") == cpu
    assert practice("bert", "cuda", "amp") == {"amp_level": "O2"}
    assert practice("bert", "cuda") == practice("bert", "cpu") == {}
    # Inference has no optimizer.
    assert practice("resnet50", "cuda", "amp", mode="infer") == {
        k: v for k, v in practice("resnet50", "cuda", "amp").items() if k != "multi_tensor"
    }


def test_every_practice_key_is_a_documented_option_and_reaches_the_workload():
    adapter = get_adapter("paddle")
    for model in ("resnet50", "bert"):
        spec = resolve_spec("paddle", model, preset="smoke",
                            overrides={"device": "cuda", "precision": "amp"})  # fmt: skip
        assert set(spec.practice) <= set(adapter.option_keys(model))
        argv = adapter.command(spec, "python").argv
        for key, value in spec.practice.items():
            assert argv[argv.index(f"--{key.replace('_', '-')}") + 1] == value
    # A --set of a practice key is the ablation: it replaces the default.
    spec = resolve_spec("paddle", "resnet50", preset="smoke",
                        overrides={"device": "cuda", "precision": "amp",
                                   "options": {"data_format": "NCHW"}})  # fmt: skip
    assert spec.practice["data_format"] == "NCHW" and "data_format" not in spec.options
    assert set(CUDNN) <= set(adapter.option_keys("resnet50"))
    assert not set(CUDNN) & set(adapter.option_keys("bert"))


def test_cuda_check_is_python_that_asks_both_questions():
    code = get_adapter("paddle").launch.cuda_check
    compile(code, "cuda_check", "exec")
    assert "paddle.device.is_compiled_with_cuda()" in code
    assert "paddle.device.cuda.device_count()" in code


# ------------------------------------------------------------------------ in the built env


@pytest.fixture(scope="module")
def env():
    return ensure_env(get_adapter("paddle").env_spec("cpu"))


def workload(env, tmp_path: Path, *args: str) -> tuple[int, str, list[dict]]:
    """Run the workload script directly; (exit code, stdout + stderr, events)."""
    spec = resolve_spec("paddle", "resnet50", preset="smoke")
    script = get_adapter("paddle").command(spec, str(env.python)).argv[1]
    events = tmp_path / f"events-{len(list(tmp_path.iterdir()))}.jsonl"
    run_env = {**env.run_env(), "DLPERF_EVENTS": str(events), "GLOG_minloglevel": "2"}
    proc = subprocess.run(
        [str(env.python), script, "--threads", "1", "--seed", "0", *args],
        capture_output=True, text=True, env=run_env, timeout=600,
    )  # fmt: skip
    lines = events.read_text().splitlines() if events.exists() else []
    return proc.returncode, proc.stdout + proc.stderr, [json.loads(line) for line in lines]


def start_of(events: list[dict]) -> dict:
    return next(e for e in events if e["event"] == "start")


def losses(events: list[dict]) -> list[float]:
    return [e["loss"] for e in events if e["event"] == "step"]


RESNET = ("--model", "resnet50", "--image-size", "32", "--batch-size", "2")
BERT = ("--model", "bert", "--seq-len", "16", "--batch-size", "2")


@pytest.mark.framework
def test_nhwc_gives_the_same_first_loss_as_nchw(env, tmp_path):
    runs = {}
    for layout in ("NCHW", "NHWC"):
        rc, out, events = workload(env, tmp_path, *RESNET, "--steps", "1", "--data-format", layout)
        assert rc == 0, out
        assert start_of(events)["practice"]["data_format"] == layout
        assert f"best practice: data_format {layout}" in out
        runs[layout] = losses(events)[0]
    # Same seed, same weights, same pixels: only the memory layout (and the summation order
    # inside the kernels) differs.
    assert runs["NHWC"] == pytest.approx(runs["NCHW"], rel=1e-5)


@pytest.mark.framework
def test_multi_tensor_momentum_trains_exactly_like_the_loop(env, tmp_path):
    runs = {}
    for flag in ("0", "1"):
        rc, out, events = workload(env, tmp_path, *RESNET, "--steps", "2", "--multi-tensor", flag)
        assert rc == 0, out
        assert start_of(events)["practice"]["multi_tensor"] is (flag == "1")
        runs[flag] = losses(events)
    assert runs["1"] == pytest.approx(runs["0"], rel=1e-6)  # step 2 is after one update


@pytest.mark.framework
def test_cudnn_flags_and_amp_level_on_a_cpu_are_recorded_not_applied(env, tmp_path):
    cuda_only = ("--cudnn-exhaustive-search", "1", "--conv-workspace-size-limit", "4096",
                 "--cudnn-batchnorm-spatial-persistent", "1")  # fmt: skip
    rc, out, events = workload(env, tmp_path, *RESNET, "--steps", "1", *cuda_only,
                               "--amp-level", "O2")  # fmt: skip
    assert rc == 0, out
    applied = start_of(events)["practice"]
    assert all(applied[key] == "n/a on cpu (no cuDNN)" for key in CUDNN)
    assert applied["amp_level"] == "n/a (fp32)"


@pytest.mark.framework
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_amp_on_a_cpu_is_reported_unsupported_without_a_traceback(env, tmp_path, level):
    rc, out, events = workload(env, tmp_path, *RESNET, "--steps", "1", "--precision", "amp",
                               "--amp-level", level, "--data-format", "NHWC")  # fmt: skip
    assert rc == 4, out  # the workload's "unsupported" exit
    assert "Traceback" not in out
    (event,) = events
    assert event["event"] == "unsupported" and f"level='{level}'" in event["reason"]


@pytest.mark.framework
def test_the_adapters_own_commands_run_on_cpu_and_parse_for_cuda(env, tmp_path):
    adapter = get_adapter("paddle")
    # CPU: the defaults, end to end (the adapter's argv with the shapes made tiny).
    cpu = resolve_spec("paddle", "resnet50", preset="smoke",
                       overrides={"image_size": 32, "batch_size": 2})  # fmt: skip
    argv = adapter.command(cpu, str(env.python)).argv[2:]
    argv[argv.index("--steps") + 1] = "1"
    rc, out, events = workload(env, tmp_path, *argv)
    assert rc == 0, out
    assert start_of(events)["practice"] == {"data_format": "NCHW", "multi_tensor": True}
    # CUDA: its argv (every practice flag) is accepted by the workload's parser (--describe
    # stops before the device is touched).
    for model in ("resnet50", "bert"):
        cuda = resolve_spec("paddle", model, preset="smoke",
                            overrides={"device": "cuda", "precision": "amp"})  # fmt: skip
        argv = adapter.command(cuda, str(env.python)).argv[2:]
        rc, out, _ = workload(env, tmp_path, *argv, "--describe")
        assert rc == 0, out


@pytest.mark.framework
def test_bert_records_what_does_not_apply_to_it(env, tmp_path):
    rc, out, events = workload(env, tmp_path, *BERT, "--steps", "1", "--multi-tensor", "1",
                               "--data-format", "NHWC")  # fmt: skip
    assert rc == 0, out
    applied = start_of(events)["practice"]
    assert applied["multi_tensor"].startswith("n/a: AdamW has no use_multi_tensor")
    assert applied["data_format"] == "n/a (no convolutions)"
    assert losses(events)[0] > 0
