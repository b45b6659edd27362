"""`dlperf parse`'s options and arguments (its --profile and --results-dir are shared, in
`options`)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from dlperf.schema import DEVICES, IMPLS

LogSource = Annotated[
    str,
    typer.Argument(
        metavar="SOURCE",
        help="A framework (then MODEL PATH...), or mlperf / mlperf-training / fambench.",
    ),
]

LogArgs = Annotated[
    list[str],
    typer.Argument(
        metavar="ARG", help="MODEL PATH... for a framework; PATH... for the suites' logs."
    ),
]

ParseImpl = Annotated[
    Literal[IMPLS] | None,
    typer.Option(
        help="official (upstream logs) or ootb (dlperf events files, the default; micro "
        "for microbenchmarks)."
    ),
]

ParseSource = Annotated[str | None, typer.Option(help="Which official manifest.")]

ParseBatchSize = Annotated[int | None, typer.Option(help="Per device (else from the path).")]

ParseNodes = Annotated[int | None, typer.Option(help="Nodes (else from the path).")]

ParseDevicesPerNode = Annotated[int | None, typer.Option(help="Else from the path.")]

ParseAmp = Annotated[bool | None, typer.Option("--amp/--fp32", help="Else from the path.")]

ParseDevice = Annotated[
    Literal[DEVICES] | None,
    typer.Option(help="cpu or cuda (default: the upstream's device, or the events file's)."),
]

ParseSkip = Annotated[int | None, typer.Option(help="Default: the manifest's window.")]

ParseMeasure = Annotated[int | None, typer.Option(help="Default: the manifest's window.")]

ParseFramework = Annotated[
    str | None, typer.Option(help="mlperf/fambench: what ran (default: external / pytorch).")
]

ParseLatencyTarget = Annotated[
    float | None,
    typer.Option(
        help="fambench: the inference p95 batch latency goal (ms), judged by FAMBench's p95 "
        "of each log; a miss is marked."
    ),
]

ParseJson = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the stored result JSON on stdout (a list if several); the rest on stderr.",
    ),
]

ParseModel = Annotated[
    str | None, typer.Option(help="mlperf: the model that ran (default: the SUT, 'sut').")
]

ParseRound = Annotated[
    str | None,
    typer.Option(
        "--round",
        help="mlperf-training: the round whose rules to check against (4.0), where no folder "
        "name says it (training_results_v4.0/).",
    ),
]
