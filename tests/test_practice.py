"""Each framework's best practice as named, switchable settings (the core, and PyTorch's).

The other frameworks' settings are tested in test_practice_<framework>.py.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf import DlperfError
from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.identity import benchmark_id, settings_of, spec_key
from dlperf.spec import resolve_spec
from dlperf.sweep import expand

PYTORCH = get_adapter("pytorch")


def test_pytorch_best_practice_depends_on_device_model_and_mode():
    cuda = resolve_spec("pytorch", "resnet50", overrides={"device": "cuda", "precision": "amp"})
    assert cuda.practice == {"channels_last": "1", "cudnn_benchmark": "1", "fused_optimizer": "1"}
    cpu = resolve_spec("pytorch", "resnet50")  # 224 px: channels_last measured faster
    assert cpu.practice == {"channels_last": "1", "fused_optimizer": "1"}
    small = resolve_spec("pytorch", "resnet50", preset="smoke")  # 64 px: measured slower
    assert small.practice["channels_last"] == "0"
    bert = resolve_spec("pytorch", "bert", overrides={"device": "cuda"})
    assert bert.practice == {"cudnn_benchmark": "1", "fused_optimizer": "1", "sdpa": "1"}
    infer = resolve_spec("pytorch", "resnet50", overrides={"device": "cuda", "mode": "infer"})
    assert "fused_optimizer" not in infer.practice  # no optimizer in inference
    assert "fused_optimizer" not in resolve_spec("pytorch", "dlrm").practice  # sparse gradients


def test_a_set_of_a_practice_key_is_an_ablation_of_the_same_benchmark():
    default = resolve_spec("pytorch", "resnet50", overrides={"device": "cuda"})
    off = resolve_spec(
        "pytorch", "resnet50", overrides={"device": "cuda", "options": {"channels_last": "0"}}
    )
    assert off.practice["channels_last"] == "0" and "channels_last" not in off.options
    # The same benchmark with another setting: an ablation, never a new benchmark.
    assert benchmark_id(off) == benchmark_id(default)
    assert settings_of(off)["channels_last"] == "0" and settings_of(default)["channels_last"] == "1"
    assert spec_key(off) != spec_key(default)
    argv = PYTORCH.command(off, "python").argv
    assert argv[argv.index("--channels-last") + 1] == "0"
    with pytest.raises(DlperfError, match=r"key\(s\) for pytorch bert: channels_last"):
        resolve_spec("pytorch", "bert", overrides={"options": {"channels_last": "1"}})


def test_official_implementations_take_no_practice_settings(tmp_path):
    spec = resolve_spec(
        "pytorch",
        "resnet50",
        overrides={"impl": "official", "device": "cuda", "profile": "dlperf-2020"},
    )
    assert spec.practice == {}


def test_cpu_runs_get_the_same_thread_budget_in_every_framework():
    from dlperf.system import cpu_budget

    for name in ("pytorch", "tensorflow", "paddle", "mxnet", "oneflow", "jax"):
        spec = resolve_spec(name, "resnet50", preset="smoke")
        argv = get_adapter(name).command(spec, "python").argv
        assert argv[argv.index("--threads") + 1] == str(cpu_budget()), name
        assert "threads" not in spec.options  # not part of the configuration's identity
        given = spec.model_copy(update={"options": {"threads": "1"}})
        argv = get_adapter(name).command(given, "python").argv
        assert argv[argv.index("--threads") + 1] == "1"


def test_a_sweep_ablates_a_practice_setting_and_takes_an_interpreter_per_framework(tmp_path):
    plan = expand(
        {
            "preset": "smoke",
            "frameworks": ["pytorch"],
            "models": ["resnet50"],
            "device": "cuda",
            "set": {"channels_last": ["0", "1"]},
            "python": {"pytorch": sys.executable},  # an interpreter that exists
        }
    )
    assert sorted(s.practice["channels_last"] for s in plan.specs) == ["0", "1"]
    assert plan.pythons == {"pytorch": Path(sys.executable)}
    with pytest.raises(DlperfError, match="not in the frameworks"):
        expand({"frameworks": ["pytorch"], "models": ["bert"], "python": {"mxnet": sys.executable}})


def _first_losses(tmp_path: Path, name: str, *args: str) -> tuple[list[float], dict]:
    env = ensure_env(PYTORCH.env_spec("cpu"))
    events = tmp_path / f"{name}.jsonl"
    argv = [str(env.python), str(PYTORCH.folder / "workload.py"), "--batch-size", "2"]
    argv += ["--steps", "2", "--threads", "1", *args]
    run_env = {**env.run_env(), "DLPERF_EVENTS": str(events)}
    out = subprocess.run(argv, capture_output=True, text=True, env=run_env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    start = next(e for e in lines if e["event"] == "start")
    losses = [e["loss"] for e in lines if e["event"] == "step"]
    return losses, start


@pytest.mark.framework
def test_pytorch_layout_and_kernels_do_not_change_the_math(tmp_path):
    resnet = ("--model", "resnet50", "--image-size", "32")
    base, start = _first_losses(tmp_path, "nchw", *resnet, "--channels-last", "0")
    assert start["practice"] == {"channels_last": False, "fused_optimizer": "torch default"}
    nhwc, start = _first_losses(tmp_path, "nhwc", *resnet, "--channels-last", "1")
    assert start["practice"]["channels_last"] is True
    assert nhwc[0] == pytest.approx(base[0], rel=1e-5)  # the same forward in another layout
    fused, start = _first_losses(tmp_path, "fused", *resnet, "--fused-optimizer", "1")
    assert start["practice"]["fused_optimizer"] == "fused"  # torch 2.13 has fused SGD on CPU
    assert fused[1] == pytest.approx(base[1], rel=1e-4)  # the same update, one kernel
    bert = ("--model", "bert", "--seq-len", "16")
    sdpa, start = _first_losses(tmp_path, "sdpa", *bert, "--sdpa", "1")
    math_, start = _first_losses(tmp_path, "math", *bert, "--sdpa", "0")
    assert start["practice"]["sdpa"] is False
    # dropout draws differ between the two kernels: compare with dropout's own spread
    assert math_[0] == pytest.approx(sdpa[0], rel=0.02)
