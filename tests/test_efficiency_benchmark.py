"""benchmarks/efficiency.py and scripts/gpu-check, the one prepared check for a GPU node.

The pairing and noise verdict are pure functions, tested on the numbers issue 23 saw (no
timings). The framework-marked tests run `scripts/gpu-check --device cpu --tiny` end to end:
wheels prepared from PyPI, installed into a private folder for an interpreter that has torch
(the built PyTorch env standing in for the node's python3), every row measured, so that no
refactor can break the check unseen until the day a GPU is lent.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf.stats import median_ci_ranks

ROOT = Path(__file__).resolve().parents[1]
GPU_CHECK = ROOT / "scripts" / "gpu-check"


def _load_efficiency():
    path = ROOT / "benchmarks" / "efficiency.py"
    spec = importlib.util.spec_from_file_location("efficiency_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


eff = _load_efficiency()


# --------------------------------------------------------------------------------------------
# Pairs and their noise verdict (pure)
# --------------------------------------------------------------------------------------------


def test_each_run_is_held_against_the_run_of_its_round():
    ours, theirs = [10.0, 30.0, 20.0], [20.0, 15.0, 10.0]
    assert eff.pair_ratios(ours, theirs) == (0.5, 2.0, 2.0)
    # The median of the pairs, not median(ours) / median(theirs) = 20 / 15.
    assert eff.summarize_pairs(ours, theirs).median == 2.0


def test_pairs_need_one_run_each():
    with pytest.raises(ValueError, match="3 runs against 2"):
        eff.pair_ratios([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no pairs"):
        eff.summarize_pairs([], [])


def test_three_pairs_that_agree_show_a_real_gap():
    # Issue 23: 0.89 printed from pairs of 0.91 / 0.95 / 0.88; the pairs agree within 5 %.
    s = eff.summarize_pairs([0.91, 0.95, 0.88], [1.0, 1.0, 1.0])
    assert s.median == 0.91 and (s.low, s.high) == (0.88, 0.95)
    assert s.interval.startswith("min-max of 3 pairs (too few for a 95% CI)")
    assert s.reach == pytest.approx(0.04 / 0.91)
    assert not s.noisy and s.reasons == ()
    assert eff.ratio_text(s) == "**0.91**"


def test_five_pairs_that_disagree_are_marked_noisy():
    # Issue 23: five repeats gave pairs of 1.05 / 0.86 / 0.87 / 1.05 / 0.97.
    s = eff.summarize_pairs([1.05, 0.86, 0.87, 1.05, 0.97], [1.0] * 5)
    assert s.median == 0.97 and (s.low, s.high) == (0.86, 1.05)
    assert s.noisy
    (why,) = s.reasons
    assert why.startswith("pairs disagree: their min-max of 5 pairs 0.86-1.05 reaches 11% ")
    assert "(bound 5%)" in why
    assert eff.ratio_text(s) == "0.97 (noisy)"


def test_pairs_spread_3x_under_load_are_noisy_and_the_busy_pairs_are_named():
    # Issue 23: under load one row printed 2.06 from repeats spread 3.3x. The share other
    # processes took of the CPUs is measured per run (dlperf.system.LoadMeter).
    s = eff.summarize_pairs([10.0, 33.0, 20.6], [10.0, 10.0, 10.0], busy=[0.04, 0.61, 0.3])
    assert s.median == pytest.approx(2.06)
    assert s.noisy and len(s.reasons) == 1 and s.reasons[0].startswith("pairs disagree")
    assert s.busy_pairs == (2, 3) and s.busy_worst == 0.61
    assert eff.busy_text(s) == "2 of 3 (pair 2, 3: others up to 61% of the CPUs, above 10%)"


def test_busy_pairs_are_named_but_pairs_that_agree_still_resolve_the_ratio():
    s = eff.summarize_pairs([1.0, 1.01], [1.0, 1.0], busy=[0.0, 0.2])
    assert not s.noisy and s.busy_pairs == (2,)
    assert eff.busy_text(s) == "1 of 2 (pair 2: others up to 20% of the CPUs, above 10%)"
    quiet = eff.summarize_pairs([1.0, 1.01], [1.0, 1.0], busy=[0.0, 0.1])  # at the bound
    assert quiet.busy_pairs == () and eff.busy_text(quiet) == "none"
    unmeasured = eff.summarize_pairs([1.0, 1.01], [1.0, 1.0])
    assert unmeasured.busy_pairs == () and unmeasured.busy_worst is None


def test_a_single_pair_is_never_vouched_for():
    s = eff.summarize_pairs([5.0], [5.0])
    assert s.noisy and s.reasons == ("a single pair: no spread to judge it by",)
    assert s.interval == "min-max of 1 pair (too few for a 95% CI)"


def test_nine_pairs_take_the_95_ci_which_drops_one_disturbed_pair_at_each_end():
    ratios = [0.5, 0.99, 1.0, 1.0, 1.01, 1.0, 0.99, 1.02, 1.6]
    s = eff.summarize_pairs(ratios, [1.0] * 9)
    assert (s.low, s.high) == (0.99, 1.02)  # the 2nd and 8th in order, not 0.5 and 1.6
    assert s.interval == "95% CI (pairs 2 and 8 of 9 in order, coverage 96.1%)"
    assert not s.noisy


def test_the_default_rounds_make_a_5_percent_gap_visible():
    # The fewest pairs whose 95 % interval is not simply their min-max...
    assert median_ci_ranks(eff.DEFAULT_REPEATS).low_rank == 2
    assert median_ci_ranks(eff.DEFAULT_REPEATS - 1).low_rank == 1
    assert eff.NOISE_BOUND == 0.05
    # ...so that pairs 2 % around a 5 % gap show it: the interval stays below 1.
    gap = [0.95 * f for f in (0.98, 1.0, 1.02, 0.99, 1.01, 1.0, 0.98, 1.02, 0.3)]
    s = eff.summarize_pairs(gap, [1.0] * eff.DEFAULT_REPEATS)
    assert s.high < 1.0 and not s.noisy and eff.ratio_text(s) == "**0.95**"


def test_rounds_go_on_while_the_pairs_disagree_up_to_the_cap():
    agree = eff.summarize_pairs([1.0, 1.01, 0.99] * 3, [1.0] * 9)
    disagree = eff.summarize_pairs([1.05, 0.86, 0.87, 1.05, 0.97] * 2, [1.0] * 10)
    want = eff.wants_another_round
    assert want(0, 9, 17, None) and want(8, 9, 17, agree)  # below the minimum: always
    assert not want(9, 9, 17, agree)  # 9 pairs that resolve 5 %: done
    assert want(10, 9, 17, disagree)  # not yet: another round
    assert not want(17, 9, 17, disagree)  # the cap: stop, the row stays noisy
    assert not want(2, 2, 2, disagree)  # --max-repeats equal to --repeats: fixed rounds
    assert eff.DEFAULT_MAX_REPEATS >= eff.DEFAULT_REPEATS


def test_dlperf_runs_between_the_runs_it_is_held_against_and_neither_end_always_first():
    chain, others = ["class", "dlperf", "reference"], ["cl1", "mask"]
    orders = [eff.round_order(chain, others, i) for i in range(4)]
    assert [o[:3] for o in orders] == [chain, chain[::-1]] * 2
    # The other runs follow, each first among them once every len(others) rounds.
    assert [o[3:] for o in orders] == [["cl1", "mask"], ["mask", "cl1"]] * 2
    assert eff.round_order(["dlperf", "reference"], [], 1) == ["reference", "dlperf"]


def test_the_table_bolds_only_ratios_whose_pairs_agree():
    agree = eff.summarize_pairs([0.91, 0.95, 0.88], [1.0, 1.0, 1.0])
    disagree = eff.summarize_pairs([1.05, 0.86, 0.87, 1.05, 0.97], [1.0] * 5)
    busy = eff.summarize_pairs([1.0, 1.01, 0.99], [1.0] * 3, busy=[0.0, 0.35, 0.0])
    rows = [
        {"model": "bert", "mode": "eager", "row": "headline", "compared": "dlperf / ref",
         "numerator": 4.5, "denominator": 4.9, "summary": agree},
        {"model": "resnet50", "mode": "eager", "row": "headline", "compared": "dlperf / ref",
         "numerator": 50.0, "denominator": 52.0, "summary": disagree},
        {"model": "resnet50", "mode": "xla", "row": "headline", "compared": "dlperf / ref",
         "numerator": 50.0, "denominator": 50.0, "summary": busy},
        {"model": "bert", "mode": "xla", "row": "headline", "compared": "dlperf / ref",
         "skipped": "not started: past --deadline-s 300"},
        {"framework": "jax", "model": "bert", "mode": "jit", "row": "headline",
         "compared": "dlperf / ref", "numerator": 3.0, "denominator": 3.0, "summary": agree},
    ]  # fmt: skip
    # Rows read back from --json-out (summaries as dicts) render the same.
    as_json = json.loads(json.dumps([{**r, "summary": r.get("summary") and r["summary"].__dict__}
                                     for r in rows]))  # fmt: skip
    for table in (eff.table(rows), eff.table(as_json)):
        lines = table.splitlines()
        assert lines[0].startswith("| framework | workload | mode | compared |")
        # Rows without a framework (written before jax had rows) are PyTorch's.
        assert lines[2] == (
            "| pytorch | bert | eager | dlperf / ref | 4.50 | 4.90 | **0.91** | 0.88-0.95 | 3 "
            "| none |"
        )
        assert lines[3] == (
            "| pytorch | resnet50 | eager | dlperf / ref | 50.00 | 52.00 | 0.97 (noisy) "
            "| 0.86-1.05 | 5 | none |"
        )
        assert lines[4] == (
            "| pytorch | resnet50 | xla | dlperf / ref | 50.00 | 50.00 | **1.00** | 0.99-1.01 | 3 "
            "| 1 of 3 (pair 2: others up to 35% of the CPUs, above 10%) |"
        )
        assert lines[5] == "| pytorch | bert | xla | dlperf / ref | — | — | — | — | 0 | — |"
        assert lines[6] == (
            "| jax | bert | jit | dlperf / ref | 3.00 | 3.00 | **0.91** | 0.88-0.95 | 3 | none |"
        )
    notes = eff.noise_notes(as_json)
    assert notes[0].startswith("noisy: pytorch resnet50 eager, dlperf / ref: pairs disagree")
    assert (
        notes[1] == "busy: pytorch resnet50 xla, dlperf / ref: 1 of 3 (pair 2: others up to "
        "35% of the CPUs, above 10%)"
    )
    assert notes[2] == "skipped: pytorch bert xla: not started: past --deadline-s 300"
    assert len(notes) == 3


def _args(**given) -> argparse.Namespace:
    defaults = {"frameworks": ["pytorch"], "modes": ["eager"], "models": ["resnet50", "bert"],
                "measure": None, "device": "cpu"}  # fmt: skip
    return argparse.Namespace(**{**defaults, **given})


def test_jax_rows_run_after_pytorch_s_in_their_one_mode_jit():
    both = _args(frameworks=["pytorch", "jax"], modes=["xla", "eager"])
    assert eff.plan(both) == [
        ("pytorch", "resnet50", "xla"), ("pytorch", "bert", "xla"),
        ("pytorch", "resnet50", "eager"), ("pytorch", "bert", "eager"),
        ("jax", "resnet50", "jit"), ("jax", "bert", "jit"),
    ]  # fmt: skip
    # jax has no uncompiled mode (dlperf run jax --xla is refused): --modes is PyTorch's.
    assert eff.plan(_args(frameworks=["jax"], modes=["xla"], models=["bert"])) == [
        ("jax", "bert", "jit")
    ]
    assert eff.plan(_args()) == [("pytorch", "resnet50", "eager"), ("pytorch", "bert", "eager")]


def test_each_framework_runs_its_own_bare_loop_and_window():
    assert eff.REFERENCES["pytorch"].name == "reference_loops.py"
    assert eff.REFERENCES["jax"].name == "reference_loops_jax.py"
    assert all(path.is_file() for path in (*eff.REFERENCES.values(), *eff.WORKLOADS.values()))
    for framework in eff.FRAMEWORKS:
        for model in ("resnet50", "bert"):
            cpu = eff.measure_of(_args(), framework, model)
            assert cpu == eff.CPU_MEASURE[framework][model] and cpu >= 10
            assert eff.measure_of(_args(device="cuda"), framework, model) == 100
            assert eff.measure_of(_args(measure=4), framework, model) == 4


def test_jax_s_one_diagnostic_is_dlperf_s_class_in_the_bare_loop():
    for model, label in (("resnet50", "ResNet50"), ("bert", "BERT")):
        ((name, argv),) = eff.diagnostics("jax", model, channels_last=0)
        assert name == f"dlperf {label} class, bare loop"
        assert argv == ["--model-source", "dlperf", "--workload", str(eff.WORKLOADS["jax"])]
    # PyTorch's keep their mask and layout variants, its own workload named.
    torch_bert = eff.diagnostics("pytorch", "bert", channels_last=0)
    assert len(torch_bert) == 3 and str(eff.WORKLOADS["pytorch"]) in torch_bert[0][1]


# --------------------------------------------------------------------------------------------
# scripts/gpu-check end to end on a CPU (framework: it runs the built PyTorch env)
# --------------------------------------------------------------------------------------------


def _pypi_unreachable() -> str | None:
    try:
        socket.create_connection(("pypi.org", 443), timeout=15).close()
    except OSError as exc:
        return f"pypi.org:443 cannot be reached from here ({exc})"
    return None


@pytest.fixture(scope="module")
def torch_python() -> str:
    from dlperf.adapters import get_adapter
    from dlperf.envs import ensure_env

    return str(ensure_env(get_adapter("pytorch").env_spec("cpu")).python)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """`bash scripts/gpu-check --prepare` into a private folder (never the checkout's own
    .gpu-wheels/, which may hold what someone prepared for a node)."""
    folder = tmp_path_factory.mktemp("gpu-check")
    proc = subprocess.run(
        ["bash", str(GPU_CHECK), "--prepare", "--wheels", "wheels"],
        cwd=folder, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if proc.returncode != 0 and (why := _pypi_unreachable()):
        pytest.skip(f"gpu-check --prepare downloads its wheels from PyPI: {why}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    wheels = folder / "wheels"
    names = [p.name for p in wheels.glob("*.whl")]
    assert any(n.startswith("dlperf-") for n in names)
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert any(n.startswith("pydantic_core-") and f"-{tag}-" in n for n in names), names
    return folder


def gpu_check(folder: Path, python: str, *args: str) -> tuple[subprocess.CompletedProcess, list]:
    out = folder / f"out{len(list(folder.glob('out*')))}"
    out.mkdir()
    env = {**os.environ, "TMPDIR": str(folder), "OUT": str(out)}
    env.pop("DLPERF_GPU_PYTHON", None)
    proc = subprocess.run(
        ["bash", str(GPU_CHECK), "--device", "cpu", "--tiny", "--python", python,
         "--wheels", "wheels", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    rows = json.loads((out / "efficiency.json").read_text()) if proc.returncode == 0 else []
    return proc, rows


def _freeze(python: str) -> str:
    return subprocess.run(
        [python, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.framework
def test_gpu_check_measures_every_row_from_the_prepared_wheels(prepared, torch_python):
    before = _freeze(torch_python)
    proc, rows = gpu_check(prepared, torch_python, "--deadline-s", "3600")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    # dlperf came from the wheel installed in the private folder, not from the checkout.
    site = prepared / "dlperf-gpu-check"
    assert f"dlperf from {site / 'dlperf'}" in proc.stdout
    assert "python 3." in proc.stdout and "torch 2." in proc.stdout
    # jax's CUDA wheels cannot travel with the checkout: said in one line, no jax row.
    (skipped,) = [line for line in proc.stdout.splitlines() if line.startswith("jax rows:")]
    assert "skipped" in skipped and "3.1 GiB" in skipped and "64 MiB" in skipped
    assert {r["framework"] for r in rows} == {"pytorch"}
    assert "| workload | mode | compared |" in proc.stdout
    kinds = {(r["model"], r["row"]) for r in rows}
    for model, diagnostic_rows in (("resnet50", 2), ("bert", 3)):
        assert {(model, k) for k in ("headline", "diagnostic", "harness")} <= kinds
        assert sum(r["row"] == "diagnostic" for r in rows if r["model"] == model) == (
            diagnostic_rows
        )
    assert len(rows) == 9
    for r in rows:
        assert r["numerator"] > 0 and r["denominator"] > 0, r
        assert len(r["summary"]["ratios"]) == 1  # --tiny: one round
        assert r["summary"]["noisy"]  # one pair is never vouched for
    headline = [r["compared"] for r in rows if r["row"] == "headline"]
    assert headline[0].startswith("dlperf run / reference loop (")
    compared = [r["compared"] for r in rows]
    assert "dlperf BERT class, bare loop, all-ones mask / reference loop" in compared
    # ResNet50 at 32 px on a CPU: dlperf's setting (channels_last 0) first, then the other.
    assert "dlperf ResNet50 class, bare loop, channels_last 0 / reference loop" in compared
    assert "dlperf ResNet50 class, bare loop, channels_last 1 / reference loop" in compared
    # The node's Python is untouched: everything went into the private folder.
    assert _freeze(torch_python) == before


@pytest.mark.framework
def test_gpu_check_starts_nothing_past_its_deadline(prepared, torch_python):
    proc, rows = gpu_check(prepared, torch_python, "--deadline-s", "0")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert [(r["framework"], r["model"], r["skipped"]) for r in rows] == [
        ("pytorch", "resnet50", "not started: past --deadline-s 0"),
        ("pytorch", "bert", "not started: past --deadline-s 0"),
    ]
    assert "skipped: pytorch bert eager: not started: past --deadline-s 0" in proc.stdout
    assert "#1:" not in proc.stdout  # no round ran


# --------------------------------------------------------------------------------------------
# jax's bare loop (framework: it runs in the built jax env)
# --------------------------------------------------------------------------------------------

SAME_SHAPES = """
import collections, importlib.util, sys, jax, jax.numpy as jnp
sys.path.insert(0, sys.argv[1])
import reference_loops_jax as bare
spec = importlib.util.spec_from_file_location("jax_workload", sys.argv[2])
workload = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = workload
spec.loader.exec_module(workload)
def shapes(model, *inputs):
    variables = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *inputs, train=False))
    return collections.Counter(tuple(x.shape) for x in jax.tree_util.tree_leaves(variables))
image, ids = jnp.zeros((1, 32, 32, 3)), jnp.zeros((1, 8), jnp.int32)
for name, mine, inputs in (("resnet50", bare.ResNet50(), (image,)),
                           ("bert", bare.BertForPreTraining(), (ids, ids))):
    args = workload.parse_args(["--model", name, "--image-size", "32", "--seq-len", "8"])
    theirs = shapes(workload.build_model(args), *inputs)
    assert shapes(mine, *inputs) == theirs, name
    print(name, sum(theirs.values()))
"""


@pytest.fixture(scope="module")
def jax_python() -> str:
    from dlperf.adapters import get_adapter
    from dlperf.envs import ensure_env

    return str(ensure_env(get_adapter("jax").env_spec("cpu")).python)


@pytest.mark.framework
def test_jax_bare_loop_models_are_dlperf_s_and_it_trains_dlperf_s_class(jax_python):
    # Its own Flax modules have dlperf's variables, array for array (traced, not compiled).
    workload = eff.WORKLOADS["jax"]
    same = subprocess.run([jax_python, "-c", SAME_SHAPES, str(ROOT / "benchmarks"),
                           str(workload)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert same.returncode == 0, same.stderr[-3000:]
    assert same.stdout.split() == ["resnet50", "267", "bert", "206"]
    # The diagnostic path: dlperf's BERT class, built by the workload's own entry points.
    argv = [jax_python, str(eff.REFERENCES["jax"]), "--model", "bert", "--batch-size", "1",
            "--seq-len", "8", "--skip", "1", "--measure", "1", "--threads", "1",
            "--model-source", "dlperf", "--workload", str(workload)]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    facts = json.loads(run.stdout.splitlines()[-1])
    assert facts["model"] == "dlperf BERT class" and facts["params"] == 110_106_428
    assert facts["throughput"] > 0 and facts["threads"] == 1


def test_gpu_check_refuses_to_empty_a_folder_it_did_not_fill(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("not a wheel")
    proc = subprocess.run(
        ["bash", str(GPU_CHECK), "--prepare", "--wheels", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "holds more than wheels" in proc.stderr and "notes.txt" in proc.stderr
    assert mine.read_text() == "not a wheel"


def test_gpu_check_refuses_an_unknown_option_and_a_missing_wheel_folder(tmp_path):
    bad = subprocess.run(["bash", str(GPU_CHECK), "--devise", "cpu"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 1 and "unknown option --devise" in bad.stderr
    empty = subprocess.run(
        ["bash", str(GPU_CHECK), "--device", "cpu", "--wheels", str(tmp_path / "none")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert empty.returncode == 1 and "run 'bash scripts/gpu-check --prepare'" in empty.stderr
