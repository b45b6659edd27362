"""`dlperf doctor` (what on this machine threatens a stable number) and `dlperf check-models`
(every framework builds the same models)."""

from __future__ import annotations

import json

import typer
from rich.markup import escape as esc

import dlperf.cli.options as o
from dlperf.cli.output import console, err, print_table, write_json
from dlperf.cli.render_setup import (
    doctor_checks_table,
    model_check_problems,
    model_checks_table,
    print_peak,
)


def check_models_cmd(framework: o.OnlyFrameworks = None, model: o.OnlyModels = None) -> None:
    """Check that every framework builds the same models.

    Parameter counts and FLOPs per sample, framework by framework."""
    from dlperf.checks import check_models

    checks = check_models(framework, model, log=lambda m: err.print(f"  {esc(m)}"))
    print_table(console, model_checks_table(checks))
    for line in model_check_problems(checks):
        console.print(line, highlight=False)
    if not all(c.ok for c in checks):
        raise typer.Exit(2)


def doctor(json_out: o.DoctorJson = False, measure_peak: o.MeasurePeak = False) -> None:
    """What on this machine threatens a stable number.

    TorchBench V0's controls (CPU governor, load, ...) and the measured CPU peak."""
    from dlperf.doctor import checks_as_dicts, run_checks
    from dlperf.system import cpu_peak, machine_info

    checks = run_checks()
    info = machine_info()
    peak = cpu_peak(refresh=measure_peak)
    if json_out:
        payload = {"machine": info, "cpu_peak": peak, "checks": checks_as_dicts(checks)}
        write_json(json.dumps(payload, indent=2) + "\n")
        return
    print_peak(info, peak)
    console.print(doctor_checks_table(checks))
