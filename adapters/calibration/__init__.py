"""Calibration: the harness's own test double and fidelity benchmark (no ML framework).

Its workload paces steps to an exact period, so the true throughput is known in advance
(batch / step period), and it misbehaves on request to exercise every failure path.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import Adapter, Command, WorkloadOption, integer, mode_args, number
from dlperf.envs import EnvSpec
from dlperf.launch import WORKLOAD, FrameworkLaunch
from dlperf.schema import BenchmarkSpec

SCRIPT = Path(__file__).with_name("pace.py")

# Every key shapes what the test double measures (its period, its faults): none is a setting
# an ablation could compare.
_DECLARED = {
    "step_ms": number(
        "step period in milliseconds (default 20): true throughput = batch * 1000 / step_ms",
        gt=0,
        le=3_600_000,
    ),
    "crash_at_step": integer("exit with status 3 when step K starts"),
    "hang_at_step": integer("stop making progress (no output, no events) when step K starts"),
    "exit_at_step": integer(
        "exit cleanly (status 0) when step K starts, before the window is complete"
    ),
    "garbage_every": integer("write a malformed line among the events after every K-th step"),
    "flops_per_sample": number("model FLOPs per sample to report (exercises the MFU path)", ge=0),
    "clock_scale": number(
        "scale the step marks' times by F, as a workload timing the wrong thing would "
        "(0: a clock that never moves)",
        ge=0,
    ),
    "fault_rank": integer(
        "with --nodes/--devices-per-node: only rank R crashes, hangs or exits as asked", ge=0
    ),
    "slow_rank": integer(
        "with --nodes/--devices-per-node: rank R's steps take twice as long", ge=0
    ),
}
OPTIONS = {key: replace(option, setting=False) for key, option in _DECLARED.items()}


class CalibrationAdapter(Adapter):
    name = "calibration"
    description = "paced test double with a known true throughput (stdlib only)"
    models = ("pace",)
    # pace.py as its own node agent: it starts this node's ranks (no collectives: the ranks
    # only pace themselves; the runner's max-reduce makes a slow rank slow the job).
    launch = FrameworkLaunch(
        agent=(
            "{python}", WORKLOAD, "--world-size", "{world_size}", "--node-rank", "{node_rank}",
            "--ranks-per-node", "{devices}",
        ),
    )  # fmt: skip

    def option_keys(self, model: str) -> dict[str, WorkloadOption]:
        return OPTIONS

    def check(self, spec: BenchmarkSpec) -> None:
        for key in ("fault_rank", "slow_rank"):
            if key in spec.options and int(spec.options[key]) >= spec.world_size:
                n = spec.world_size
                raise DlperfError(
                    f"--set {key}={spec.options[key]}: the run has {n} rank{'s' * (n > 1)}, "
                    f"numbered from 0 (--nodes {spec.nodes} x --devices-per-node "
                    f"{spec.devices_per_node}); give a rank below {n}, or run more ranks"
                )

    def env_spec(self, device: str) -> EnvSpec | None:
        return None  # stdlib only: runs on the host interpreter

    def command(self, spec: BenchmarkSpec, python: str) -> Command:
        argv = [
            python,
            str(SCRIPT),
            "--batch-size",
            str(spec.batch_size),
            "--steps",
            str(spec.steps),
        ]
        argv += mode_args(spec)
        for key, value in sorted(spec.options.items()):
            argv += [f"--{key.replace('_', '-')}", value]
        return Command(argv)


ADAPTER = CalibrationAdapter()
