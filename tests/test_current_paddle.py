"""PaddlePaddle's official implementations in profile `current`: PaddleClas ResNet50 and (below)
PaddleNLP BERT.

CI runs the manifest and dry-run tests (no network, no upstream code) and the parser test on
lines of a real run. Against a local copy of github.com/PaddlePaddle/PaddleClas
(DLPERF_TEST_MIRRORS, see conftest.upstream_mirror): fetch + verify of the pinned commit, and a
CPU smoke run through `dlperf run --impl official --device cpu`, which also needs an interpreter
with paddlepaddle 3.x (CPU) and PaddleClas's requirements: DLPERF_TEST_PADDLECLAS_PYTHON.

Mirrors made by the search tool's snapshots lack files of 4 MiB and more; PaddleClas's commit
has a few (a .pdparams at the root, gifs, a .ttf, a .dll), so such a mirror cannot give the
exact commit: the fetch test then skips, naming them, and the smoke run uses a stand-in
repository holding the commit's tree less those files (all the code is there).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import upstream_mirror

from dlperf.logformats import LogContext, parse_log
from dlperf.official.manifest import find_manifest, load_manifests

ROOT = Path(__file__).resolve().parents[1]
NAME = "paddleclas-resnet50-current"
COMMIT = "d178931fca432204e6b7422bac4f92e09ff22fa4"

# A real run of the pinned commit + patch 0001 here (paddlepaddle 3.3.1 CPU, Python 3.11, through
# paddle.distributed.launch, batch 2, Global.iter_per_epoch=6): rank 0's lines, echoed by launch.
REAL_LINES = """\
[2026/11/26 16:23:51] ppcls INFO: train with paddle 3.3.1 and device Place(cpu)
[2026/11/26 16:23:55] ppcls INFO: [Train][Epoch 1/1][Iter: 0/6]lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00000, CELoss: 6.95714, loss: 6.95714, batch_cost: 2.97210s, reader_cost: 0.56115, ips: 0.67293 samples/s, eta: 0:00:17
[2026/11/26 16:23:56] ppcls INFO: [Train][Epoch 1/1][Iter: 1/6]lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00000, CELoss: 35.80735, loss: 35.80735, batch_cost: 1.17921s, reader_cost: 0.00400, ips: 1.69605 samples/s, eta: 0:00:05
[2026/11/26 16:23:57] ppcls INFO: [Train][Epoch 1/1][Iter: 2/6]lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00000, CELoss: 45.37011, loss: 45.37011, batch_cost: 1.23286s, reader_cost: 0.00209, ips: 1.62225 samples/s, eta: 0:00:04
[2026/11/26 16:23:59] ppcls INFO: [Train][Epoch 1/1][Iter: 3/6]lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00000, CELoss: 50.02758, loss: 50.02758, batch_cost: 1.42301s, reader_cost: 0.00050, ips: 1.40547 samples/s, eta: 0:00:04
[2026/11/26 16:24:00] ppcls INFO: [Train][Epoch 1/1][Iter: 4/6]lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00000, CELoss: 52.95217, loss: 52.95217, batch_cost: 1.44790s, reader_cost: 0.00146, ips: 1.38131 samples/s, eta: 0:00:02
[2026/11/26 16:24:01] ppcls INFO: [Train][Epoch 1/1][Iter: 5/6]lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00000, CELoss: 54.82260, loss: 54.82260, batch_cost: 1.34692s, reader_cost: 0.00368, ips: 1.48487 samples/s, eta: 0:00:01
[2026/11/26 16:24:01] ppcls INFO: [Train][Epoch 1/1][Avg]top1: 0.00000, top5: 0.00000, CELoss: 54.82260, loss: 54.82260
[2026/11/26 16:24:02] ppcls INFO: Already save model in /tmp/pcls-out/output/latest
LAUNCH INFO 2026-11-26 16:24:05,182 Pod completed
"""  # noqa: E501
IPS = re.compile(r"\[Iter: (\d+)/\d+\].*?ips: (\S+) samples/s")


def dlperf(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_manifest_is_the_current_default_with_its_own_upstream_name() -> None:
    manifests = load_manifests()
    m = manifests[NAME]
    assert (m.profile, m.framework, m.model, m.default) == ("current", "paddle", "resnet50", True)
    assert find_manifest("paddle", "resnet50").name == NAME  # the default profile is current
    assert find_manifest("paddle", "resnet50", profile="dlperf-2020").name != NAME
    assert m.upstream.commit == COMMIT
    old = {x.upstream.name for x in manifests.values() if x.profile == "dlperf-2020"}
    assert m.upstream.name not in old
    assert (ROOT / "patches" / m.upstream.name / "0001-synthetic-dataset.patch").is_file()
    assert "paddlepaddle-gpu==3.3.1" in m.environment.requirements
    assert m.log_format == "paddle" and (m.window.skip, m.window.measure) == (20, 100)
    assert "xla" in m.unsupported


def dry_run(tmp_path: Path, *extra: str, model: str = "resnet50") -> str:
    out = dlperf(
        "run", "paddle", model, "--impl", "official", "--profile", "current",
        "--dry-run", *extra, env={"DLPERF_HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    return " ".join(out.stdout.split())  # rich wraps long lines


COMMON = (
    "-m paddle.distributed.launch --gpus 0 --log_dir",
    "tools/train.py -c ppcls/configs/ImageNet/ResNet/ResNet50.yaml -o Global.device=gpu",
    "-o Global.epochs=1 -o Global.eval_during_train=False -o Global.save_interval=0 "
    "-o Global.print_batch_step=1 -o Global.use_visualdl=False -o Arch.pretrained=False",
    "-o Global.iter_per_epoch=120 -o DataLoader.Train.dataset.name=SyntheticDataset",
)


def test_dry_run_one_gpu(tmp_path: Path) -> None:
    out = dry_run(tmp_path, "--device", "cuda")
    assert f"{NAME} (current): https://github.com/PaddlePaddle/PaddleClas @ {COMMIT}" in out
    assert "knobs applied: batch_size, steps, synthetic, fp32, no_xla;" in out
    assert "window skip 20, measure 100" in out
    assert "CUDA_VISIBLE_DEVICES=0 " in out
    for part in COMMON:
        assert part in out
    assert "-o DataLoader.Train.sampler.batch_size=128 " in out
    assert out.endswith("-o AMP.use_amp=False")
    assert "Global.device=cpu" not in out and "PADDLE_MASTER" not in out


def test_dry_run_amp(tmp_path: Path) -> None:
    out = dry_run(tmp_path, "--device", "cuda", "--amp")
    assert "knobs applied: batch_size, steps, synthetic, amp, no_xla;" in out
    assert "-o DataLoader.Train.sampler.batch_size=256 " in out
    assert out.endswith("-o AMP.use_amp=True -o AMP.level=O1")


@pytest.mark.parametrize(
    ("model", "per_gpu_batch"),
    [("resnet50", "-o DataLoader.Train.sampler.batch_size=128 "), ("bert", "--batch_size 32 ")],
)
def test_dry_run_two_nodes_of_eight(model: str, per_gpu_batch: str, tmp_path: Path) -> None:
    out = dry_run(
        tmp_path, "--device", "cuda", "--nodes", "2", "--devices-per-node", "8",
        "--hosts", "10.0.0.1,10.0.0.2", model=model,
    )  # fmt: skip
    assert "knobs applied: batch_size, steps, synthetic, fp32, no_xla, multi_node;" in out
    gpus = "0,1,2,3,4,5,6,7"
    for rank, ip in enumerate(("10.0.0.1", "10.0.0.2")):
        assert f"node {rank} ({ip}):" in out
        assert (
            f"CUDA_VISIBLE_DEVICES={gpus} PADDLE_MASTER=10.0.0.1:29500 PADDLE_NNODES=2 "
            f"PADDLE_RANK={rank} POD_IP={ip} "
        ) in out
    assert out.count(f"-m paddle.distributed.launch --gpus {gpus} --log_dir") == 2
    assert out.count(per_gpu_batch) == 2  # per GPU


@pytest.mark.parametrize(
    ("model", "tail"),
    [
        ("resnet50", "-o AMP.use_amp=False -o Global.device=cpu"),  # the later -o wins
        ("bert", "--use_amp false --device cpu"),  # argparse: the later --device wins
    ],
)
def test_dry_run_on_cpu_with_a_users_interpreter(model: str, tail: str, tmp_path: Path) -> None:
    python = tmp_path / "site" / "bin" / "python3"  # there, but a dry run does not probe it
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    out = dry_run(
        tmp_path, "--device", "cpu", "--python", str(python), "--batch-size", "2", model=model
    )
    assert "knobs applied: batch_size, steps, synthetic, fp32, no_xla, cpu;" in out
    assert f"{python} -m paddle.distributed.launch --gpus 0 " in out
    assert out.endswith(tail)


def test_dry_run_with_a_dataset_reads_it_instead_of_synthetic_data(tmp_path: Path) -> None:
    out = dry_run(tmp_path, "--device", "cuda", "--data-dir", "/data/imagenet")
    assert "knobs applied: batch_size, steps, fp32, no_xla;" in out
    assert "-o DataLoader.Train.dataset.image_root=/data/imagenet " in out
    assert "-o DataLoader.Train.dataset.cls_label_path=/data/imagenet/train_list.txt " in out
    assert "SyntheticDataset" not in out


def test_paddle_parser_reads_todays_paddleclas_lines() -> None:
    # ips = per-GPU batch / batch_cost of the step; Iter is 0-based, one line per step
    run = parse_log("paddle", REAL_LINES, LogContext(2, 1, 1))
    steps = [m.step for m in run.marks]
    assert steps == list(range(7))
    ips = {int(i): float(r) for i, r in IPS.findall(REAL_LINES)}
    for before, after in zip(run.marks, run.marks[1:], strict=False):
        assert after.samples == 2  # the samples since the mark before
        assert after.time - before.time == pytest.approx(2 / ips[before.step], rel=1e-9)
    assert run.losses[:2] == [6.95714, 35.80735]  # each line's `loss:` (not CELoss)


# --------------------------------------------------------------------- against a local mirror


def missing_objects(mirror: Path, commit: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(mirror), "rev-list", "--objects", "--missing=print", commit],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return [line[1:] for line in out.splitlines() if line.startswith("?")]


def test_fetch_and_verify_against_a_mirror(tmp_path: Path, monkeypatch) -> None:
    mirror = upstream_mirror("PaddlePaddle/PaddleClas")
    missing = missing_objects(mirror, COMMIT)
    if missing:
        pytest.skip(
            f"{mirror} lacks {len(missing)} object(s) of {COMMIT[:12]} (its files of 4 MiB and "
            "more: a snapshot leaves them out), so no clone of the exact commit can be made from "
            "it; use a full clone of github.com/PaddlePaddle/PaddleClas"
        )
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    out = dlperf("sources", "fetch", NAME, "--sources-dir", str(mirror), timeout=600)
    assert out.returncode == 0, out.stderr + out.stdout
    out = dlperf("sources", "verify", NAME)
    assert out.returncode == 0, out.stderr + out.stdout
    checkout = tmp_path / "sources" / f"paddleclas-current-{COMMIT[:12]}"
    assert (checkout / "ppcls/data/dataloader/synthetic_dataset.py").is_file()


def stand_in(mirror: Path, tmp_path: Path) -> tuple[Path, str]:
    """A repository with the pinned commit's tree less the files the mirror lacks, committed."""
    repo = tmp_path / "paddleclas-standin"
    repo.mkdir()
    index = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "standin.index")}
    git = ["git", "--git-dir", str(mirror)]
    subprocess.run([*git, "read-tree", COMMIT], env=index, check=True)
    gone = set(missing_objects(mirror, COMMIT))
    listing = subprocess.run(
        [*git, "ls-tree", "-r", COMMIT], capture_output=True, text=True, check=True
    ).stdout
    paths = [line.split("\t", 1)[1] for line in listing.splitlines() if line.split()[2] in gone]
    if paths:
        subprocess.run([*git, "update-index", "--force-remove", *paths], env=index, check=True)
    subprocess.run([*git, "checkout-index", "-a", f"--prefix={repo}/"], env=index, check=True)
    run = {"cwd": repo, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q"], **run)
    subprocess.run(["git", "add", "-A"], **run)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "stand-in"], **run
    )
    commit = subprocess.run(["git", "rev-parse", "HEAD"], **run, text=True).stdout.strip()
    return repo, commit


@pytest.mark.framework
def test_cpu_smoke_run(tmp_path: Path) -> None:
    mirror = upstream_mirror("PaddlePaddle/PaddleClas")
    python = os.environ.get("DLPERF_TEST_PADDLECLAS_PYTHON")
    if not python:
        pytest.skip(
            "set DLPERF_TEST_PADDLECLAS_PYTHON to an interpreter with paddlepaddle 3.x (CPU) and "
            "PaddleClas's requirements (the manifest's pins, paddlepaddle for paddlepaddle-gpu)"
        )
    env = {"DLPERF_HOME": str(tmp_path / "home")}
    sources = mirror
    if missing_objects(mirror, COMMIT):  # run the same code from a stand-in commit
        sources, commit = stand_in(mirror, tmp_path)
        manifests = tmp_path / "manifests"
        manifests.mkdir()
        text = (ROOT / "third_party_scripts" / f"{NAME}.toml").read_text()
        (manifests / f"{NAME}.toml").write_text(text.replace(COMMIT, commit))
        env["DLPERF_MANIFESTS"] = str(manifests)
    results = tmp_path / "results"
    out = dlperf(
        "run", "paddle", "resnet50", "--impl", "official", "--profile", "current",
        "--device", "cpu", "--batch-size", "2", "--skip", "2", "--measure", "3",
        "--repeats", "1", "--python", python, "--sources-dir", str(sources),
        "--results-dir", str(results), "--timeout", "900",
        env=env, cwd=tmp_path, timeout=1200,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    (path,) = results.glob("*/*.json")  # results/<config>/<id>.json
    result = json.loads(path.read_text())
    assert result["source"]["profile"] == "current"
    assert result["source"]["name"] == "paddleclas-current"
    (repeat,) = result["repeats"]
    assert repeat["status"] == "ok"
    log = Path(repeat["log_path"])
    log = log if log.is_absolute() else tmp_path / log
    ips = {int(i): float(r) for i, r in IPS.findall(log.read_text(errors="replace"))}
    assert sorted(ips) == list(range(5))  # Global.iter_per_epoch = skip + measure
    window = [2 / ips[i] for i in range(2, 5)]  # steps 3..5: Iter 2..4
    assert repeat["throughput"] == pytest.approx(2 * 3 / sum(window), rel=1e-6)
    print(f"CPU smoke: {repeat['throughput']:.3f} samples/s over steps 3-5 of 5, batch 2")


# ===================================================================== PaddleNLP BERT
#
# No local copy of github.com/PaddlePaddle/PaddleNLP could be made on the machine this was
# written on (the search tool's snapshots stop at 500 MiB; PaddleNLP is larger; no GitHub
# access), so the patches were made against run_pretrain.py as the search tool's file index
# holds it at the pinned commit. With a full clone (DLPERF_TEST_MIRRORS), the tests below fetch,
# verify and run the real commit. DLPERF_TEST_PADDLENLP_STANDIN may name a git repository whose
# HEAD holds the pinned commit's slm/model_zoo/bert/run_pretrain.py (and nothing more needed):
# the smoke run then uses it in the commit's place, as the PaddleClas one does.

BERT = "paddlenlp-bert-current"
BERT_COMMIT = "c502c9213fc22a210b139ec669a369ee22d0bf45"
BERT_PATCHES = (
    "0001-synthetic-data.patch",
    "0002-read-loss-back-before-timing.patch",
    "0003-cuda-only-on-gpu.patch",
    "0004-save-steps-zero-saves-nothing.patch",
)

# A real run of run_pretrain.py (the pinned text + patches 0001-0004) here: paddlepaddle 3.3.1
# CPU, paddlenlp 3.0.0b4, Python 3.11, through paddle.distributed.launch, bert-base-uncased,
# --synthetic_seq_len 32 --batch_size 2 --max_steps 3 --logging_steps 1 --device cpu; rank 0's
# lines as launch echoes them (paddlenlp's logger colours them even into a file). On a CUDA
# build the line ends 'max_mem_reserved: N MB, max_mem_allocated: N MB' instead of two blanks.
BERT_LINES = (
    "Namespace(model_type='bert', model_name_or_path='bert-base-uncased', input_dir='', "
    "output_dir='/tmp/pnlp-out', max_predictions_per_seq=5, batch_size=2, learning_rate=5e-05, "
    "weight_decay=0.0, adam_epsilon=1e-08, max_grad_norm=1.0, max_steps=3, "
    "preprocessing_num_workers=0, warmup_steps=3, logging_steps=1, save_steps=0, seed=42, "
    "device='cpu', use_amp=False, amp_level='O2', scale_loss=32768, to_static=False, "
    "profiler_options=None, fuse_transformer=False, cinn=False, synthetic_data=True, "
    "synthetic_seq_len=32)\n"
    "\x1b[32m[2026-11-26 16:40:36,646] [    INFO]\x1b[0m - global step: 1, epoch: 0, batch: 0, "
    "loss: 11.343805, avg_reader_cost: 0.00306 sec, avg_batch_cost: 2.69549 sec, "
    "avg_samples: 2.00000, ips: 0.74198 sequences/sec,  \x1b[0m\n"
    "\x1b[32m[2026-11-26 16:40:39,478] [    INFO]\x1b[0m - global step: 2, epoch: 0, batch: 1, "
    "loss: 9.195286, avg_reader_cost: 0.00074 sec, avg_batch_cost: 2.83037 sec, "
    "avg_samples: 2.00000, ips: 0.70662 sequences/sec,  \x1b[0m\n"
    "\x1b[32m[2026-11-26 16:40:40,821] [    INFO]\x1b[0m - global step: 3, epoch: 0, batch: 2, "
    "loss: 6.902895, avg_reader_cost: 0.00018 sec, avg_batch_cost: 1.34193 sec, "
    "avg_samples: 2.00000, ips: 1.49039 sequences/sec,  \x1b[0m\n"
    "LAUNCH INFO 2026-11-26 16:40:42,817 Pod completed\n"
    "LAUNCH INFO 2026-11-26 16:40:42,818 Exit code 0\n"
)
GLOBAL_IPS = re.compile(r"global step: (\d+), .*?ips: (\S+) sequences/sec")


def test_bert_manifest_is_the_current_default_with_its_own_upstream_name() -> None:
    manifests = load_manifests()
    m = manifests[BERT]
    assert (m.profile, m.framework, m.model, m.default) == ("current", "paddle", "bert", True)
    assert find_manifest("paddle", "bert").name == BERT  # the default profile is current
    assert find_manifest("paddle", "bert", profile="dlperf-2020").name == "paddle-models-bert"
    assert (m.upstream.commit, m.upstream.name) == (BERT_COMMIT, "paddlenlp-current")
    old = {x.upstream.name for x in manifests.values() if x.profile == "dlperf-2020"}
    assert m.upstream.name not in old
    folder = ROOT / "patches" / m.upstream.name
    assert tuple(sorted(p.name for p in folder.glob("*.patch"))) == BERT_PATCHES
    for name in BERT_PATCHES:  # every patch edits the one script
        text = (folder / name).read_text()
        assert "+++ b/slm/model_zoo/bert/run_pretrain.py" in text
        assert text.count("diff --git") == 1
    reqs = m.environment.requirements
    assert "paddlepaddle-gpu==3.3.1" in reqs and "paddlenlp==3.0.0b4" in reqs
    assert any("stable/cu126/" in r for r in reqs)
    assert m.log_format == "paddle" and (m.window.skip, m.window.measure) == (20, 100)
    assert "xla" in m.unsupported and m.command.cwd == "slm/model_zoo/bert"


def bert_dry_run(tmp_path: Path, *extra: str) -> str:
    return dry_run(tmp_path, *extra, model="bert")


BERT_COMMON = (
    "-m paddle.distributed.launch --gpus 0 --log_dir",
    "run_pretrain.py --model_type bert --model_name_or_path bert-base-uncased "
    "--max_predictions_per_seq 20 --batch_size",
    "--learning_rate 1e-4 --weight_decay 1e-2 --adam_epsilon 1e-6 --input_dir '' --output_dir",
    "--logging_steps 1 --save_steps 0 --device gpu --max_steps 120 "
    "--synthetic_data true --synthetic_seq_len 128 --use_amp",
)


def test_bert_dry_run_one_gpu(tmp_path: Path) -> None:
    out = bert_dry_run(tmp_path, "--device", "cuda")
    assert f"{BERT} (current): https://github.com/PaddlePaddle/PaddleNLP @ {BERT_COMMIT}" in out
    assert "knobs applied: batch_size, steps, synthetic, fp32, no_xla;" in out
    assert "log format paddle; window skip 20, measure 100" in out
    assert "/sources/paddlenlp-current-c502c9213fc2/slm/model_zoo/bert && " in out
    assert "CUDA_VISIBLE_DEVICES=0 " in out
    for part in BERT_COMMON:
        assert part in out
    assert "--batch_size 32 " in out
    assert out.endswith("--use_amp false")
    assert "--device cpu" not in out and "PADDLE_MASTER" not in out


def test_bert_dry_run_amp(tmp_path: Path) -> None:
    out = bert_dry_run(tmp_path, "--device", "cuda", "--amp")
    assert "knobs applied: batch_size, steps, synthetic, amp, no_xla;" in out
    assert "--batch_size 64 " in out
    assert out.endswith("--use_amp true")  # upstream's --amp_level default: O2


def test_bert_dry_run_with_a_dataset_reads_its_files(tmp_path: Path) -> None:
    out = bert_dry_run(tmp_path, "--device", "cuda", "--data-dir", "/data/bert-phase1")
    assert "knobs applied: batch_size, steps, fp32, no_xla;" in out
    assert "--input_dir /data/bert-phase1 " in out
    assert "--synthetic_data" not in out


def test_paddle_parser_reads_paddlenlp_run_pretrain_lines() -> None:
    # ips = per-GPU batch / avg_batch_cost over logging_steps (1) steps; global step is 1-based
    run = parse_log("paddle", BERT_LINES, LogContext(2, 1, 1))
    assert [m.step for m in run.marks] == [0, 1, 2, 3]
    ips = {int(i): float(r) for i, r in GLOBAL_IPS.findall(BERT_LINES)}
    for before, after in zip(run.marks, run.marks[1:], strict=False):
        assert after.samples == 2
        assert after.time - before.time == pytest.approx(2 / ips[after.step], rel=1e-9)
    assert run.losses == [11.343805, 9.195286, 6.902895]  # not the Namespace's scale_loss


def test_paddle_parser_reads_the_cuda_build_form_and_a_logging_interval() -> None:
    # Reconstructed from run_pretrain.py's format string (not captured: no GPU here): on a CUDA
    # build the memory fields follow ips; logging_steps 10 gives one line per 10 steps.
    line = (
        "[2026-01-01 00:00:{s:02d},000] [    INFO] - global step: {n}, epoch: 0, batch: {b}, "
        "loss: 7.5, avg_reader_cost: 0.00100 sec, avg_batch_cost: 0.10000 sec, "
        "avg_samples: 32.00000, ips: {ips:.5f} sequences/sec, max_mem_reserved: 9000 MB, "
        "max_mem_allocated: 8000 MB\n"
    )
    text = "".join(line.format(s=i, n=10 * i, b=10 * i - 1, ips=320.0 + i) for i in (1, 2, 3))
    run = parse_log("paddle", text, LogContext(32, 1, 8))
    assert [m.step for m in run.marks] == [0, 10, 20, 30]
    for before, after in zip(run.marks, run.marks[1:], strict=False):
        rate = 320.0 + after.step // 10
        assert after.time - before.time == pytest.approx(10 * 32 / rate, rel=1e-9)


# --------------------------------------------------------------------- against a local mirror


def has_commit(repo: Path, commit: str) -> bool:
    probe = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    return probe.returncode == 0 and not missing_objects(repo, commit)


def test_bert_fetch_and_verify_against_a_mirror(tmp_path: Path, monkeypatch) -> None:
    mirror = upstream_mirror("PaddlePaddle/PaddleNLP")
    if not has_commit(mirror, BERT_COMMIT):
        pytest.skip(f"{mirror} lacks {BERT_COMMIT[:12]} or some of its files: use a full clone")
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    out = dlperf("sources", "fetch", BERT, "--sources-dir", str(mirror), timeout=900)
    assert out.returncode == 0, out.stderr + out.stdout
    out = dlperf("sources", "verify", BERT)
    assert out.returncode == 0, out.stderr + out.stdout
    script = tmp_path / "sources" / f"paddlenlp-current-{BERT_COMMIT[:12]}"
    script = script / "slm/model_zoo/bert/run_pretrain.py"
    assert "class SyntheticPretrainingDataset(Dataset):" in script.read_text()


@pytest.mark.framework
def test_bert_cpu_smoke_run(tmp_path: Path) -> None:
    standin = os.environ.get("DLPERF_TEST_PADDLENLP_STANDIN")
    if standin:
        sources = Path(standin)
        commit = subprocess.run(
            ["git", "-C", standin, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    else:
        sources, commit = upstream_mirror("PaddlePaddle/PaddleNLP"), BERT_COMMIT
        if not has_commit(sources, commit):
            pytest.skip(f"{sources} lacks {commit[:12]}: use a full clone of PaddleNLP")
    python = os.environ.get("DLPERF_TEST_PADDLENLP_PYTHON")
    if not python:
        pytest.skip(
            "set DLPERF_TEST_PADDLENLP_PYTHON to an interpreter with paddlepaddle 3.x (CPU), "
            "paddlenlp 3.0.0b4 and the manifest's other pins"
        )
    env = {"DLPERF_HOME": str(tmp_path / "home")}
    if commit != BERT_COMMIT:
        manifests = tmp_path / "manifests"
        manifests.mkdir()
        text = (ROOT / "third_party_scripts" / f"{BERT}.toml").read_text()
        (manifests / f"{BERT}.toml").write_text(text.replace(BERT_COMMIT, commit))
        env["DLPERF_MANIFESTS"] = str(manifests)
    results = tmp_path / "results"
    out = dlperf(
        "run", "paddle", "bert", "--impl", "official", "--profile", "current",
        "--device", "cpu", "--batch-size", "2", "--skip", "2", "--measure", "3",
        "--repeats", "1", "--python", python, "--sources-dir", str(sources),
        "--results-dir", str(results), "--timeout", "900",
        env=env, cwd=tmp_path, timeout=1200,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    (path,) = results.glob("*/*.json")
    result = json.loads(path.read_text())
    assert result["source"]["profile"] == "current"
    assert result["source"]["name"] == "paddlenlp-current"
    assert sorted(result["source"]["patches"]) == list(BERT_PATCHES)
    (repeat,) = result["repeats"]
    assert repeat["status"] == "ok"
    log = Path(repeat["log_path"])
    log = log if log.is_absolute() else tmp_path / log
    ips = {int(i): float(r) for i, r in GLOBAL_IPS.findall(log.read_text(errors="replace"))}
    assert sorted(ips) == [1, 2, 3, 4, 5]  # --max_steps = skip + measure
    window = [2 / ips[i] for i in (3, 4, 5)]
    assert repeat["throughput"] == pytest.approx(2 * 3 / sum(window), rel=1e-6)
    print(
        f"CPU smoke: {repeat['throughput']:.3f} samples/s over steps 3-5 of 5, batch 2, "
        f"seq 128, wall {repeat['wall_s']:.1f} s"
    )
