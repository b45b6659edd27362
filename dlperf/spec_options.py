"""One table of the settings a user gives a benchmark spec, and everything made from it.

Each `SpecOption` of `SPEC_OPTIONS` is one setting: its parameter on `dlperf run` (flag, type,
help, help panel), the override of `resolve_spec` a given value becomes, the value a resolved
spec gives back (so `spec_argv` writes the command line that re-runs exactly that spec: the
`--sbatch` script's), and its key in a sweep's [sweep] table (`SweepKey`: its TOML type, whether
it is a list, the configurations it applies to). The CLI builds `dlperf run`'s parameters from
it, `dlperf.sweep` its `SweepFile` and matrix, `dlperf parse` its overrides; a spec field that
is neither here nor in `NOT_OPTIONS` fails a test, so a new field cannot be forgotten.

This module imports no adapter: the command line reads it at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
)

from dlperf import DlperfError
from dlperf.models import PRESETS, PresetValues
from dlperf.official.manifest import PROFILES
from dlperf.schema import DEVICES, IMPLS, MODES, PRECISIONS, SCENARIOS, BenchmarkSpec

# `dlperf run --help` groups its options in these panels, in this order (`run`'s own options,
# which are not spec settings, name theirs too).
WORKLOAD = "Workload"
SHAPES = "Shapes"
PRECISION = "Precision and compiler"
MEASUREMENT = "Measurement"
DISTRIBUTED = "Distributed"
INFERENCE = "Inference and LoadGen"
OFFICIAL = "Official code"
OUTPUT = "Output"
ENVIRONMENT = "Environment"
PANELS = (WORKLOAD, SHAPES, PRECISION, MEASUREMENT, DISTRIBUTED, INFERENCE, OFFICIAL,
          ENVIRONMENT, OUTPUT)  # fmt: skip

# Spec fields no option sets, and why.
NOT_OPTIONS = {
    "practice": "the framework's best practice, chosen by its adapter (a --set of the same key "
    "ablates one)",
}


# ---------------------------------------------------------------- sweep value types


def _one_or_many(value: Any) -> Any:
    """A single value where a list is expected is a list of one: `xla = true`."""
    return value if isinstance(value, list) else [value]


def _node_shape(text: str) -> tuple[int, int]:
    try:
        nodes, devices = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"node shape {text!r} must look like 1x1 (nodes x devices)") from None
    return nodes, devices


def _set_value(value: Any) -> str:
    """A [sweep.set] value: text, or a number written as its text (never a boolean: a
    workload's switches are 0 and 1)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError('a workload option is text or a number, such as "NHWC", 1 or 20.5')
    return str(value)


T = TypeVar("T")
# A TOML value or a list of them, never an empty list (it would make the matrix empty).
Many = Annotated[list[T], BeforeValidator(_one_or_many), Field(min_length=1)]
SetValue = Annotated[str, BeforeValidator(_set_value)]
StrictFloat = Annotated[float, Strict()]  # a TOML number (an integer too), never "10"
NodeShape = Annotated[StrictStr, AfterValidator(_node_shape)]


@dataclass(frozen=True)
class SweepCell:
    """One configuration of a sweep's matrix, as a `SweepKey.applies` sees it: the model's
    preset values and every override the matrix gives it."""

    shape: PresetValues
    overrides: Mapping[str, Any]


@dataclass(frozen=True, eq=False)  # one key may serve several options: known by identity
class SweepKey:
    """A key of the [sweep] table ("table.key": a key of its [sweep.table]). `many`: a list
    of values, one more dimension of the matrix (a single value is a list of one). `default`
    None: not given, the preset's (`...`: required). `values`: the option values one value
    stands for (default: its option's, the value itself). `applies`: the configurations the
    key changes; the others are left as they are (the same configuration then comes up more
    than once, and is run once)."""

    name: str
    value_type: Any
    many: bool = False
    default: Any = None
    values: Callable[[Any], dict[str, Any]] | None = None
    applies: Callable[[SweepCell], bool] | None = None

    def applies_to(self, cell: SweepCell) -> bool:
        return self.applies is None or self.applies(cell)

    def annotation(self) -> Any:
        """The pydantic type of the key's value in the [sweep] table."""
        kind = Many[self.value_type] if self.many else self.value_type
        return kind | None if self.default is None else kind


def _image_model(cell: SweepCell) -> bool:
    return cell.shape.image_size is not None


def _sequence_model(cell: SweepCell) -> bool:
    return cell.shape.seq_len is not None


def _inference(cell: SweepCell) -> bool:
    return cell.overrides.get("mode") == "infer"


def _loadgen_scenario(cell: SweepCell) -> bool:
    return _inference(cell) and cell.overrides.get("scenario") is not None


def _official(cell: SweepCell) -> bool:
    return cell.overrides.get("impl") == "official"


NODE_SHAPES = SweepKey(
    "node_shapes",
    NodeShape,
    many=True,
    default=[(1, 1)],
    values=lambda shape: {"nodes": shape[0], "devices_per_node": shape[1]},
)


# ---------------------------------------------------------------- the table


def parse_sets(items: Iterable[str]) -> dict[str, str]:
    """`--set KEY=VALUE` items as a dict (the adapter checks the keys and values)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise DlperfError(f"--set expects KEY=VALUE, got {item!r}")
        if key in out and out[key] != value:
            raise DlperfError(f"--set {key} is given twice ({out[key]}, {value}); give it once")
        out[key] = value
    return out


def _spec_value(field: str) -> Callable[[BenchmarkSpec], Any]:
    if field.startswith("loadgen."):
        setting = field.removeprefix("loadgen.")
        return lambda spec: spec.loadgen.get(setting)
    return lambda spec: getattr(spec, field)


@dataclass(frozen=True)
class SpecOption:
    """One setting of a spec as the user gives it.

    `name`: `dlperf run`'s parameter (and the key of `option_overrides`' values). `cli_type`:
    its value's type on the command line, `default` its default there; `flag` None for a
    positional argument. `field`: the override it sets (default: `name`): a spec field,
    "profile" (it picks the manifest that `source` then names) or "loadgen.<setting>".
    `to_override`: a given value -> the override's value (None: not given). `from_spec`: the
    value that gives back a resolved spec's setting (default: the field's value; None: the
    option is not written back, another one pins the same thing).
    """

    name: str
    cli_type: Any
    help: str
    panel: str
    flag: str | None = ""  # "": --name-with-dashes
    default: Any = None
    metavar: str | None = None
    field: str = ""
    to_override: Callable[[Any], Any] = lambda value: value
    from_spec: Callable[[BenchmarkSpec], Any] | None | Literal["field"] = "field"
    sweep: SweepKey | None = None

    def __post_init__(self) -> None:
        field = self.field or self.name
        object.__setattr__(self, "field", field)
        if self.flag == "":
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        if self.from_spec == "field":
            object.__setattr__(self, "from_spec", _spec_value(field))

    @property
    def is_argument(self) -> bool:
        return self.flag is None

    def sweep_values(self, value: Any) -> dict[str, Any]:
        """The option values that one value of the option's sweep key stands for."""
        assert self.sweep is not None
        if self.sweep.values is not None:
            return self.sweep.values(value)
        return {self.name: value}


def _precision(amp: bool | None) -> str | None:
    return None if amp is None else ("amp" if amp else "fp32")


def _given_sets(spec: BenchmarkSpec) -> list[str]:
    """The `--set` items of a spec: its options and its best practice (given again, they are
    best practice again), so a re-run does not depend on the adapter's defaults of the day."""
    return [f"{k}={v}" for k, v in sorted({**spec.options, **spec.practice}.items())]


def _sets(chosen: Mapping[str, str]) -> dict[str, Any]:
    """A configuration's [sweep.set] values as `--set` items."""
    return {"set_": [f"{k}={v}" for k, v in chosen.items()]}


def _loadgen(name: str, kind: type, help: str, metavar: str) -> SpecOption:
    """A LoadGen test setting: `--NAME` and the key NAME of [sweep.loadgen] (scenario
    configurations only)."""
    sweep = SweepKey(f"loadgen.{name}", StrictFloat if kind is float else StrictInt,
                     applies=_loadgen_scenario)  # fmt: skip
    field = f"loadgen.{name}"
    return SpecOption(name, kind | None, help, INFERENCE, metavar=metavar, field=field, sweep=sweep)


SPEC_OPTIONS: tuple[SpecOption, ...] = (
    SpecOption("framework", str, "e.g. pytorch, calibration", WORKLOAD, flag=None,
               metavar="FRAMEWORK", sweep=SweepKey("frameworks", StrictStr, True, ...)),
    SpecOption("model", str, "e.g. resnet50, bert, pace", WORKLOAD, flag=None, metavar="MODEL",
               sweep=SweepKey("models", StrictStr, True, ...)),
    # -- Workload
    SpecOption("preset", Literal[PRESETS], "dlperf (DLPerf's settings) or smoke.", WORKLOAD,
               default="dlperf", metavar="NAME",
               sweep=SweepKey("preset", Literal[PRESETS], default="dlperf")),
    SpecOption("impl", Literal[IMPLS] | None,
               "ootb (dlperf's own workload, the default), official (upstream's script) or "
               "micro (the microbenchmarks: linear, embeddingbag; their default).", WORKLOAD,
               metavar="NAME", sweep=SweepKey("impls", Literal[IMPLS], True)),
    SpecOption("source", str | None, "Which official manifest (default: the pair's default).",
               WORKLOAD, metavar="NAME"),
    SpecOption("profile", Literal[PROFILES] | None,
               "Official manifests' profile: current (default; recent upstream commits and "
               "stacks) or dlperf-2020 (DLPerf's commits and stacks: its reproduction).",
               WORKLOAD, metavar="NAME", from_spec=None,  # --source names the manifest
               sweep=SweepKey("profiles", Literal[PROFILES], True, applies=_official)),
    SpecOption("mode", Literal[MODES], "train, or infer (eval, no gradients).", WORKLOAD,
               default="train", metavar="NAME",
               sweep=SweepKey("modes", Literal[MODES], True, default=["train"])),
    SpecOption("device", Literal[DEVICES], "cpu or cuda.", WORKLOAD, default="cpu",
               metavar="NAME", sweep=SweepKey("device", Literal[DEVICES])),
    SpecOption("set_", list[str] | None,
               "Workload option KEY=VALUE (repeatable; the keys are listed below).", WORKLOAD,
               flag="--set", metavar="KEY=VALUE", field="options",
               to_override=lambda items: None if items is None else parse_sets(items) or None,
               from_spec=_given_sets,
               sweep=SweepKey("set", dict[str, Many[SetValue]], default={}, values=_sets)),
    # -- Shapes
    SpecOption("batch_size", int | None, "Batch size per device.", SHAPES, metavar="N",
               sweep=SweepKey("batch_sizes", StrictInt, True)),
    SpecOption("image_size", int | None, "Image side (ResNet).", SHAPES, metavar="PIXELS",
               sweep=SweepKey("image_sizes", StrictInt, True, applies=_image_model)),
    SpecOption("seq_len", int | None, "Sequence length (BERT).", SHAPES, metavar="TOKENS",
               sweep=SweepKey("seq_lens", StrictInt, True, applies=_sequence_model)),
    # -- Precision and compiler
    SpecOption("amp", bool, "Mixed precision.", PRECISION, flag="--amp", default=False,
               field="precision", to_override=_precision,
               from_spec=lambda spec: spec.precision == "amp",
               sweep=SweepKey("precisions", Literal[PRECISIONS], True, default=["fp32"],
                              values=lambda precision: {"amp": precision == "amp"})),
    SpecOption("xla", bool, "Graph compiler (torch.compile...).", PRECISION, flag="--xla",
               default=False, sweep=SweepKey("xla", StrictBool, True, default=[False])),
    # -- Measurement
    SpecOption("skip", int | None, "Iterations skipped before the window.", MEASUREMENT,
               metavar="N", sweep=SweepKey("skip", StrictInt)),
    SpecOption("measure", int | None, "Iterations in the window.", MEASUREMENT, metavar="N",
               sweep=SweepKey("measure", StrictInt)),
    SpecOption("repeats", int | None, "Repeats (separate processes).", MEASUREMENT,
               metavar="N", sweep=SweepKey("repeats", StrictInt)),
    SpecOption("timeout", float | None, "Seconds per repeat, total.", MEASUREMENT,
               metavar="SECONDS", field="timeout_s", sweep=SweepKey("timeout_s", StrictFloat)),
    SpecOption("no_output_timeout", float | None,
               "Seconds without output before a repeat is 'hung'.", MEASUREMENT,
               metavar="SECONDS", field="no_output_timeout_s",
               sweep=SweepKey("no_output_timeout_s", StrictFloat)),
    # -- Distributed
    SpecOption("nodes", int | None, "Nodes.", DISTRIBUTED, metavar="N", sweep=NODE_SHAPES),
    SpecOption("devices_per_node", int | None, "Devices per node.", DISTRIBUTED, metavar="N",
               sweep=NODE_SHAPES),
    # -- Inference and LoadGen
    SpecOption("latency_target_ms", float | None,
               "Inference: p95 batch latency goal; a miss is marked.", INFERENCE, metavar="MS"),
    SpecOption("scenario", Literal[SCENARIOS] | None,
               "MLPerf LoadGen scenario: offline, server, singlestream, multistream.", INFERENCE,
               metavar="NAME",
               sweep=SweepKey("scenarios", Literal[(*SCENARIOS, "none")], True,
                              values=lambda s: {"scenario": None if s == "none" else s},
                              applies=_inference)),
    _loadgen("target_qps", float, "LoadGen: expected (Offline) or offered (Server) QPS.", "QPS"),
    _loadgen("target_latency_ms", float, "LoadGen: Server latency bound / streams' expected.",
             "MS"),
    _loadgen("min_duration_s", float, "LoadGen: min test time.", "SECONDS"),
    _loadgen("max_duration_s", float, "LoadGen: max test time.", "SECONDS"),
    _loadgen("min_query_count", int, "LoadGen: minimum queries.", "N"),
    _loadgen("max_query_count", int, "LoadGen: maximum queries.", "N"),
    _loadgen("samples_per_query", int, "LoadGen MultiStream: samples per query (default 8).",
             "N"),
    _loadgen("performance_sample_count", int,
             "LoadGen: samples in the set its queries draw on (default: the synthetic data's, "
             "at most 1024).", "N"),
)  # fmt: skip

OPTIONS = {option.name: option for option in SPEC_OPTIONS}
# How a user names each spec field: on `dlperf run` (its flag) and in a sweep's [sweep] table
# (its key); refusals of a value say it so (`dlperf.wording.settings_problems`).
SPEC_FLAGS = {o.field: o.flag for o in SPEC_OPTIONS if o.flag}
SWEEP_NAMES = {
    **{o.field: o.sweep.name for o in SPEC_OPTIONS if o.sweep is not None},
    "nodes": "node_shapes' nodes",  # one key, "2x8", gives both
    "devices_per_node": "node_shapes' devices per node",
}
# The [sweep] table's keys from the table, in its order: name -> the key and its (first) option.
SWEEP_KEYS = {
    key.name: (key, next(o for o in SPEC_OPTIONS if o.sweep is key))
    for key in dict.fromkeys(o.sweep for o in SPEC_OPTIONS if o.sweep is not None)
}


def option_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """`resolve_spec` overrides of option values keyed by the table's names (framework, model
    and preset among them where given); an absent value, or None, is not given. LoadGen's
    settings are gathered into `loadgen`."""
    overrides: dict[str, Any] = {}
    loadgen: dict[str, float] = {}
    for name, value in values.items():
        option = OPTIONS[name]
        value = None if value is None else option.to_override(value)
        if value is None:
            continue
        if option.field.startswith("loadgen."):
            loadgen[option.field.removeprefix("loadgen.")] = value
        else:
            overrides[option.field] = value
    if loadgen:
        overrides["loadgen"] = loadgen
    return overrides


def resolve_overrides(
    overrides: Mapping[str, Any], names: Mapping[str, str] | None = None
) -> BenchmarkSpec:
    """The spec of overrides that name the framework, the model and (default dlperf) the
    preset: `resolve_spec`'s preset values, flags, best practice and checks. `names`: how
    the user named each setting, for a refusal (default: `dlperf run`'s flags)."""
    from dlperf.spec import resolve_spec

    given = dict(overrides)
    framework, model = given.pop("framework"), given.pop("model")
    preset = given.pop("preset", None) or "dlperf"
    return resolve_spec(
        framework,
        model,
        preset=preset,
        overrides=given,
        names=SPEC_FLAGS if names is None else names,
    )


def _text(value: Any) -> str:
    """A value as the command line takes it back exactly: 1800.0 as 1800, 0.1 as 0.1."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return str(value)


def spec_argv(spec: BenchmarkSpec) -> list[str]:
    """`dlperf run`'s arguments that resolve to `spec` again (framework and model first): every
    setting the table gives back, a default one left out."""
    argv: list[str] = []
    for option in SPEC_OPTIONS:
        if option.from_spec is None:
            continue
        value = option.from_spec(spec)
        if option.is_argument:
            argv.append(str(value))
        elif value is None or (value == option.default and option.default is not None):
            continue
        elif isinstance(value, bool):
            argv += [option.flag] if value else []
        elif isinstance(value, list):
            argv += [token for item in value for token in (option.flag, item)]
        else:
            argv += [option.flag, _text(value)]
    return argv
