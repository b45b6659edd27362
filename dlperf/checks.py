"""`dlperf check-models`: prove that every framework builds the same models.

Each workload answers `--describe` with one JSON line (params, flops_per_sample) without
training. Parameter counts must equal the catalog's; FLOPs per sample must agree across
frameworks for the same shapes.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapters import adapter_names, get_adapter
from dlperf.envs import ensure_env
from dlperf.models import MODELS, get_model
from dlperf.proc import run_process, tail
from dlperf.spec import resolve_spec

FLOPS_TOLERANCE = 0.001  # relative; the formulas are analytic, so they should agree exactly


@dataclass(frozen=True)
class ModelCheck:
    framework: str
    model: str
    shape: str
    params: int | None
    expected_params: int
    flops_per_sample: float | None
    reference_flops: float | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        if self.error or self.params != self.expected_params:
            return False
        if self.reference_flops and self.flops_per_sample:
            return abs(self.flops_per_sample / self.reference_flops - 1) <= FLOPS_TOLERANCE
        return self.flops_per_sample is not None and self.flops_per_sample > 0


def describe(framework: str, model: str, log: Callable[[str], None] = lambda _: None) -> ModelCheck:
    """Build one (framework, model) at the dlperf preset's shapes and read its description."""
    spec = resolve_spec(framework, model)
    adapter = get_adapter(framework)
    shape = f"image {spec.image_size}" if spec.image_size else f"seq {spec.seq_len}"
    expected = MODELS[model].params or 0
    env_spec = adapter.env_spec(spec.device)
    env = ensure_env(env_spec, log=log) if env_spec else None
    python = str(env.python) if env else "python3"
    argv = [*adapter.command(spec, python).argv, "--describe"]
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "describe.log"
        proc = run_process(
            argv,
            log_path=log_path,
            env=env.run_env() if env else None,
            timeout_s=600,
            no_output_timeout_s=600,
        )
        lines = log_path.read_text(errors="replace").splitlines()
        described = None
        for line in reversed(lines):
            if line.startswith("{"):
                try:
                    described = json.loads(line)
                    break
                except json.JSONDecodeError:
                    continue
        if proc.exit_code != 0 or described is None:
            why = f"{proc.outcome}, exit {proc.exit_code}"
            error = f"--describe failed ({why}): {tail(log_path, 5)}"
            return ModelCheck(framework, model, shape, None, expected, None, error=error)
    return ModelCheck(
        framework,
        model,
        shape,
        described.get("params"),
        expected,
        described.get("flops_per_sample"),
    )


def checkable(
    frameworks: Sequence[str] | None = None, models: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """The (framework, model) pairs `check_models` describes: each framework's full models
    (microbenchmarks and test doubles have no catalog parameter count), filtered by `models`."""
    names = list(frameworks or adapter_names())
    adapters = [get_adapter(n) for n in names]  # unknown framework: an error naming the known
    full = sorted({m for m, d in MODELS.items() if d.params})
    for model in models or ():
        get_model(model)  # unknown model: an error naming the known ones
        if model not in full:
            raise DlperfError(
                f"{model} has no catalog parameter count to check (a microbenchmark or test "
                f"double); check-models checks: {', '.join(full)}"
            )
    pairs = [
        (a.name, m) for a in adapters for m in a.models if m in full and (not models or m in models)
    ]
    if not pairs:
        offered = sorted({m for a in adapters for m in a.models if m in full})
        if models:
            raise DlperfError(
                f"nothing to check: {', '.join(names)} build(s) none of {', '.join(models)}; "
                f"the model(s) to check there: {', '.join(offered) or '(none)'}"
            )
        builders = [n for n in adapter_names() if set(get_adapter(n).models) & set(full)]
        raise DlperfError(
            f"nothing to check: {', '.join(names)} build(s) only test doubles; "
            f"frameworks to check: {', '.join(builders)}"
        )
    return pairs


def check_models(
    frameworks: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[ModelCheck]:
    """Describe every (framework, model) pair; FLOPs are compared to the median framework.
    A selection that names an unknown framework or model, or leaves nothing to check, is
    refused before any environment is built."""
    checks: list[ModelCheck] = []
    for name, model in checkable(frameworks, models):
        log(f"describing {name} {model}")
        checks.append(describe(name, model, log))
    out = []
    for check in checks:
        peers = sorted(
            c.flops_per_sample for c in checks if c.model == check.model and c.flops_per_sample
        )
        reference = peers[len(peers) // 2] if peers else None
        out.append(dataclasses.replace(check, reference_flops=reference))
    return out
