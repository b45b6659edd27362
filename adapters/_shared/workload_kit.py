"""The harness every workload script shares, and the worker sequence itself: `main(hooks)`
(workload.py) and `micro_main(hooks)` (micro.py) run the command line, threads, --describe, the
device check, the rank, one announcement (the start event and the log's start line, from the
same `Facts`), the timed steps, the LoadGen hand-off and "end", the same for every framework.
What differs between frameworks (the device set-up, the model, one training step, one
inference call) stays in adapters/<framework>/, as the methods of a `Hooks` subclass.

Standard library only: this runs inside each framework's env, which has no dlperf. A script
reaches this folder with one bootstrap line before its imports from here:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))

The contract with the host (dlperf/events.py holds the same names; a test checks they agree):
JSON lines to the file named by $DLPERF_EVENTS ("{rank}" replaced by the rank): "start" (the
framework, device, parameters, FLOPs per sample, best practice), "ready", one "step" per
iteration with a timestamp taken once the device has finished it, "loadgen", "end" (with the
process's peak resident memory), or "unsupported" with a reason. A human log goes to stdout,
one "step i/N ..." line per step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

import model_math  # beside this file, stdlib only too

EVENTS_ENV = "DLPERF_EVENTS"
LOADGEN_DIR_ENV = "DLPERF_LOADGEN_DIR"
RANKS_ON_HOST_ENV = "DLPERF_RANKS_ON_HOST"  # ranks a launcher started on this host
UNSUPPORTED_EXIT = 4  # the framework cannot run this configuration (the host records why)
NO_DEVICE_EXIT = 2  # --device cuda asked for, but the framework sees no GPU
T = TypeVar("T")

# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def model_parser(
    doc: str | None, *, models: tuple[str, ...] = ("resnet50", "bert"), xla_help: str,
    threads_help: str,
) -> argparse.ArgumentParser:  # fmt: skip
    """workload.py's options, the same in every framework (dlperf.adapter builds them); the
    framework adds its best-practice switches, then calls `parse_model_args`."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", choices=models, required=True)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--xla", action="store_true", help=xla_help)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help=threads_help)
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--loadgen-settings", help="infer: after the steps, run MLPerf LoadGen (JSON)")
    p.add_argument("--describe", action="store_true", help="print params/FLOPs JSON and exit")
    return p


def parse_model_args(
    p: argparse.ArgumentParser, argv: list[str] | None, max_positions: int,
    check: Callable[[argparse.Namespace], str | None] | None = None,
) -> argparse.Namespace:  # fmt: skip
    """Parse, and refuse what no framework can run (argparse's usage error, exit 2). `check`
    adds the framework's own refusal (a message, or None)."""
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.steps < 0:
        p.error("--batch-size must be >= 1 and --steps >= 0")
    if args.loadgen_settings and args.mode != "infer":
        p.error("--loadgen-settings needs --mode infer")
    if check is not None and (problem := check(args)):
        p.error(problem)
    if args.model == "bert" and not 1 <= args.seq_len <= max_positions:
        p.error(f"--seq-len must be in 1..{max_positions}")
    return args


def parse_micro_args(
    argv: list[str] | None, doc: str | None, threads_help: str
) -> argparse.Namespace:
    """micro.py's command line, the same in every framework (see dlperf.adapter)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", choices=("linear", "embeddingbag"), required=True)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--threads", type=int, help=threads_help)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-features", type=int, default=1024, help="linear: first layer's input")
    p.add_argument("--out-features", type=int, default=1024, help="linear: every layer's output")
    p.add_argument("--layers", type=int, default=4, help="linear: how many Linear layers")
    p.add_argument("--num-embeddings", type=int, default=4_800_000, help="embeddingbag: rows")
    p.add_argument("--embedding-dim", type=int, default=56, help="embeddingbag: row width")
    p.add_argument("--bag-size", type=int, default=34, help="embeddingbag: rows per sample")
    p.add_argument("--describe", action="store_true", help="print params/FLOPs/bytes and exit")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.steps < 0:
        p.error("--batch-size must be >= 1 and --steps >= 0")
    sizes = (args.in_features, args.out_features, args.layers, args.num_embeddings,
             args.embedding_dim, args.bag_size)  # fmt: skip
    if min(sizes) < 1:
        p.error("shapes (--in-features ... --bag-size) must be >= 1")
    return args


def pin_omp_threads(argv: list[str]) -> None:
    """--threads N (or --threads=N), read from argv before argparse runs, as OMP_NUM_THREADS:
    for frameworks that read it once at import (MXNet, OneFlow), so call this before."""
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--threads" and i + 1 < len(argv) else None
        if arg.startswith("--threads="):
            value = arg.split("=", 1)[1]
        if value is not None and value.isdigit():
            os.environ["OMP_NUM_THREADS"] = value
            return


# --------------------------------------------------------------------------------------------
# Host facts
# --------------------------------------------------------------------------------------------


def ranks_on_host(default: int = 1) -> int:
    """How many ranks the launcher started on this host (they share its cores)."""
    return int(os.environ.get(RANKS_ON_HOST_ENV, default))


def cores_per_rank(ranks: int) -> int:
    return max(1, (os.cpu_count() or 1) // ranks)


def omp_threads() -> int | None:
    """OMP_NUM_THREADS when it is set to a number (libraries read it at start-up)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else None


def cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_native_bf16() -> bool | None:
    """Whether the CPU has bf16 matmul instructions (x86 AVX512-BF16/AMX, Arm BF16); None if
    /proc/cpuinfo cannot tell. Without them oneDNN emulates bf16 and autocast is far slower
    than fp32 (measured ~20x for BERT on an AVX2-only EPYC), which a report should explain."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return None


def warn_if_bf16_emulated(amp_dtype: str | None) -> None:
    if amp_dtype == "bfloat16" and cpu_native_bf16() is False:
        print("warning: this CPU has no bf16 matmul instructions (no AVX512-BF16/AMX); bf16 "
              "matmuls are emulated and usually much slower than fp32", flush=True)  # fmt: skip


def precision_fields(on_gpu: bool) -> dict[str, object]:
    """Start-event fields on the precision the hardware really computes in: on a GPU, tf32
    False (every workload turns TF32 off: fp32 is honest fp32); on a CPU, whether it has bf16
    matmul instructions (see cpu_native_bf16)."""
    return {"tf32": False if on_gpu else None,
            "cpu_native_bf16": None if on_gpu else cpu_native_bf16()}  # fmt: skip


def no_device(message: str) -> int:
    """--device cuda asked for and no GPU seen: say why on stderr (the host shows it)."""
    print(f"error: --device cuda asked for, but {message}", file=sys.stderr, flush=True)
    return NO_DEVICE_EXIT


def describe(**info: object) -> int:
    """--describe: one JSON line (params, FLOPs per sample in the asked --mode, framework
    version), no run."""
    print(json.dumps(info), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


class Unsupported(Exception):
    """Raised where the framework turns out unable to run the asked configuration; main()
    turns it into an "unsupported" event and UNSUPPORTED_EXIT."""


class Events:
    """The events file of one rank ($DLPERF_EVENTS with "{rank}" replaced); without the
    variable (a script run by hand) events go nowhere."""

    def __init__(self, rank: int = 0) -> None:
        path = os.environ.get(EVENTS_ENV, "").replace("{rank}", str(rank))
        self._file: TextIO | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    def emit(self, event: str, **fields: object) -> None:
        if self._file is not None:
            self._file.write(json.dumps({"event": event, **fields}) + "\n")
            self._file.flush()

    def write_raw(self, text: str) -> None:
        """Text as it is, not an event (the calibration workload's garbage lines)."""
        if self._file is not None:
            self._file.write(text)

    def start(self, framework: str, framework_version: str, args: argparse.Namespace,
              **fields: object) -> None:  # fmt: skip
        """The start event: what ran, with the settings every workload reports."""
        common = {
            "python": platform.python_version(),
            "model": args.model,
            "precision": args.precision,
            "mode": args.mode,
            "batch_size": args.batch_size,
        }
        if hasattr(args, "xla"):
            common["xla"] = args.xla
        self.emit("start", framework=framework, framework_version=framework_version,
                  **common, **fields)  # fmt: skip

    def unsupported(self, reason: str) -> int:
        self.emit("unsupported", reason=reason)
        print(f"unsupported: {reason}", flush=True)
        self.close()
        return UNSUPPORTED_EXIT

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# --------------------------------------------------------------------------------------------
# The announcement: the start event and the log's first lines, from the same facts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What a run announces besides its command line (`Hooks.facts`): the start event and the
    log's first line are both written from these, by `announce` (micro.py: `announce_micro`,
    which counts params and FLOPs itself and leaves those fields unused)."""

    device: str  # "cpu" or "cuda"
    device_name: str
    amp_dtype: str | None = None  # the low-precision dtype --precision amp computes in
    threads: object = None  # CPU threads as the framework reports them (None/0: its default)
    params: int = 0
    flops: float = 0.0  # model FLOPs per sample in the asked --mode
    practice: dict[str, object] = field(default_factory=dict)  # what best practice applied
    world_size: int | None = None  # the start event's, where not the job's ranks (Place.world)
    extra: dict[str, object] = field(default_factory=dict)  # the framework's own start fields
    notes: tuple[str, ...] = ()  # log lines after the announcement


def practice_text(applied: dict[str, object], empty: str = "(none)") -> str:
    """The best-practice settings as the workload really applied them, for the log."""
    return "best practice: " + (", ".join(f"{k} {v}" for k, v in sorted(applied.items())) or empty)


def start_line(label: str, args: argparse.Namespace, facts: Facts, compiler: str | None) -> str:
    """The log's first line: what runs, in the words of the start event."""
    amp = f" ({facts.amp_dtype})" if facts.amp_dtype else ""
    compiled = f", {compiler}" if compiler and args.xla else ""
    return (
        f"{label} {args.model}: {facts.params:,} params, {facts.flops / 1e9:.2f} GFLOPs/sample "
        f"({args.mode}), batch {args.batch_size}, {model_math.shape_text(args)}, "
        f"{args.precision}{amp}{compiled}, {facts.device} ({facts.device_name}), "
        f"{facts.threads or 'default'} threads, {args.steps} steps"
    )


def micro_start_line(label: str, args: argparse.Namespace, facts: Facts, op: str,
                     info: dict) -> str:  # fmt: skip
    """micro.py's first log line: the operator, its shape and what the result is reported in."""
    amp = f" ({facts.amp_dtype})" if facts.amp_dtype else ""
    return (
        f"{label} micro {args.model} ({op}), {model_math.micro_shape_text(args)}: "
        f"{info['params']:,} params, {args.mode}, batch {args.batch_size}, {args.precision}{amp}, "
        f"{facts.device} ({facts.device_name}), {facts.threads or 'default'} threads, "
        f"{args.steps} steps, reported in {info['unit']}"
    )


def announce(events: Events, args: argparse.Namespace, hooks: Hooks, facts: Facts,
             place: Place) -> None:  # fmt: skip
    """workload.py's one announcement: the start event, then the same facts in the log (the
    start line, the best practice applied, notes, the bf16 warning where it applies)."""
    world = place.world if facts.world_size is None else facts.world_size
    events.start(hooks.framework, hooks.version, args, device=facts.device,
                 device_name=facts.device_name, params=facts.params,
                 flops_per_sample=facts.flops, amp_dtype=facts.amp_dtype, threads=facts.threads,
                 **facts.extra, rank=place.rank, world_size=world,
                 practice=facts.practice)  # fmt: skip
    label = hooks.label or f"{hooks.framework} {hooks.version}"
    print(start_line(label, args, facts, hooks.compiler), flush=True)
    print(practice_text(facts.practice, hooks.practice_empty), flush=True)
    for note in facts.notes:
        print(note, flush=True)
    if hooks.warn_bf16 and facts.device == "cpu":
        warn_if_bf16_emulated(facts.amp_dtype)


def announce_micro(events: Events, args: argparse.Namespace, hooks: Hooks, facts: Facts) -> None:
    """micro.py's one announcement: the start event (the operator, its shape and counts), then
    the same facts as the log's first line, and the bf16 warning where it applies."""
    op = hooks.ops[args.model]
    info = model_math.micro_counts(args)
    events.start(hooks.framework, hooks.version, args, device=facts.device,
                 device_name=facts.device_name, impl="micro", op=op, amp_dtype=facts.amp_dtype,
                 threads=facts.threads, shape=model_math.micro_shape_text(args), **facts.extra,
                 **info)  # fmt: skip
    label = hooks.label or f"{hooks.framework} {hooks.version}"
    print(micro_start_line(label, args, facts, op, info), flush=True)
    if hooks.warn_bf16 and args.model == "linear":  # the warning is about matmuls
        warn_if_bf16_emulated(facts.amp_dtype)


# --------------------------------------------------------------------------------------------
# The timed loop and the LoadGen hand-off
# --------------------------------------------------------------------------------------------


def run_steps(
    events: Events, *, steps: int, samples: int, step: Callable[[], float | None],
    t_launch: float, set_up: str = "import, build, data, optimizer",
) -> float:  # fmt: skip
    """Emit "ready", then time `steps` calls of step(). step() returns only once the device has
    finished the step (the framework synchronises and reads a value back inside it: async
    engines return before the work is done), so the stamp taken after it is the step's end. It
    returns the loss as a host float, or None when there is none (inference, some micros).
    Returns the "ready" time."""
    ready = time.monotonic()
    events.emit("ready", time=ready)
    print(f"ready after {ready - t_launch:.2f}s ({set_up})", flush=True)
    prev = ready
    for i in range(1, steps + 1):
        loss = step()
        now = time.monotonic()
        fields: dict[str, Any] = {"step": i, "time": now, "samples": samples}
        shown = ""
        if loss is not None:
            fields["loss"] = loss if math.isfinite(loss) else None
            shown = f" loss {loss:.4f}"
        events.emit("step", **fields)
        print(f"step {i}/{steps}{shown} time {now - prev:.3f}s", flush=True)
        prev = now
    return ready


def hand_to_loadgen(
    settings_json: str, predict: Callable[[int], object], batch_size: int, events: Events
) -> None:
    """Hand a warmed-up model to MLPerf LoadGen (loadgen_run beside this file), which writes its
    logs to $DLPERF_LOADGEN_DIR. predict(n) runs n <= batch_size samples and returns only once
    the device is done."""
    import loadgen_run  # needs mlperf_loadgen: imported only when a LoadGen run is asked

    out_dir = os.environ.get(LOADGEN_DIR_ENV, "mlperf-logs")
    os.makedirs(out_dir, exist_ok=True)
    loadgen_run.run(json.loads(settings_json), out_dir, predict, batch_size)
    events.emit("loadgen", dir=out_dir)


def peak_rss_mib() -> float | None:
    """The most resident memory this process has held so far, in MiB (the kernel's high-water
    mark: model, optimizer state and activations on the host; None where not known)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)  # bytes / KiB


def finish(
    events: Events, args: argparse.Namespace, ready: float,
    predict: Callable[[int], object] | None = None, rank: int = 0,
) -> int:  # fmt: skip
    """After the steps: one LoadGen run per job (rank 0, the model warmed up), then "end"."""
    if getattr(args, "loadgen_settings", None) and rank == 0 and predict is not None:
        hand_to_loadgen(args.loadgen_settings, predict, args.batch_size, events)
    end = time.monotonic()
    events.emit("end", time=end, peak_rss_mib=peak_rss_mib())
    if args.steps:
        print(f"done: {args.steps} steps in {end - ready:.2f}s", flush=True)
    events.close()
    return 0


# --------------------------------------------------------------------------------------------
# Steps: what the frameworks' step functions share
# --------------------------------------------------------------------------------------------


def infer_step(predict: Callable[[int], object], batch_size: int) -> Callable[[], None]:
    """--mode infer's step: one full batch through predict(), which returns once the device is
    done; no loss."""

    def step() -> None:
        predict(batch_size)

    return step


def error_line(exc: BaseException) -> str:
    """An exception as one line for a reason: its type and the first line of its message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0].strip() if text else ''}"


def unsupported_if_first_fails(run: Callable[..., T], what: str) -> Callable[..., T]:
    """`run` with its first call guarded: a graph compiler (--xla) converts the model inside the
    first step, and a failure there is a configuration the framework cannot run (Unsupported,
    "<what>: <error>"), not a crash to time. Later failures propagate."""
    calls = 0

    def guarded(*args: Any) -> T:
        nonlocal calls
        calls += 1
        try:
            return run(*args)
        except Exception as exc:
            if calls > 1:
                raise
            raise Unsupported(f"{what}: {error_line(exc)}"[:500]) from exc

    return guarded


def backward_and_update(loss: Any, optimizer: Any, scaler: Any = None) -> None:
    """The backward pass and the optimizer's update for a torch-like framework (PyTorch,
    Paddle, OneFlow): through the loss scaler where fp16 needs one (scale, step, update)."""
    if scaler is None:
        loss.backward()
        optimizer.step()
        return
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def synced_step(run: Callable[[], Any], sync: Callable[[], None]) -> Callable[[], float | None]:
    """step() from run(), one step whose loss is a device tensor (or None): run it, wait for
    the device (the update included: asynchronous engines return before the work is done),
    then read the loss back as a host float."""

    def step() -> float | None:
        loss = run()
        sync()
        return None if loss is None else float(loss)

    return step


# --------------------------------------------------------------------------------------------
# The worker sequence: a framework supplies Hooks, main() (micro_main()) runs them
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where this process runs in its job (`Hooks.place`)."""

    rank: int = 0
    world: int = 1  # ranks in the job
    events_rank: int | None = None  # the events file's "{rank}", where not `rank`
    replicas: int = 1  # devices this process trains on, each with its own batch


class Hooks:
    """A framework's parts of the worker sequence. workload.py and micro.py each subclass it
    and hand an instance to `main` / `micro_main`, which call the hooks in the order below.
    Any hook from `setup` on may raise Unsupported: the run then ends as an "unsupported"
    event with the reason (and UNSUPPORTED_EXIT), never as a crash."""

    framework = ""  # the start event's name for it ("pytorch")
    version = ""  # the framework's version
    label = ""  # the log's name for it, where more than "<framework> <version>"
    compiler: str | None = None  # what --xla turns on, in the log's words
    practice_empty = "(none)"  # the "best practice:" line's words when nothing applied
    warn_bf16 = False  # warn in the log where this CPU only emulates bf16 matmuls
    ops: dict[str, str] = {}  # micro.py: the operator each --model times

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        """The command line: model_parser with the framework's best-practice switches, then
        parse_model_args (micro.py: parse_micro_args)."""
        raise NotImplementedError

    def threads(self, args: argparse.Namespace) -> None:
        """--threads (or this rank's share of the host's cores), before anything runs."""

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        """--describe: the model's params and FLOPs per sample, without a run (micro.py: the
        kit counts them)."""
        return {}

    def cuda_missing(self) -> str | None:
        """Why --device cuda cannot run (the framework sees no GPU), or None."""
        return None

    def cannot_run(self, args: argparse.Namespace) -> str | None:
        """micro.py: why this framework has no such operator (also said by --describe)."""
        return None

    def place(self, args: argparse.Namespace) -> Place:
        """This process's rank, joining its job where that is how the rank is learnt."""
        return Place()

    def setup(self, args: argparse.Namespace) -> None:
        """The device and the framework's switches, before the model exists."""

    def build(self, args: argparse.Namespace) -> Any:
        """The model, seeded, on the device (not called for micro.py: its step builds it)."""
        return None

    def make_step(self, args: argparse.Namespace, model: Any) -> Callable[[], float | None]:
        """One step, returning once the device has finished it, with the loss as a host float
        (None: no loss)."""
        raise NotImplementedError

    def make_predict(self, args: argparse.Namespace, model: Any) -> Callable[[int], object]:
        """--mode infer: predict(n) runs one forward on n <= batch size rows and returns once
        the device is done (the steps, then LoadGen, call it)."""
        raise NotImplementedError

    def facts(self, args: argparse.Namespace, model: Any) -> Facts:
        """What the run announces, asked once the step exists (so the best practice the step
        applied is known)."""
        raise NotImplementedError

    def sync(self) -> None:
        """Wait for the device (before "ready": the set-up's queued work is not timed)."""

    def teardown(self) -> None:
        """After "end": leave the job."""


def main(hooks: Hooks, argv: list[str] | None = None) -> int:
    """workload.py's whole run, the same for every framework: the command line, threads,
    --describe, the device check, the rank and its events file, then set-up, the model, its
    step, one announcement, the timed steps, LoadGen (rank 0) and "end"."""
    t_launch = time.monotonic()
    args = hooks.parse_args(argv)
    hooks.threads(args)
    if args.describe:
        return describe(**hooks.describe(args), framework_version=hooks.version)
    if args.device == "cuda" and (missing := hooks.cuda_missing()):
        return no_device(missing)
    place = hooks.place(args)
    events = Events(place.rank if place.events_rank is None else place.events_rank)
    try:
        hooks.setup(args)
        model = hooks.build(args)
        predict = hooks.make_predict(args, model) if args.mode == "infer" else None
        if predict is not None:
            step = infer_step(predict, args.batch_size)
        else:
            step = hooks.make_step(args, model)
        announce(events, args, hooks, hooks.facts(args, model), place)
        hooks.sync()
        ready = run_steps(events, steps=args.steps, samples=args.batch_size * place.replicas,
                          step=step, t_launch=t_launch)  # fmt: skip
    except Unsupported as why:
        return events.unsupported(str(why))
    finish(events, args, ready, predict, place.rank)
    hooks.teardown()
    return 0


def micro_main(hooks: Hooks, argv: list[str] | None = None) -> int:
    """micro.py's whole run, the same for every framework: as `main`, for one process, with
    the operator counted by model_math and no LoadGen."""
    t_launch = time.monotonic()
    args = hooks.parse_args(argv)
    hooks.threads(args)
    missing_op = hooks.cannot_run(args)
    if args.describe:
        said = {"unsupported": missing_op} if missing_op else {}
        return describe(**model_math.micro_counts(args), framework_version=hooks.version, **said)
    if args.device == "cuda" and (missing := hooks.cuda_missing()):
        return no_device(missing)
    events = Events()
    try:
        if missing_op:
            raise Unsupported(missing_op)
        hooks.setup(args)
        step = hooks.make_step(args, None)  # the operator is built with its step
        announce_micro(events, args, hooks, hooks.facts(args, None))
        hooks.sync()
        ready = run_steps(events, steps=args.steps, samples=args.batch_size, step=step,
                          t_launch=t_launch, set_up="import, build, data")  # fmt: skip
    except Unsupported as why:
        return events.unsupported(str(why))
    return finish(events, args, ready)
