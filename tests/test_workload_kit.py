"""The workload kit (adapters/_shared): what every framework's workload shares, tested on the
host's Python (it is stdlib only), and the rule that keeps it shared: each workload script
reaches it with one bootstrap line and defines none of what it owns."""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "adapters" / "_shared"
sys.path.insert(0, str(SHARED))
import model_math  # noqa: E402
import workload_kit as kit  # noqa: E402

BOOTSTRAP = (
    'sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_shared"))'
)
# What the kit and model_math own: a workload script defining one of these repeats them.
KIT_OWNED = {
    "cpu_name", "cpu_native_bf16", "run_loadgen", "emit", "unsupported", "parse_args_common",
    "bert_forward_flops", "resnet50_forward_flops", "training_flops_per_sample",
    "forward_flops_per_sample", "_threads_from_argv", "threads_from_argv", "counts",
    "shape_text", "linear_params", "linear_forward_flops", "element_size", "conv_out",
    "_conv_out",
}  # fmt: skip
KIT_CONSTANTS = {"BERT_BASE", "LN_EPS", "DROPOUT", "STAGES", "RESNET50_PARAMS",
                 "BERT_BASE_PARAMS", "UNSUPPORTED_EXIT", "INDEX_BYTES"}  # fmt: skip


def scripts() -> list[Path]:
    """The workload-side files of each framework folder (not its host adapter, not _shared)."""
    adapters = ROOT / "adapters"
    return sorted(
        p
        for folder in adapters.iterdir()
        if folder.is_dir() and folder.name != "_shared"
        for p in folder.glob("*.py")
        if p.name != "__init__.py"
    )


@pytest.mark.parametrize("path", scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_script_reaches_the_kit_by_one_line_and_repeats_none_of_it(path: Path) -> None:
    text = path.read_text()
    tree = ast.parse(text)
    inserts = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
               and ast.unparse(n.func) == "sys.path.insert"]  # fmt: skip
    imports_kit = any(
        isinstance(n, ast.Import) and any(a.name in ("workload_kit", "model_math") for a in n.names)
        for n in ast.walk(tree)
    )
    if imports_kit and len(inserts) == 1:  # the script run first puts _shared on the path
        assert BOOTSTRAP in text, ast.unparse(inserts[0])
    else:  # a module imported by a script that did (zoo.py, torch_blocks.py) or stdlib only
        assert not inserts, f"{path.name}: reach _shared by the one bootstrap line"
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
    assert not defined & KIT_OWNED, f"{path.name} repeats the kit: {defined & KIT_OWNED}"
    assert not assigned & KIT_CONSTANTS, (
        f"{path.name} repeats model_math: {assigned & KIT_CONSTANTS}"
    )
    # The events file and the LoadGen hand-off are the kit's: no script names their variables
    # in code (docstrings may describe the contract) or imports the retired helpers.
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
        and n.body and isinstance(n.body[0], ast.Expr)
    }  # fmt: skip
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, str) and id(n) not in docstrings]  # fmt: skip
    assert not [t for t in strings if "DLPERF_EVENTS" in t or "DLPERF_LOADGEN_DIR" in t]
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"loadgen_run", "micro_common"}


def test_events_go_to_the_rank_file_and_steps_are_stamped_after_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(kit.EVENTS_ENV, str(tmp_path / "events.rank{rank}.jsonl"))
    events = kit.Events(rank=3)
    ends = []

    def step() -> float:
        time.sleep(0.01)
        ends.append(time.monotonic())
        return float("nan") if len(ends) == 2 else 0.5

    args = argparse.Namespace(model="bert", precision="amp", mode="train", batch_size=4,
                              xla=False, steps=3, loadgen_settings=None)  # fmt: skip
    events.start("fw", "1.0", args, device="cpu", params=7)
    ready = kit.run_steps(events, steps=3, samples=4, step=step, t_launch=ready_floor())
    kit.finish(events, args, ready)
    lines = [json.loads(x) for x in (tmp_path / "events.rank3.jsonl").read_text().splitlines()]
    assert [e["event"] for e in lines] == ["start", "ready", "step", "step", "step", "end"]
    start = lines[0]
    assert start["framework"] == "fw" and start["batch_size"] == 4 and start["xla"] is False
    assert start["model"] == "bert" and start["params"] == 7 and "python" in start
    marks = lines[2:5]
    assert [m["step"] for m in marks] == [1, 2, 3] and {m["samples"] for m in marks} == {4}
    assert all(m["time"] >= end for m, end in zip(marks, ends, strict=True))  # after the step
    assert [m["loss"] for m in marks] == [0.5, None, 0.5]  # not finite: null, never NaN
    out = capsys.readouterr().out
    assert "step 2/3 loss nan time" in out and "done: 3 steps in" in out


def ready_floor() -> float:
    return time.monotonic()


def test_no_events_variable_means_no_file_and_unsupported_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(kit.EVENTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert kit.Events().unsupported("no kernel") == kit.UNSUPPORTED_EXIT
    assert list(tmp_path.iterdir()) == []
    assert "unsupported: no kernel" in capsys.readouterr().out


def test_inference_steps_have_no_loss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kit.EVENTS_ENV, str(tmp_path / "e.jsonl"))
    events = kit.Events()
    kit.run_steps(events, steps=2, samples=8, step=lambda: None, t_launch=time.monotonic())
    events.close()
    steps = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()][1:]
    assert [sorted(s) for s in steps] == [["event", "samples", "step", "time"]] * 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "resnet50", "--batch-size", "0"], "--batch-size must be >= 1"),
        (["--model", "bert", "--loadgen-settings", "{}"], "--loadgen-settings needs --mode infer"),
        (["--model", "bert", "--seq-len", "513"], "--seq-len must be in 1..512"),
        (["--model", "resnet50", "--image-size", "7"], "framework says no"),
    ],
)
def test_the_common_command_line_refuses_what_no_framework_runs(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = kit.model_parser(None, xla_help="x", threads_help="t")

    def check(args: argparse.Namespace) -> str | None:
        return "framework says no" if args.image_size < 8 else None

    with pytest.raises(SystemExit) as exit_:
        kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"], check)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_threads_are_pinned_before_the_framework_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    kit.pin_omp_threads(["--model", "bert", "--threads=3"])
    assert kit.omp_threads() == 3
    kit.pin_omp_threads(["--threads", "x"])  # not a number: left alone
    assert kit.omp_threads() == 3


def test_model_math_gives_the_published_counts() -> None:
    # ResNet50-v1.5 at 224: 4.09 GMACs (torchvision's and NVIDIA's figure) = 8.18 GFLOPs,
    # counted here layer by layer; the PyTorch workload's forward hooks gave the same number.
    assert model_math.resnet50_forward_flops(1000, 224) == 8_178_368_512
    # BERT-base, seq 128: 12 layers x (4 H^2 + 2 H I) + MLM H^2 + H V per token, 2 per MAC,
    # plus attention 4 S^2 H per layer and the pooler/NSP once.
    h, i, v, s = 768, 3072, 30522, 128
    per_token = 12 * (4 * h * h + 2 * h * i) + h * h + h * v
    expected = 2 * per_token * s + 12 * 4 * s * s * h + 2 * (h * h + 2 * h)
    assert model_math.bert_forward_flops(s) == expected
    train = argparse.Namespace(model="bert", seq_len=s, mode="train")
    assert model_math.flops_per_sample(train) == 3 * expected
    assert model_math.flops_per_sample(argparse.Namespace(**{**vars(train), "mode": "infer"})) == (
        expected
    )
    linear = argparse.Namespace(model="linear", in_features=1024, out_features=1024, layers=4,
                                mode="train", precision="fp32")  # fmt: skip
    counts = model_math.micro_counts(linear)
    assert counts["params"] == 4 * (1024 * 1024 + 1024) and counts["unit"] == "TF/s"
    assert counts["flops_per_sample"] == 3 * 2 * 4 * 1024 * 1024
    bag = argparse.Namespace(model="embeddingbag", num_embeddings=10, embedding_dim=56,
                             bag_size=34, mode="infer", precision="amp")  # fmt: skip
    assert model_math.micro_counts(bag)["bytes_per_sample"] == 34 * 56 * 2


# --------------------------------------------------------------------------------------------
# The worker sequence: kit.main(hooks) and kit.micro_main(hooks) with a pretend framework
# --------------------------------------------------------------------------------------------


class Pretend(kit.Hooks):
    """A framework without a framework: records which hooks ran, in order."""

    framework, version, compiler = "pretend", "0.1", "jit"
    practice_empty = "none here"

    def __init__(self, fail_in: str = "", world: int = 1) -> None:
        self.calls: list[str] = []
        self.fail_in, self.world = fail_in, world

    def hook(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_in:
            raise kit.Unsupported(f"no {name} here")

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        self.hook("parse_args")
        p = kit.model_parser(None, xla_help="x", threads_help="t")
        return kit.parse_model_args(p, argv, model_math.BERT_BASE["max_positions"])

    def threads(self, args: argparse.Namespace) -> None:
        self.hook("threads")

    def describe(self, args: argparse.Namespace) -> dict[str, object]:
        self.hook("describe")
        return {"params": 7, "flops_per_sample": 2e9}

    def cuda_missing(self) -> str | None:
        return "no GPU in a pretend framework"

    def place(self, args: argparse.Namespace) -> kit.Place:
        self.hook("place")
        return kit.Place(rank=1, world=self.world, events_rank=3)

    def setup(self, args: argparse.Namespace) -> None:
        self.hook("setup")

    def build(self, args: argparse.Namespace) -> str:
        self.hook("build")
        return "model"

    def make_step(self, args: argparse.Namespace, model: str) -> Callable[[], float]:
        self.hook("make_step")
        return lambda: 0.25

    def make_predict(self, args: argparse.Namespace, model: str) -> Callable[[int], None]:
        self.hook("make_predict")
        return lambda n: self.calls.append(f"predict {n}")

    def facts(self, args: argparse.Namespace, model: str | None) -> kit.Facts:
        self.hook("facts")
        return kit.Facts("cpu", "a CPU", threads=2, params=7, flops=2e9,
                         practice={"fused": True}, extra={"tf32": None},
                         notes=("a note",))  # fmt: skip

    def sync(self) -> None:
        self.hook("sync")

    def teardown(self) -> None:
        self.hook("teardown")


def run_main(main: Callable[..., int], hooks: kit.Hooks, argv: list[str], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[dict]]:  # fmt: skip
    monkeypatch.setenv(kit.EVENTS_ENV, str(tmp_path / "events.rank{rank}.jsonl"))
    code = main(hooks, argv)
    found = sorted(tmp_path.glob("events.rank*.jsonl"))
    return code, [json.loads(line) for p in found for line in p.read_text().splitlines()]


def test_main_runs_the_hooks_in_order_and_announces_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = Pretend(world=2)
    argv = ["--model", "resnet50", "--steps", "2", "--batch-size", "4", "--xla"]
    code, events = run_main(kit.main, hooks, argv, tmp_path, monkeypatch)
    assert code == 0
    assert hooks.calls == ["parse_args", "threads", "place", "setup", "build", "make_step",
                           "facts", "sync", "teardown"]  # fmt: skip
    assert (tmp_path / "events.rank3.jsonl").exists()  # the place's events rank
    assert [e["event"] for e in events] == ["start", "ready", "step", "step", "end"]
    start = events[0]
    assert start["framework"] == "pretend" and start["framework_version"] == "0.1"
    assert (start["rank"], start["world_size"], start["params"]) == (1, 2, 7)
    assert start["practice"] == {"fused": True} and start["tf32"] is None
    assert [e["loss"] for e in events[2:4]] == [0.25, 0.25]
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "pretend 0.1 resnet50: 7 params, 2.00 GFLOPs/sample (train), batch 4, image 224, fp32, "
        "jit, cpu (a CPU), 2 threads, 2 steps",
        "best practice: fused True",
        "a note",
    ]


def test_main_infers_through_predict_and_turns_unsupported_into_its_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = Pretend()
    argv = ["--model", "bert", "--mode", "infer", "--steps", "1", "--batch-size", "3"]
    code, events = run_main(kit.main, hooks, argv, tmp_path, monkeypatch)
    assert code == 0 and "make_step" not in hooks.calls and "predict 3" in hooks.calls
    assert "loss" not in events[2]
    for hook in ("setup", "build", "make_step"):  # before the announcement: no start event
        (tmp_path / "events.rank3.jsonl").unlink()
        failing = Pretend(fail_in=hook)
        argv = ["--model", "bert", "--steps", "1"]
        code, events = run_main(kit.main, failing, argv, tmp_path, monkeypatch)
        assert code == kit.UNSUPPORTED_EXIT and "teardown" not in failing.calls
        assert events == [{"event": "unsupported", "reason": f"no {hook} here"}]


def test_main_describes_without_a_run_and_refuses_cuda_without_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = Pretend()
    code, events = run_main(kit.main, hooks, ["--model", "bert", "--describe"], tmp_path,
                            monkeypatch)  # fmt: skip
    assert code == 0 and events == [] and hooks.calls[-1] == "describe"
    described = json.loads(capsys.readouterr().out)
    assert described == {"params": 7, "flops_per_sample": 2e9, "framework_version": "0.1"}
    code, events = run_main(kit.main, Pretend(), ["--model", "bert", "--device", "cuda"],
                            tmp_path, monkeypatch)  # fmt: skip
    assert code == kit.NO_DEVICE_EXIT and events == []
    assert "no GPU in a pretend framework" in capsys.readouterr().err


class PretendMicro(Pretend):
    ops = {"linear": "pretend.Linear"}

    def parse_args(self, argv: list[str] | None) -> argparse.Namespace:
        self.hook("parse_args")
        return kit.parse_micro_args(argv, None, threads_help="t")

    def cannot_run(self, args: argparse.Namespace) -> str | None:
        return "no embedding bags" if args.model == "embeddingbag" else None


def test_micro_main_counts_the_operator_and_says_what_it_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks = PretendMicro()
    argv = ["--model", "linear", "--steps", "1", "--in-features", "8", "--out-features", "8"]
    code, events = run_main(kit.micro_main, hooks, argv, tmp_path, monkeypatch)
    assert code == 0 and "build" not in hooks.calls and "place" not in hooks.calls
    start = events[0]
    assert start["op"] == "pretend.Linear" and start["impl"] == "micro"
    assert start["shape"] == "8 -> 8 x 4 layers" and start["params"] == 4 * (8 * 8 + 8)
    out = capsys.readouterr().out
    assert out.startswith("pretend 0.1 micro linear (pretend.Linear), 8 -> 8 x 4 layers: 288 ")
    (tmp_path / "events.rank0.jsonl").unlink()
    code, events = run_main(kit.micro_main, PretendMicro(), ["--model", "embeddingbag"],
                            tmp_path, monkeypatch)  # fmt: skip
    assert code == kit.UNSUPPORTED_EXIT
    assert events == [{"event": "unsupported", "reason": "no embedding bags"}]
    kit.micro_main(PretendMicro(), ["--model", "embeddingbag", "--describe"])
    described = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert described["unsupported"] == "no embedding bags" and described["unit"] == "GB/s"


def test_the_first_call_of_a_compiled_step_fails_as_unsupported_and_later_ones_crash() -> None:
    calls = []

    def step() -> float:
        calls.append(1)
        raise RuntimeError("graph conversion failed\nat line 3")

    guarded = kit.unsupported_if_first_fails(step, "the compiler failed on bert")
    with pytest.raises(kit.Unsupported, match="^the compiler failed on bert: RuntimeError: "
                                              "graph conversion failed$"):  # fmt: skip
        guarded()
    with pytest.raises(RuntimeError):
        guarded()


def test_a_torch_like_update_goes_through_the_loss_scaler_when_there_is_one() -> None:
    seen: list[str] = []

    class Loss:
        def backward(self) -> None:
            seen.append("backward")

    class Optimizer:
        def step(self) -> None:
            seen.append("step")

    class Scaler:
        def scale(self, loss: Loss) -> Loss:
            seen.append("scale")
            return loss

        def step(self, optimizer: Optimizer) -> None:
            seen.append("scaler.step")
            optimizer.step()

        def update(self) -> None:
            seen.append("update")

    kit.backward_and_update(Loss(), Optimizer())
    assert seen == ["backward", "step"]
    seen.clear()
    kit.backward_and_update(Loss(), Optimizer(), Scaler())
    assert seen == ["scale", "backward", "scaler.step", "step", "update"]
