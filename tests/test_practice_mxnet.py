"""MXNet's best-practice settings (adapters/mxnet): the documented defaults per device, and on
a CPU each setting run for real in the built env with tiny shapes: it applies, falls back, or is
reported unsupported, and never changes the model's numbers. The CUDA values come from the
upstream scripts cited in MXNetAdapter.practice; no GPU runs them here."""

import json
import subprocess
from pathlib import Path

import pytest

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.spec import resolve_spec

RESNET = ["--model", "resnet50", "--image-size", "32", "--batch-size", "2"]
BERT = ["--model", "bert", "--seq-len", "16", "--batch-size", "2"]
ALL_NCHW = {"conv_layout": "NCHW", "batchnorm_layout": "NCHW", "pooling_layout": "NCHW"}
ALL_NHWC = dict.fromkeys(ALL_NCHW, "NHWC")


def practice(model: str, **overrides: object) -> dict[str, str]:
    return resolve_spec("mxnet", model, preset="smoke", overrides=overrides).practice


def test_practice_defaults_follow_the_official_gpu_scripts_and_stay_nchw_on_a_cpu():
    """Fast: no framework is imported on the host."""
    assert practice("resnet50") == {**ALL_NCHW, "optimizer_aggregation": "60"}
    assert practice("bert") == {"optimizer_aggregation": "4"}
    assert practice("resnet50", device="cpu", precision="amp", xla=True) == practice("resnet50")
    cuda = {"device": "cuda"}
    # NHWC with fp16 only, as DeepLearningExamples' RN50v1.5 runner does
    assert practice("resnet50", **cuda) == {
        **ALL_NCHW, "optimizer_aggregation": "60", "cudnn_autotune": "1",
    }  # fmt: skip
    assert practice("resnet50", **cuda, precision="amp") == {
        **ALL_NHWC, "optimizer_aggregation": "60", "cudnn_autotune": "1",
    }  # fmt: skip
    assert practice("resnet50", **cuda, precision="amp", xla=True) == {
        **ALL_NHWC, "optimizer_aggregation": "60", "cudnn_autotune": "1", "cuda_graphs": "1",
        "forward_bulk_size": "999", "backward_bulk_size": "25",
    }  # fmt: skip
    assert practice("resnet50", **cuda, mode="infer", xla=True) == {
        **ALL_NCHW, "cudnn_autotune": "1", "cuda_graphs": "1",
    }  # fmt: skip
    assert practice("bert", **cuda, precision="amp", xla=True) == {"optimizer_aggregation": "4"}
    assert practice("bert", mode="infer") == {}


def test_every_practice_key_is_a_set_key_and_a_set_wins():
    adapter = get_adapter("mxnet")
    for model in adapter.models:
        gpu = {"device": "cuda", "precision": "amp", "xla": True}
        spec = resolve_spec("mxnet", model, preset="smoke", overrides=gpu)
        assert set(spec.practice) <= set(adapter.option_keys(model))
    spec = resolve_spec(
        "mxnet", "resnet50", preset="smoke",
        overrides={"device": "cuda", "precision": "amp", "options": {"conv_layout": "NCHW"}},
    )  # fmt: skip
    assert spec.practice["conv_layout"] == "NCHW" and spec.practice["batchnorm_layout"] == "NHWC"
    argv = adapter.command(spec, "python").argv
    assert argv[argv.index("--conv-layout") + 1] == "NCHW"
    assert argv[argv.index("--optimizer-aggregation") + 1] == "60"
    compile(adapter.launch.cuda_check, "cuda_check", "exec")  # runs in the user's interpreter


# ------------------------------------------------------------------------ in the built env


@pytest.fixture(scope="module")
def env():
    return ensure_env(get_adapter("mxnet").env_spec("cpu"))


def script() -> str:
    return str(get_adapter("mxnet").folder / "workload.py")


def run(env, tmp_path: Path, argv: list[str], name: str) -> tuple[int, str, list[dict]]:
    """The workload (or any argv after the interpreter) with its events file; 2 threads."""
    events = tmp_path / f"{name}.jsonl"
    run_env = {**env.run_env(), "DLPERF_EVENTS": str(events), "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([str(env.python), *argv], capture_output=True, text=True,
                          env=run_env, timeout=900)  # fmt: skip
    lines = events.read_text().splitlines() if events.exists() else []
    return proc.returncode, proc.stdout + proc.stderr, [json.loads(line) for line in lines]


def ok(result: tuple[int, str, list[dict]]) -> tuple[dict, list[float]]:
    """The start event's practice and every step's loss of a run that must have succeeded."""
    rc, output, events = result
    assert rc == 0, output[-2000:]
    (start,) = [e for e in events if e["event"] == "start"]
    assert "best practice: " in output
    return start["practice"], [e["loss"] for e in events if e["event"] == "step"]


def resnet(env, tmp_path: Path, name: str, *flags: str, steps: int = 1):
    return run(env, tmp_path, [script(), *RESNET, "--steps", str(steps), *flags], name)


def bert(env, tmp_path: Path, name: str, *flags: str, steps: int = 2):
    return run(env, tmp_path, [script(), *BERT, "--steps", str(steps), *flags], name)


@pytest.mark.framework
def test_layouts_run_where_mxnet_can_and_keep_the_first_loss(env, tmp_path):
    base, base_loss = ok(resnet(env, tmp_path, "nchw"))
    assert base == {**ALL_NCHW, "optimizer_aggregation": 4}  # MXNet's own SGD default
    # BatchNorm and pooling in NHWC around NCHW convolutions (transposes between them)
    flags = ["--batchnorm-layout", "NHWC", "--pooling-layout", "NHWC"]
    mixed, mixed_loss = ok(resnet(env, tmp_path, "mixed", *flags))
    assert mixed == {**base, "batchnorm_layout": "NHWC", "pooling_layout": "NHWC"}
    assert mixed_loss[0] == pytest.approx(base_loss[0], rel=1e-5)
    # NHWC convolutions: MXNet's CPU kernels refuse them; unsupported, with a reason
    rc, output, events = resnet(env, tmp_path, "nhwc", "--conv-layout", "NHWC", *flags)
    assert rc == 4 and "Traceback" not in output, output[-2000:]
    (unsupported,) = [e for e in events if e["event"] == "unsupported"]
    assert unsupported["reason"].startswith("conv_layout NHWC: MXNet 1.9.1 cannot run NHWC")
    assert not [e for e in events if e["event"] in ("start", "step")]


@pytest.mark.framework
def test_nhwc_convolutions_get_the_nchw_weights_transposed_and_the_same_count(env, tmp_path):
    """What a GPU's NHWC run starts from (checked without running a convolution)."""
    folder = get_adapter("mxnet").folder
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import mxnet as mx, numpy as np, workload as w\n"
        "def weights(layout):\n"
        "    args = w.parse_args(['--model', 'resnet50', '--conv-layout', layout,\n"
        "                         '--batchnorm-layout', layout, '--pooling-layout', layout])\n"
        "    mx.random.seed(0)\n"
        "    net = w.build_model(args, mx.cpu())\n"
        "    return [p.data().asnumpy() for p in net.collect_params().values()]\n"
        "nchw, nhwc = weights('NCHW'), weights('NHWC')\n"
        "assert len(nchw) == len(nhwc)\n"
        "convs = 0\n"
        "for a, b in zip(nchw, nhwc):\n"
        "    if a.ndim == 4:\n"
        "        convs += 1\n"
        "        b = b.transpose(0, 3, 1, 2)\n"
        "    assert np.array_equal(a, b)\n"
        "print(f'convs={convs}')\n"
    )
    rc, output, _ = run(env, tmp_path, ["-c", code, str(folder)], "weights")
    assert rc == 0 and "convs=53" in output.split(), output[-2000:]  # every convolution
    for layout in ("NCHW", "NHWC"):
        flags = ["--conv-layout", layout, "--batchnorm-layout", layout, "--pooling-layout", layout]
        rc, output, _ = run(env, tmp_path, [script(), *RESNET, "--describe", *flags], "d")
        (described,) = [line for line in output.splitlines() if line.startswith('{"params"')]
        assert rc == 0 and json.loads(described)["params"] == 25_557_032


@pytest.mark.framework
def test_optimizer_aggregation_is_the_same_arithmetic(env, tmp_path):
    # the second loss is the first after an update
    off, off_loss = ok(resnet(env, tmp_path, "sgd1", "--optimizer-aggregation", "1", steps=2))
    on, on_loss = ok(resnet(env, tmp_path, "sgd60", "--optimizer-aggregation", "99", steps=2))
    assert off["optimizer_aggregation"] == 1
    assert on["optimizer_aggregation"] == "60 (99 asked; the kernel takes 0-60)"
    assert on_loss == pytest.approx(off_loss, rel=1e-6)
    off, off_loss = ok(bert(env, tmp_path, "adamw"))
    on, on_loss = ok(bert(env, tmp_path, "adamw4", "--optimizer-aggregation", "4"))
    assert off == {"optimizer_aggregation": 0} and on == {"optimizer_aggregation": 4}
    assert on_loss == pytest.approx(off_loss, rel=1e-6)


@pytest.mark.framework
def test_gpu_settings_on_a_cpu_say_so_and_bulk_sizes_apply_to_a_hybridized_graph(env, tmp_path):
    gpu = ["--cudnn-autotune", "1", "--cuda-graphs", "1"]
    bulk = ["--forward-bulk-size", "999", "--backward-bulk-size", "25"]
    eager, eager_loss = ok(resnet(env, tmp_path, "eager", *gpu, *bulk))
    assert eager["cudnn_autotune"] == "unused (no cuDNN on a CPU)"
    assert eager["cuda_graphs"] == "off (GPU only)"
    for key in ("forward_bulk_size", "backward_bulk_size"):
        assert eager[key] == "unused (needs --xla, training)"
    hybrid, hybrid_loss = ok(resnet(env, tmp_path, "hybrid", "--xla", *bulk))
    assert hybrid["forward_bulk_size"] == 999 and hybrid["backward_bulk_size"] == 25
    assert hybrid_loss[0] == pytest.approx(eager_loss[0], rel=1e-5)


@pytest.mark.framework
def test_the_adapter_command_applies_the_cpu_defaults(env, tmp_path):
    spec = resolve_spec(
        "mxnet", "resnet50", preset="smoke",
        overrides={"image_size": 32, "batch_size": 2, "skip": 0, "measure": 1},
    )  # fmt: skip
    command = get_adapter("mxnet").command(spec, str(env.python))
    assert not any(k.startswith("MXNET_") for k in command.env)  # the workload sets its own
    applied, _ = ok(run(env, tmp_path, command.argv[1:], "adapter"))
    assert applied == {**ALL_NCHW, "optimizer_aggregation": 60}
    assert {k: str(v) for k, v in applied.items()} == spec.practice
