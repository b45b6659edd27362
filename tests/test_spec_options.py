"""The one table of spec options (`dlperf.spec_options`): every spec field is in it or said not
to be; a spec goes to the command line that re-runs it (`run_argv`, the `--sbatch` script's)
and back through the real `dlperf run` unchanged; a sweep and `dlperf run` give the same spec;
`dlperf run --help` groups the options in panels and lists the workloads' `--set` keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dlperf.sweep
from dlperf.adapter import MICRO_MODELS
from dlperf.adapters import adapter_names, get_adapter
from dlperf.cli import app
from dlperf.cli.run import run_argv
from dlperf.schema import LOADGEN_SETTINGS, BenchmarkSpec
from dlperf.spec import OfficialOptions
from dlperf.spec_options import (
    NOT_OPTIONS,
    PANELS,
    SPEC_OPTIONS,
    SWEEP_KEYS,
    option_overrides,
    resolve_overrides,
    spec_argv,
)
from dlperf.sweep import SweepFile, expand

EVERY_LOADGEN_SETTING = {
    "target_qps": 12.5,
    "target_latency_ms": 0.1,  # not a whole number: written back exactly
    "min_duration_s": 1.5,
    "max_duration_s": 30,
    "min_query_count": 10,
    "max_query_count": 1000,
    "samples_per_query": 4,
    "performance_sample_count": 64,
}
assert set(EVERY_LOADGEN_SETTING) == set(LOADGEN_SETTINGS)

# Option values (as `dlperf run` takes them) of specs that together set every spec field.
SPECS = {
    "ootb, every shape and measurement setting": {
        "framework": "pytorch", "model": "resnet50", "preset": "smoke", "impl": "ootb",
        "device": "cuda", "amp": True, "xla": True, "batch_size": 3, "image_size": 96,
        "skip": 1, "measure": 4, "repeats": 2, "timeout": 123.5, "no_output_timeout": 0.25,
        "nodes": 2, "devices_per_node": 4, "set_": ["channels_last=0", "seed=7"],
    },
    "sequence model, inference with a latency target": {
        "framework": "pytorch", "model": "bert", "mode": "infer", "seq_len": 48,
        "latency_target_ms": 2.75, "set_": ["sdpa=0"],
    },
    "LoadGen with every setting": {
        "framework": "calibration", "model": "pace", "preset": "smoke", "mode": "infer",
        "scenario": "multistream", "set_": ["step_ms=5"],
        **EVERY_LOADGEN_SETTING,
    },
    "official, picked by profile": {
        "framework": "pytorch", "model": "resnet50", "impl": "official",
        "profile": "dlperf-2020", "nodes": 2, "devices_per_node": 8, "device": "cuda",
    },
    "official, named": {
        "framework": "tensorflow", "model": "resnet50", "impl": "official", "source":
        "tensorflow-models-resnet50", "amp": True, "device": "cuda",
    },
    "microbenchmark": {
        "framework": "pytorch", "model": "linear", "set_": ["layers=2", "threads=1"],
    },
    "calibration with the defaults": {"framework": "calibration", "model": "pace"},
}  # fmt: skip


def resolved(values: dict) -> BenchmarkSpec:
    return resolve_overrides(option_overrides(values))


def test_every_spec_field_is_an_option_or_said_not_to_be() -> None:
    """A new spec field fails here until the table (or NOT_OPTIONS) says how a user sets it."""
    fields = {option.field.partition(".")[0] for option in SPEC_OPTIONS}
    assert fields - set(BenchmarkSpec.model_fields) == {"profile"}  # picks the manifest
    assert set(BenchmarkSpec.model_fields) == (fields - {"profile"}) | set(NOT_OPTIONS)
    assert not set(NOT_OPTIONS) & fields
    loadgen = {o.field for o in SPEC_OPTIONS if o.field.startswith("loadgen.")}
    assert loadgen == {f"loadgen.{setting}" for setting in LOADGEN_SETTINGS}
    assert {option.panel for option in SPEC_OPTIONS} <= set(PANELS)
    assert len({option.flag for option in SPEC_OPTIONS if option.flag}) == len(
        [option for option in SPEC_OPTIONS if option.flag]
    )


def test_the_specs_here_set_every_field() -> None:
    specs = [resolved(values) for values in SPECS.values()]
    for field, info in BenchmarkSpec.model_fields.items():
        default = info.get_default(call_default_factory=True)
        assert any(getattr(s, field) != default for s in specs), f"no spec here sets {field}"
    loadgen = next(s for s in specs if s.scenario)
    assert set(loadgen.loadgen) == set(LOADGEN_SETTINGS)
    assert {s.impl for s in specs} == {"ootb", "official", "micro"}
    assert any(s.options for s in specs) and any(s.practice for s in specs)


@pytest.mark.parametrize("values", SPECS.values(), ids=list(SPECS))
def test_a_spec_goes_to_the_command_line_and_back_unchanged(values, tmp_path, monkeypatch):
    spec = resolved(values)
    argv = run_argv(spec, tmp_path / "results", OfficialOptions(), ())
    assert argv[1:4] == ["-m", "dlperf", "run"] and argv[-2:] == ["--launcher", "slurm"]
    assert argv[4 : 4 + len(spec_argv(spec))] == spec_argv(spec)
    planned = []
    monkeypatch.setattr("dlperf.spec.check_run", lambda spec, *_, **__: planned.append(spec))
    monkeypatch.setattr("dlperf.cli.run.print_plan", lambda plan: None)
    out = CliRunner().invoke(app, [*argv[3:], "--dry-run"])
    assert out.exit_code == 0, out.output
    assert planned == [spec]


def test_only_settings_that_differ_from_the_defaults_are_written() -> None:
    argv = spec_argv(resolved(SPECS["calibration with the defaults"]))
    assert argv[:2] == ["calibration", "pace"]
    assert "--mode" not in argv and "--device" not in argv and "--amp" not in argv
    assert "--profile" not in argv  # the manifest is named by --source
    assert re.fullmatch(r"\d+", argv[argv.index("--timeout") + 1])  # 600.0 is written 600
    official = spec_argv(resolved(SPECS["official, picked by profile"]))
    assert official[official.index("--source") + 1] == "pytorch-examples-resnet50"


def test_sweep_keys_come_from_the_table_and_are_documented() -> None:
    top = {name.partition(".")[0] for name in SWEEP_KEYS}
    assert set(SweepFile.model_fields) == top | {"python"}
    assert set(SweepFile.model_fields["loadgen"].annotation.model_fields) == set(LOADGEN_SETTINGS)
    doc = dlperf.sweep.__doc__
    for name in SweepFile.model_fields:
        assert re.search(rf"^\s+{name} = |\[sweep\.{name}\]", doc, re.M), name


def test_a_sweep_and_run_give_the_same_spec() -> None:
    table = {
        "preset": "smoke", "frameworks": "calibration", "models": "pace", "modes": "infer",
        "precisions": "amp", "xla": True, "impls": "ootb", "batch_sizes": 3, "skip": 1,
        "measure": 4, "repeats": 2, "timeout_s": 99, "no_output_timeout_s": 9.5,
        "device": "cuda", "node_shapes": "1x1", "scenarios": "offline",
        "set": {"step_ms": 5}, "loadgen": EVERY_LOADGEN_SETTING,
    }  # fmt: skip
    (spec,) = expand(table).specs
    assert spec == resolved({
        "framework": "calibration", "model": "pace", "preset": "smoke", "mode": "infer",
        "amp": True, "xla": True, "impl": "ootb", "batch_size": 3, "skip": 1, "measure": 4,
        "repeats": 2, "timeout": 99, "no_output_timeout": 9.5, "device": "cuda", "nodes": 1,
        "devices_per_node": 1, "scenario": "offline", "set_": ["step_ms=5"],
        **EVERY_LOADGEN_SETTING,
    })  # fmt: skip


def test_loadgen_keys_of_a_sweep_are_checked_like_run_options() -> None:
    from dlperf import DlperfError

    base = {"frameworks": "calibration", "models": "pace"}
    with pytest.raises(DlperfError, match=r"unknown key\(s\) loadgen.min_qps; known: loadgen\."):
        expand({**base, "loadgen": {"min_qps": 1}})
    with pytest.raises(DlperfError, match="loadgen.min_query_count = 2.5: Input should be a valid"):
        expand({**base, "loadgen": {"min_query_count": 2.5}})


def test_run_help_groups_options_in_panels_and_lists_every_set_key() -> None:
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    text = out.output
    assert max(len(line) for line in text.splitlines()) <= 80
    titles = re.findall(r"╭─ (.+?) ─", text)
    assert titles == ["Arguments", *PANELS]
    words = set(text.split())
    for option in SPEC_OPTIONS:
        assert option.is_argument or option.flag in words, option.flag  # whole, not cut short
    for name in adapter_names():
        adapter = get_adapter(name)
        assert f"{name}:" in words
        for model in [*adapter.models, *adapter.micro_models]:
            for key in adapter.option_declarations(model):
                # key=VALUES is one word: a key name is never broken across lines
                assert any(w.startswith(f"{key}=") for w in words), (name, key)
    assert all(model in words for model in MICRO_MODELS)


def test_an_unknown_set_key_is_refused_with_the_models_keys(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["run", "pytorch", "resnet50", "--set", "bogus=1", "--dry-run"])
    assert out.exit_code == 1
    assert "valid keys: channels_last, cudnn_benchmark" in str(out.exception)
