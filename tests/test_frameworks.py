"""Real training in every framework's isolated env (built on first use, then reused). Slow: marked.

The same models, measured the same way: parameter counts, FLOPs, weights that really update,
the outside clock agreeing with the workload's marks, and AMP/XLA that run or say why not.
"""

import json
import subprocess
from pathlib import Path

import pytest
from conftest import check_mfu

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.runner import run_benchmark
from dlperf.schema import RepeatStatus, ResultStatus
from dlperf.spec import check_run, resolve_spec

FRAMEWORKS = ["pytorch", "tensorflow", "paddle", "mxnet", "oneflow", "jax"]


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_host_adapter_is_pinned_and_builds_the_common_command(name):
    """Fast: no framework is imported on the host."""
    adapter = get_adapter(name)
    for device in ("cpu", "cuda"):
        reqs = adapter.env_spec(device).requirements
        assert reqs and all("==" in r for r in reqs), reqs
    spec = resolve_spec(name, "bert", preset="smoke", overrides={"xla": True, "precision": "amp"})
    argv = adapter.command(spec, "python").argv
    assert argv[1].endswith("workload.py")
    assert argv[argv.index("--model") + 1] == "bert" and "--xla" in argv
    assert argv[argv.index("--precision") + 1] == "amp"
    assert argv[argv.index("--seq-len") + 1] == "32"


@pytest.fixture(
    scope="module", params=[pytest.param(f, marks=pytest.mark.framework) for f in FRAMEWORKS]
)
def framework(request):
    ensure_env(get_adapter(request.param).env_spec("cpu"))
    return request.param


@pytest.fixture
def env(framework):
    return ensure_env(get_adapter(framework).env_spec("cpu"))


@pytest.mark.parametrize(
    "model, params, flops_range",
    [
        ("resnet50", 25_557_032, (1.9e9, 2.1e9)),  # 24.5 GFLOPs at 224 px, scaled to 64 px
        ("bert", 110_106_428, (20e9, 22e9)),  # seq 32
    ],
)
def test_smoke_run_trains_and_reports_the_model(tmp_path, framework, model, params, flops_range):
    spec = resolve_spec(framework, model, preset="smoke", overrides={"repeats": 2})
    result, path = run_benchmark(check_run(spec), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    assert result.model.params == params
    assert flops_range[0] < result.model.flops_per_sample < flops_range[1]
    assert result.environment.framework_version
    assert result.metrics.throughput.median > 0
    assert result.metrics.achieved_flops > 0
    check_mfu(result)  # or the reason there is none: measured on a busy machine
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


def test_parameter_counts_do_not_depend_on_shapes(framework, env):
    spec = resolve_spec(framework, "resnet50", preset="smoke")
    script = get_adapter(framework).command(spec, str(env.python)).argv[1]
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
def test_amp_and_compile_paths_run_or_say_why_not(tmp_path, framework, overrides):
    # bf16 on CPU; the framework's compiler for --xla. Tiny shapes: this is a path test.
    spec = resolve_spec(
        framework,
        "resnet50",
        preset="smoke",
        overrides={"repeats": 1, "skip": 1, "measure": 2, "image_size": 32, "batch_size": 2,
                   "timeout_s": 900, **overrides},
    )  # fmt: skip
    result, _ = run_benchmark(check_run(spec), tmp_path)
    (repeat,) = result.repeats
    if framework == "jax" and overrides.get("xla"):  # every jax step is XLA: no switch to turn
        assert repeat.status == RepeatStatus.unsupported, repeat.message
        assert repeat.message.startswith("not supported: --xla: jax always compiles with XLA")
    if repeat.status == RepeatStatus.unsupported:  # allowed, with a reason; never a wrong label
        assert repeat.message.startswith("not supported: ") and len(repeat.message) > 20
        return
    assert result.status == ResultStatus.ok, result.warnings
    start = repeat.workload
    if overrides.get("precision") == "amp":
        assert start["amp_dtype"] == "bfloat16"
    else:
        assert start["xla"] is True


ZOO_SMOKE = ["resnet18", "resnet34", "resnet101", "resnet152", "lstm", "dlrm", "gpt2-small"]
# Too slow or big for a 2-core CI run (gpt2-xl alone needs ~25 GB to train): described only.
ZOO_DESCRIBED = ["gpt2-medium", "gpt2-large", "bert-large"]


@pytest.mark.framework
@pytest.mark.parametrize("model", ZOO_SMOKE)
def test_superbench_families_and_dlrm_train_in_pytorch(tmp_path, model):
    from dlperf.models import MODELS

    spec = resolve_spec("pytorch", model, preset="smoke", overrides={"repeats": 1})
    result, _ = run_benchmark(check_run(spec), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    assert result.model.params == MODELS[model].params
    assert result.model.flops_per_sample > 0


@pytest.mark.framework
def test_large_superbench_models_have_the_catalog_parameter_counts():
    from dlperf.models import MODELS

    env = ensure_env(get_adapter("pytorch").env_spec("cpu"))
    for model in ZOO_DESCRIBED:
        spec = resolve_spec("pytorch", model, preset="smoke")
        argv = [*get_adapter("pytorch").command(spec, str(env.python)).argv, "--describe"]
        out = subprocess.run(argv, capture_output=True, text=True, env=env.run_env(), check=True)
        assert json.loads(out.stdout.strip().splitlines()[-1])["params"] == MODELS[model].params
