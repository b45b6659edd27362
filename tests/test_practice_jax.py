"""JAX's best-practice settings: the documented defaults per device, model, precision and mode
(fast: JaxAdapter.practice, no jax imported), and what each `--set` really does in the CPU env
(framework-marked, tiny shapes).

Donation changes where XLA writes the new train state, not what it computes: the same seed
gives the same losses step for step with and without it. The CUDA defaults (float16 with
DynamicScale, the latency-hiding scheduler) are checked as values only: nothing here needs a
GPU, and float16 runs on the CPU only through the workload's own train step on a tiny model
(XLA compiles a float16 ResNet50 or BERT step for minutes there, emulating the dtype).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.runner import run_benchmark
from dlperf.schema import ResultStatus
from dlperf.spec import check_run, resolve_spec

JAX = get_adapter("jax")
TINY = {"image_size": 32, "batch_size": 2, "skip": 1, "measure": 2, "repeats": 1}
BERT_TINY = {"seq_len": 16, "batch_size": 2, "skip": 1, "measure": 2, "repeats": 1}

TRAIN_CPU = {"donate": "1"}
TRAIN_CUDA = {"donate": "1", "latency_hiding_scheduler": "1"}


@pytest.mark.parametrize("model", ["resnet50", "bert"])
@pytest.mark.parametrize(
    "device, precision, mode, expected",
    [
        ("cpu", "fp32", "train", TRAIN_CPU),
        ("cpu", "amp", "train", {**TRAIN_CPU, "amp_dtype": "bfloat16"}),
        ("cpu", "fp32", "infer", {}),
        ("cpu", "amp", "infer", {"amp_dtype": "bfloat16"}),
        ("cuda", "fp32", "train", TRAIN_CUDA),
        ("cuda", "amp", "train", {**TRAIN_CUDA, "amp_dtype": "float16"}),
        ("cuda", "fp32", "infer", {}),
        ("cuda", "amp", "infer", {"amp_dtype": "float16"}),
    ],
)
def test_practice_defaults_are_the_documented_ones(model, device, precision, mode, expected):
    overrides = {"device": device, "precision": precision, "mode": mode}
    spec = resolve_spec("jax", model, preset="smoke", overrides=overrides)
    assert JAX.practice(spec) == expected
    assert spec.practice == expected  # resolve_spec stored them in the spec
    assert set(expected) <= set(JAX.option_keys(model))  # each one a --set key
    argv = JAX.command(spec, "python").argv
    for key, value in expected.items():
        assert argv[argv.index(f"--{key.replace('_', '-')}") + 1] == value
    for key in {"donate", "amp_dtype", "latency_hiding_scheduler"} - set(expected):
        assert f"--{key.replace('_', '-')}" not in argv  # the workload's own default: off


def test_a_set_option_overrides_a_practice_default():
    spec = resolve_spec("jax", "resnet50", preset="smoke",
                        overrides={"device": "cuda", "options": {"donate": "0"}})  # fmt: skip
    assert spec.practice == {"donate": "0", "latency_hiding_scheduler": "1"}
    assert "donate" not in spec.options
    argv = JAX.command(spec, "python").argv
    assert argv[argv.index("--donate") + 1] == "0"


def test_cuda_check_is_python_that_asks_jax_for_a_gpu():
    check = JAX.launch.cuda_check
    compile(check, "<cuda_check>", "exec")  # runs in the user's interpreter
    assert "jax.devices('gpu')" in check


# --------------------------------------------------------------------------------------------
# In the built CPU env: real runs through the runner, as `dlperf run jax ... --set` makes them
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env():
    return ensure_env(JAX.env_spec("cpu"))


def run(tmp_path: Path, model: str, shapes: dict, options: dict, **overrides) -> dict:
    """One tiny run; returns its start event and the losses of its step events."""
    spec = resolve_spec("jax", model, preset="smoke",
                        overrides={**shapes, "options": options, **overrides})  # fmt: skip
    folder = tmp_path / "_".join(f"{key}={value}" for key, value in sorted(options.items()))
    result, _ = run_benchmark(check_run(spec), folder)
    assert result.status == ResultStatus.ok, result.warnings
    (repeat,) = result.repeats
    events = [json.loads(line) for line in Path(repeat.events_path).read_text().splitlines()]
    (start,) = [e for e in events if e["event"] == "start"]
    assert start["framework"] == "jax" and start["practice"] == repeat.workload["practice"]
    return {"start": start, "losses": [e["loss"] for e in events if e["event"] == "step"]}


@pytest.mark.framework
def test_cuda_check_fails_with_jaxs_reason_in_the_cpu_env(env):
    argv = [str(env.python), "-c", JAX.launch.cuda_check]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env.run_env())
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("jax 0.") and "sees no GPU: jax.devices('gpu') finds no CUDA" in last


@pytest.mark.framework
def test_donation_does_not_change_the_losses(env, tmp_path):
    kept = run(tmp_path, "resnet50", TINY, {"donate": "0"})
    donated = run(tmp_path, "resnet50", TINY, {"donate": "1"})
    assert kept["start"]["practice"]["donate"] == "0"
    assert donated["start"]["practice"]["donate"] == "1"
    assert len(kept["losses"]) == len(donated["losses"]) == 3
    # The same program writing into other buffers: the same numbers, step for step.
    assert donated["losses"] == pytest.approx(kept["losses"], rel=1e-6)
    assert kept["losses"][0] != kept["losses"][-1]  # the weights really update


@pytest.fixture(scope="module")
def bert_amp(env, tmp_path_factory):
    """One BERT run with --amp, --set amp_dtype=bfloat16 and --set latency_hiding_scheduler=1
    (a CUDA flag) on the CPU: both settings' tests read it."""
    options = {"amp_dtype": "bfloat16", "latency_hiding_scheduler": "1"}
    return run(tmp_path_factory.mktemp("bert-amp"), "bert", BERT_TINY, options, precision="amp")


@pytest.mark.framework
def test_amp_dtype_bfloat16_runs_in_bfloat16(bert_amp):
    start = bert_amp["start"]
    assert (start["precision"], start["amp_dtype"]) == ("amp", "bfloat16")
    assert start["practice"]["amp_dtype"] == "bfloat16"  # no DynamicScale: bf16 needs none
    assert len(bert_amp["losses"]) == 3 and all(x == x for x in bert_amp["losses"])  # not NaN


@pytest.mark.framework
def test_latency_hiding_scheduler_is_recorded_as_without_effect_on_a_cpu(bert_amp):
    practice = bert_amp["start"]["practice"]
    assert practice["latency_hiding_scheduler"] == "1 (no effect: no GPU)"
    assert practice["donate"] == "1"  # the training default, beside it


@pytest.mark.framework
def test_micro_linear_with_amp_runs_in_bfloat16_on_a_cpu(env, tmp_path):
    overrides = {"precision": "amp", "repeats": 1, "skip": 1, "measure": 2}
    spec = resolve_spec("jax", "linear", preset="smoke", overrides=overrides)
    result, _ = run_benchmark(check_run(spec), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (repeat,) = result.repeats
    assert repeat.workload["amp_dtype"] == "bfloat16"
    assert result.metrics.score_unit == "TF/s" and result.metrics.score > 0


# The workload's own train step under float16 with Flax's DynamicScale, on a model small enough
# that XLA compiles it in seconds on a CPU (a float16 ResNet50 takes minutes): overflowing
# steps keep the weights and halve the scale, finite ones update, and the step compiles once.
DYNAMIC_SCALE = """
import sys, types
sys.path.insert(0, {folder!r})
import jax, jax.numpy as jnp, optax
from flax import linen as nn
import workload as w

class Tiny(nn.Module):
    @nn.compact
    def __call__(self, x, train=False):
        x = nn.BatchNorm(use_running_average=not train, dtype=jnp.float16)(x.astype(jnp.float16))
        return nn.Dense(10, dtype=jnp.float16)(x.reshape(x.shape[0], -1)).astype(jnp.float32)

args = types.SimpleNamespace(model="resnet50", seed=0)
model, tx = Tiny(), optax.sgd(0.1)
variables = model.init(jax.random.PRNGKey(0), jnp.ones((2, 4, 4, 3)), train=False)
x = jax.random.normal(jax.random.PRNGKey(1), (2, 4, 4, 3))
state = {{"params": variables["params"], "batch_stats": variables["batch_stats"],
          "opt_state": tx.init(variables["params"]), "step": jnp.zeros((), jnp.int32),
          "scale": w.loss_scale()}}
step = jax.jit(w.make_train_step(args, model, tx, scaled=True))
huge = (x * 1e4, jnp.array([1, 2]))  # float16 overflows: the update is skipped
state2, loss = step(state, huge)
same = jax.tree_util.tree_all(jax.tree_util.tree_map(
    lambda a, b: bool((a == b).all()), state2["params"], state["params"]))
state3, _ = step(state2, (x, jnp.array([1, 2])))  # finite: the weights move
moved = not jax.tree_util.tree_all(jax.tree_util.tree_map(
    lambda a, b: bool((a == b).all()), state3["params"], state2["params"]))
print(float(state["scale"].scale), float(state2["scale"].scale), same, moved,
      step._cache_size())
"""


@pytest.mark.framework
def test_float16_steps_skip_overflows_through_dynamic_scale(env):
    folder = str(
        Path(JAX.command(resolve_spec("jax", "resnet50", preset="smoke"), "p").argv[1]).parent
    )
    out = subprocess.run([str(env.python), "-c", DYNAMIC_SCALE.format(folder=folder)],
                         capture_output=True, text=True, env=env.run_env(), check=True)  # fmt: skip
    first, after_overflow, kept, moved, compiled = out.stdout.split()[-5:]
    assert (float(first), float(after_overflow)) == (65536.0, 32768.0)
    assert (kept, moved, compiled) == ("True", "True", "1")
