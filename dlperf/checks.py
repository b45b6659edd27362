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

from dlperf.adapters import adapter_names, get_adapter
from dlperf.envs import ensure_env
from dlperf.models import MODELS
from dlperf.proc import run_process, tail
from dlperf.runner import resolve_spec

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


def check_models(
    frameworks: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[ModelCheck]:
    """Describe every (framework, model) pair; FLOPs are compared to the median framework."""
    checks: list[ModelCheck] = []
    for name in frameworks or adapter_names():
        adapter = get_adapter(name)
        for model in adapter.models:
            if models and model not in models:
                continue
            if not MODELS[model].params:  # test doubles like calibration's pace
                continue
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
