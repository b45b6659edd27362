"""Real PyTorch training in its isolated env (built on first use, then reused). Slow: marked."""

import json
import subprocess
from pathlib import Path

import pytest

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.runner import resolve_spec, run_benchmark
from dlperf.schema import ResultStatus

pytestmark = pytest.mark.framework


@pytest.fixture(scope="module")
def env():
    return ensure_env(get_adapter("pytorch").env_spec("cpu"))


@pytest.mark.parametrize(
    "model, params, flops_range",
    [
        ("resnet50", 25_557_032, (1.9e9, 2.1e9)),  # 24.5 GFLOPs at 224 px, scaled to 64 px
        ("bert", 110_106_428, (20e9, 22e9)),  # seq 32
    ],
)
def test_smoke_run_trains_and_reports_the_model(tmp_path, env, model, params, flops_range):
    spec = resolve_spec("pytorch", model, preset="smoke", overrides={"repeats": 2})
    result, path = run_benchmark(spec, tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    assert result.model.params == params
    assert flops_range[0] < result.model.flops_per_sample < flops_range[1]
    assert result.environment.framework_version.startswith("2.13.0")
    assert result.metrics.throughput.median > 0
    assert result.metrics.achieved_flops > 0 and 0 < result.metrics.mfu < 2
    stored = json.loads(path.read_text())
    assert stored["spec"]["batch_size"] == spec.batch_size
    for repeat in result.repeats:
        # fidelity: the host saw the window's log lines as far apart as the workload timed it
        assert repeat.observed_elapsed_s == pytest.approx(repeat.window.elapsed_s, rel=0.02)
        assert sum(repeat.step_times_s) == pytest.approx(repeat.window.elapsed_s)
        events = [json.loads(line) for line in Path(repeat.events_path).read_text().splitlines()]
        steps = [e for e in events if e["event"] == "step"]
        assert len(steps) == spec.steps
        assert steps[0]["loss"] != steps[-1]["loss"]  # the weights really update
        assert events[-1]["event"] == "end"


def test_parameter_counts_do_not_depend_on_shapes(env):
    script = (
        get_adapter("pytorch")
        .command(resolve_spec("pytorch", "resnet50", preset="smoke"), str(env.python))
        .argv[1]
    )
    for model, shape in (("resnet50", ["--image-size", "32"]), ("bert", ["--seq-len", "16"])):
        out = subprocess.run(
            [str(env.python), script, "--model", model, "--batch-size", "1", "--steps", "1",
             *shape, "--describe"],
            capture_output=True, text=True, env=env.run_env(), check=True,
        )  # fmt: skip
        described = json.loads(out.stdout.strip().splitlines()[-1])
        expected = 25_557_032 if model == "resnet50" else 110_106_428
        assert described["params"] == expected


@pytest.mark.parametrize("overrides", [{"precision": "amp"}, {"xla": True}])
def test_amp_and_compile_paths_run(tmp_path, env, overrides):
    # bf16 autocast on CPU; torch.compile (inductor) for --xla. Tiny shapes: this is a path test.
    spec = resolve_spec(
        "pytorch",
        "resnet50",
        preset="smoke",
        overrides={"repeats": 1, "skip": 1, "measure": 2, "image_size": 32, "batch_size": 2,
                   "timeout_s": 900, **overrides},
    )  # fmt: skip
    result, _ = run_benchmark(spec, tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    start = result.repeats[0].workload
    if overrides.get("precision") == "amp":
        assert start["amp_dtype"] == "bfloat16"
    else:
        assert start["xla"] is True
