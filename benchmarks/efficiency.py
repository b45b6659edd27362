"""dlperf's PyTorch workload against plain hand-written training loops: prints figures only.

    python benchmarks/efficiency.py                       # this CPU, small shapes, eager
    python benchmarks/efficiency.py --modes eager,xla     # and torch.compile
    python benchmarks/efficiency.py --device cuda --amp --python "$(command -v python3)"
    python benchmarks/efficiency.py --diagnose            # also dlperf's classes in the bare loop

For each model (ResNet50-v1.5, BERT-base) and mode (eager, `--xla` = torch.compile) it runs, in
turn and interleaved repeat by repeat so that drift of a shared machine hits both alike:

* `dlperf run pytorch MODEL ... --repeats 1` with the interpreter given (`--python`, default
  dlperf's built PyTorch env) and dlperf's default best practice for the device;
* `benchmarks/reference_loops.py` with the same interpreter, shapes, precision, window (skip,
  measure) and thread budget: a loop with no dlperf code, synchronised only at the window's ends.

and prints dlperf's median / the reference's median. Target on a GPU: >= 0.95 for every row.
`--diagnose` adds dlperf's own model classes in the same bare loop, BERT with and without an
all-ones attention mask, ResNet50 with and without channels_last: which part of a gap is the
model, which the harness, which a setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlperf.adapters import get_adapter
from dlperf.envs import ensure_env
from dlperf.system import cpu_budget

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "reference_loops.py"
WORKLOAD = get_adapter("pytorch").folder / "workload.py"
# (batch, image size or sequence length) per model: DLPerf's full shapes on a GPU, small ones
# that a 2-core CPU finishes in minutes.
SHAPES = {
    ("cuda", "resnet50"): ({"fp32": 128, "amp": 256}, 224),
    ("cuda", "bert"): ({"fp32": 32, "amp": 64}, 128),
    ("cpu", "resnet50"): ({"fp32": 16, "amp": 16}, 64),
    ("cpu", "bert"): ({"fp32": 4, "amp": 4}, 64),
}


def shape_args(device: str, model: str, precision: str) -> tuple[int, list[str]]:
    batches, size = SHAPES[device, model]
    flag = "--image-size" if model == "resnet50" else "--seq-len"
    return batches[precision], [flag, str(size)]


def dlperf_once(args: argparse.Namespace, model: str, xla: bool, results: Path) -> float:
    precision = "amp" if args.amp else "fp32"
    batch, shape = shape_args(args.device, model, precision)
    argv = [sys.executable, "-m", "dlperf", "run", "pytorch", model, "--device", args.device]
    argv += ["--batch-size", str(batch), *shape, "--skip", str(args.skip)]
    argv += ["--measure", str(args.measure), "--repeats", "1", "--python", args.python]
    argv += ["--results-dir", str(results), "--json", "--timeout", "3600"]
    argv += ["--amp"] if args.amp else []
    argv += ["--xla"] if xla else []
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"dlperf run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)["metrics"]["throughput"]["median"]


def reference_once(args: argparse.Namespace, model: str, xla: bool, *extra: str) -> dict:
    precision = "amp" if args.amp else "fp32"
    batch, shape = shape_args(args.device, model, precision)
    argv = [args.python, str(REFERENCE), "--model", model, "--device", args.device]
    argv += ["--batch-size", str(batch), *shape, "--skip", str(args.skip)]
    argv += ["--measure", str(args.measure), *extra]
    argv += ["--threads", str(cpu_budget())] if args.device == "cpu" else []
    argv += ["--amp"] if args.amp else []
    argv += ["--xla"] if xla else []
    out = subprocess.run(argv, capture_output=True, text=True, env=args.run_env)
    if out.returncode != 0:
        raise SystemExit(f"reference loop failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def diagnostics(model: str) -> list[tuple[str, list[str]]]:
    """(label, reference_loops.py arguments) of the diagnostic rows for `model`."""
    mine = ["--model-source", "dlperf", "--workload", str(WORKLOAD)]
    if model == "bert":
        return [
            ("dlperf BERT class, bare loop, no mask", mine),
            ("dlperf BERT class, bare loop, all-ones mask", [*mine, "--bert-mask", "ones"]),
            ("reference BERT, all-ones mask", ["--bert-mask", "ones"]),
        ]
    return [
        ("dlperf ResNet50 class, bare loop", mine),
        ("dlperf ResNet50 class, bare loop, channels_last 0", [*mine, "--channels-last", "0"]),
        ("dlperf ResNet50 class, bare loop, channels_last 1", [*mine, "--channels-last", "1"]),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", help="interpreter with torch (default: dlperf's built env)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--amp", action="store_true")
    p.add_argument("--models", default="resnet50,bert")
    p.add_argument("--modes", default="eager", help="eager, xla or both (comma-separated)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--xla-repeats", type=int, help="repeats of the xla rows (compiling is slow)")
    p.add_argument("--deadline-s", type=float, help="start no row after this many seconds")
    p.add_argument("--skip", type=int, help="default: 20 on CUDA, 3 on a CPU")
    p.add_argument("--measure", type=int, help="default: 100 on CUDA, 10 on a CPU")
    p.add_argument("--diagnose", action="store_true")
    p.add_argument("--json-out", type=Path, help="also write the rows as JSON here")
    args = p.parse_args()
    cuda = args.device == "cuda"
    args.skip = args.skip if args.skip is not None else (20 if cuda else 3)
    args.measure = args.measure or (100 if cuda else 10)
    if args.python:
        args.run_env = dict(os.environ)
    else:
        env = ensure_env(get_adapter("pytorch").env_spec(args.device))
        args.python, args.run_env = str(env.python), env.run_env()
    rows = []
    started = time.monotonic()
    print(
        f"device {args.device}, {'amp' if args.amp else 'fp32'}, skip {args.skip}, measure "
        f"{args.measure}, {args.repeats} repeats interleaved, python {args.python}",
        flush=True,
    )
    modes = args.modes.split(",")
    plan = [(m, mode) for mode in modes for m in args.models.split(",")]  # eager rows first
    with tempfile.TemporaryDirectory() as tmp:
        for model, mode in plan:
            xla = mode == "xla"
            repeats = args.xla_repeats if xla and args.xla_repeats else args.repeats
            if args.deadline_s and time.monotonic() - started > args.deadline_s:
                skipped = "skipped: --deadline-s"
                rows.append({"model": model, "mode": mode, "dlperf": None, "reference": None,
                             "ratio": None, "reference_model": skipped})  # fmt: skip
                continue
            ours, theirs, what = [], [], ""
            for i in range(repeats):
                ours.append(dlperf_once(args, model, xla, Path(tmp) / f"{model}-{mode}"))
                ref = reference_once(args, model, xla)
                theirs.append(ref["throughput"])
                what = ref["model"]
                print(f"  {model} {mode} #{i + 1}: dlperf {ours[-1]:.2f}, reference "
                      f"{theirs[-1]:.2f} samples/s", flush=True)  # fmt: skip
            a, b = statistics.median(ours), statistics.median(theirs)
            rows.append({"model": model, "mode": mode, "dlperf": a, "reference": b,
                         "ratio": a / b, "reference_model": what})  # fmt: skip
            if args.diagnose and not xla:
                for label, extra in diagnostics(model):
                    runs = [reference_once(args, model, xla, *extra) for _ in range(repeats)]
                    value = statistics.median(r["throughput"] for r in runs)
                    print(f"  {label}: {value:.2f} samples/s", flush=True)
                    rows.append({"model": model, "mode": mode, "dlperf": None,
                                 "reference": value, "ratio": None,
                                 "reference_model": label})  # fmt: skip
    print(f"({time.monotonic() - started:.0f} s)")
    print()
    print("| workload | mode | dlperf (median) | reference loop (median) | ratio | reference |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ours = f"{r['dlperf']:,.2f}" if r["dlperf"] is not None else "—"
        ratio = f"**{r['ratio']:.2f}**" if r["ratio"] is not None else "—"
        theirs = f"{r['reference']:,.2f}" if r["reference"] is not None else "—"
        print(f"| {r['model']} | {r['mode']} | {ours} | {theirs} | {ratio} | "
              f"{r['reference_model']} |")  # fmt: skip
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
