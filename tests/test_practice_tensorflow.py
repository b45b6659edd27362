"""TensorFlow's best-practice settings: the documented defaults per device, model and precision
(fast), and what each setting really does in the workload on a CPU (framework-marked).

On a CPU the layout switch must not change the numbers: the same seed gives the same weights
and pixels in NHWC and NCHW, so step 1's loss agrees to floating-point tolerance. The CUDA
defaults are only checked as values here; nothing in this file needs a GPU.
"""

import json
import subprocess
from pathlib import Path

import pytest

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.spec import resolve_spec

GPU_FP32 = {"data_format": "channels_first", "gpu_thread_mode": "gpu_private"}
GPU_AMP = {"data_format": "channels_last", "gpu_thread_mode": "gpu_private"}


def spec_for(model: str, **overrides):
    return resolve_spec("tensorflow", model, preset="smoke", overrides=overrides)


@pytest.mark.parametrize(
    "model, overrides, expected",
    [
        ("resnet50", {}, {"data_format": "channels_last"}),
        ("resnet50", {"precision": "amp"}, {"data_format": "channels_last"}),
        ("bert", {}, {}),
        ("resnet50", {"device": "cuda"}, GPU_FP32),
        ("resnet50", {"device": "cuda", "precision": "amp"}, GPU_AMP),
        ("resnet50", {"device": "cuda", "xla": True}, GPU_FP32),
        ("bert", {"device": "cuda"}, {"gpu_thread_mode": "gpu_private"}),
        ("bert", {"device": "cuda", "precision": "amp"}, {"gpu_thread_mode": "gpu_private"}),
    ],
)
def test_practice_defaults_are_the_documented_ones(model, overrides, expected):
    adapter = get_adapter("tensorflow")
    spec = spec_for(model, **overrides)
    assert adapter.practice(spec) == expected
    assert spec.practice == expected  # resolve_spec stored them in the spec
    assert set(expected) <= set(adapter.option_keys(model))  # each one a --set key
    argv = adapter.command(spec, "python").argv
    for key, value in expected.items():
        flag = f"--{key.replace('_', '-')}"
        assert argv[argv.index(flag) + 1] == value


def test_a_set_option_overrides_a_practice_default():
    spec = spec_for("resnet50", device="cuda", options={"data_format": "channels_last"})
    assert spec.practice == {"data_format": "channels_last", "gpu_thread_mode": "gpu_private"}
    assert "data_format" not in spec.options


def test_cuda_check_is_python_that_names_the_build():
    check = get_adapter("tensorflow").launch.cuda_check
    compile(check, "<cuda_check>", "exec")
    assert "list_physical_devices('GPU')" in check and "is_built_with_cuda()" in check


# --------------------------------------------------------------------------------------------
# In the built CPU env (the workload script run directly, tiny shapes)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env():
    return ensure_env(get_adapter("tensorflow").env_spec("cpu"))


def run_workload(env, tmp_path: Path, name: str, *args: str, extra_env=None) -> dict:
    """One run of workload.py; returns its start event, step losses and log."""
    script = get_adapter("tensorflow").folder / "workload.py"
    events = tmp_path / f"{name}.events.jsonl"
    proc = subprocess.run(
        [str(env.python), str(script), "--threads", "2", "--seed", "0", *args],
        capture_output=True, text=True, timeout=900,
        env={**env.run_env(), "DLPERF_EVENTS": str(events), **(extra_env or {})},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    parsed = [json.loads(line) for line in events.read_text().splitlines()]
    (start,) = [e for e in parsed if e["event"] == "start"]
    losses = [e["loss"] for e in parsed if e["event"] == "step"]
    return {"start": start, "losses": losses, "log": proc.stdout}


RESNET = ["--model", "resnet50", "--image-size", "32", "--batch-size", "2", "--steps", "1"]

# Asked of TensorFlow directly, without the workload: does a strided 3x3 NCHW convolution's
# backward pass (input and filter gradients, in a tf.function as the step is) run on this CPU?
# TensorFlow's own CPU kernels take NHWC only ("Conv2DCustomBackpropInputOp only supports
# NHWC"); the oneDNN ones take NCHW too, and TensorFlow turns oneDNN on by default only on CPUs
# with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX (an EPYC before Zen 4 has none of them).
NCHW_PROBE = """
import tensorflow as tf

@tf.function
def grads(x, w):
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = tf.reduce_sum(tf.nn.conv2d(x, w, 2, "SAME", data_format="NCHW"))
    return tape.gradient(y, [x, w])

try:
    with tf.device("/cpu:0"):
        [g.numpy() for g in grads(tf.ones((1, 3, 8, 8)), tf.ones((3, 3, 3, 4)))]
    print("accepted")
except tf.errors.OpError as exc:
    lines = [line.strip() for line in exc.message.splitlines() if line.strip()]
    print("refused:", next((line for line in lines if "NHWC" in line), lines[0]))
"""


def nchw_refused(env, extra_env=None) -> bool:
    proc = subprocess.run(
        [str(env.python), "-c", NCHW_PROBE], capture_output=True, text=True, timeout=300,
        env={**env.run_env(), **(extra_env or {})},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = proc.stdout.strip().splitlines()[-1]
    assert verdict == "accepted" or verdict.startswith("refused: "), proc.stdout
    return verdict != "accepted"


@pytest.mark.framework
@pytest.mark.parametrize(
    "extra_env",
    # this CPU as TensorFlow sets itself up on it; and with oneDNN off, as TensorFlow leaves it
    # on a CPU without the features above: the refusal happens for real on any x86 machine.
    [{}, {"TF_ENABLE_ONEDNN_OPTS": "0"}],
    ids=["this-cpu", "onednn-off"],
)
def test_layout_does_not_change_the_first_loss(env, tmp_path, extra_env):
    nhwc = run_workload(env, tmp_path, "nhwc", *RESNET, "--data-format", "channels_last",
                        extra_env=extra_env)  # fmt: skip
    nchw = run_workload(env, tmp_path, "nchw", *RESNET, "--data-format", "channels_first",
                        extra_env=extra_env)  # fmt: skip
    assert nhwc["start"]["practice"] == {"data_format": "channels_last"}
    refused = nchw_refused(env, extra_env)
    if extra_env:  # TensorFlow's own kernels: NHWC only, whatever the CPU
        assert refused
    applied = nchw["start"]["practice"]["data_format"]
    if refused:  # the honest outcome: the fallback, with TensorFlow's own reason
        assert applied.startswith("channels_last (channels_first refused on this CPU: ")
        assert "NHWC" in applied
    else:  # the layout asked for is the layout trained
        assert applied == "channels_first"
    assert nchw["start"]["practice"] == {"data_format": applied}
    assert f"best practice: data_format {applied}" in nchw["log"]
    # Either way the same seeded network and pixels: the same first loss.
    (loss_nhwc,), (loss_nchw,) = nhwc["losses"], nchw["losses"]
    assert loss_nchw == pytest.approx(loss_nhwc, rel=1e-5)


@pytest.mark.framework
def test_gpu_thread_mode_is_recorded_as_without_effect_on_a_cpu(env, tmp_path):
    bert = ["--model", "bert", "--seq-len", "16", "--batch-size", "2", "--steps", "1"]
    run = run_workload(env, tmp_path, "bert", *bert, "--gpu-thread-mode", "gpu_private")
    assert run["start"]["practice"] == {"gpu_thread_mode": "gpu_private (no effect: no GPU)"}
    assert "best practice: gpu_thread_mode gpu_private (no effect: no GPU)" in run["log"]
    assert len(run["losses"]) == 1 and run["losses"][0] is not None


@pytest.mark.framework
def test_cuda_check_fails_with_one_line_on_a_cpu_build(env):
    proc = subprocess.run(
        [str(env.python), "-c", get_adapter("tensorflow").launch.cuda_check],
        capture_output=True, text=True, timeout=300, env=env.run_env(),
    )  # fmt: skip
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("tensorflow 2.") and "(CUDA build: False) sees no GPU" in last
