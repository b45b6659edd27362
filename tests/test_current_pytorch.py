"""Profile current, PyTorch: pytorch/examples ResNet50 and DLE BERT at recent upstream commits.

(a) the manifests load and dry-run (1 GPU, AMP, 2 nodes x 8) with the command lines expected;
(b) fetch + verify against a local mirror of the upstream (DLPERF_TEST_MIRRORS; skipped in CI);
(c) a CPU smoke run of pytorch/examples imagenet/main.py through `dlperf run` (framework);
(d) the 1-based progress lines of today's imagenet/main.py, captured from a real run here.
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

from dlperf.envs import envs_root
from dlperf.logformats import LogContext, parse_log
from dlperf.official.manifest import find_manifest, load_manifests

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = "pytorch-examples-resnet50-current"
BERT = "nvidia-dle-pytorch-bert-current"
EXAMPLES_COMMIT = "77f55b912142e11fcfdf5b530231fb9c52f181e8"
DLE_COMMIT = "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd"


def dlperf(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "DLPERF_HOME": str(home), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args],
        capture_output=True,
        text=True,
        env=run_env,
        cwd=ROOT,
        timeout=1800,
    )


# --------------------------------------------------------------------------- (a) manifests


def test_the_current_manifests_load_and_are_the_defaults() -> None:
    manifests = load_manifests()
    for name in (EXAMPLES, BERT):
        m = manifests[name]
        assert m.profile == "current" and m.default and m.framework == "pytorch"
    assert find_manifest("pytorch", "resnet50").name == EXAMPLES  # current is the default profile
    assert find_manifest("pytorch", "bert").name == BERT
    assert find_manifest("pytorch", "resnet50", profile="dlperf-2020").name == (
        "pytorch-examples-resnet50"
    )
    examples, bert = manifests[EXAMPLES], manifests[BERT]
    assert (examples.upstream.commit, bert.upstream.commit) == (EXAMPLES_COMMIT, DLE_COMMIT)
    assert examples.log_format == "pytorch_examples_1based"
    assert bert.log_format == "dllogger_pytorch"
    # their own patch folders: not the dlperf-2020 ones
    assert examples.upstream.name == "pytorch-examples-current"
    assert bert.upstream.name == "nvidia-dle-pytorch-current"
    assert examples.environment.requirements[:2] == ("torch==2.14.1", "torchvision==0.29.1")
    assert bert.environment.image == "nvcr.io/nvidia/pytorch:24.12-py3"


def dry_run(model: str, *extra: str, home: Path) -> str:
    proc = dlperf(
        "run", "pytorch", model, "--impl", "official", "--profile", "current",
        "--device", "cuda", "--dry-run", *extra, home=home,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return " ".join((proc.stdout + proc.stderr).split())  # rich wraps long lines


def test_examples_dry_runs(tmp_path: Path) -> None:
    one = dry_run("resnet50", home=tmp_path)
    assert "main.py --arch resnet50 --epochs 1 --workers 8 --momentum 0.125 --print-freq 1" in one
    assert "--multiprocessing-distributed --dist-backend nccl" in one
    assert "--dist-url tcp://localhost:29500 --world-size 1 --rank 0" in one
    assert "--batch-size 128 --max-iters 120 --dummy --synthetic" in one
    assert "CUDA_VISIBLE_DEVICES=0 " in one and "--amp" not in one
    assert "log format pytorch_examples_1based; window skip 20, measure 100" in one
    amp = dry_run("resnet50", "--amp", home=tmp_path)
    assert "--batch-size 256 --max-iters 120 --dummy --synthetic --amp" in amp
    two = dry_run("resnet50", "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b",
                  home=tmp_path)  # fmt: skip
    for rank in (0, 1):
        assert f"--dist-url tcp://a:29500 --world-size 2 --rank {rank} '' --batch-size 1024" in two
    assert two.count("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7") == 2


def test_bert_dry_runs(tmp_path: Path) -> None:
    one = dry_run("bert", home=tmp_path)
    assert "docker run --rm --network=host --ipc=host --gpus=all" in one
    assert "nvcr.io/nvidia/pytorch:24.12-py3 python -m torch.distributed.run" in one
    assert "--nproc_per_node=1 --nnodes=1 --node_rank=0 --master_addr=localhost" in one
    assert "-w /workspace/upstream/PyTorch/LanguageModeling/BERT" in one
    assert "--config_file=bert_configs/base.json --vocab_file=vocab/vocab" in one
    assert "--train_batch_size=32 --max_steps=125 --synthetic" in one and "--fp16" not in one
    amp = dry_run("bert", "--amp", home=tmp_path)
    assert "--train_batch_size=64 --max_steps=125 --synthetic --fp16" in amp
    two = dry_run("bert", "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b",
                  home=tmp_path)  # fmt: skip
    for rank in (0, 1):
        assert f"--nproc_per_node=8 --nnodes=2 --node_rank={rank} --master_addr=a" in two


# --------------------------------------------------------------------------- (b) mirrors


def missing_objects(mirror: Path, commit: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(mirror), "rev-list", "--objects", "--no-walk", "--missing=print", commit],
        capture_output=True,
        text=True,
    ).stdout
    return [line[1:] for line in out.splitlines() if line.startswith("?")]


@pytest.mark.parametrize(
    ("repo", "name", "commit"),
    [
        ("NVIDIA/DeepLearningExamples", BERT, DLE_COMMIT),
        ("pytorch/examples", EXAMPLES, EXAMPLES_COMMIT),
    ],
)
def test_fetch_and_verify_against_a_mirror(repo: str, name: str, commit: str, tmp_path) -> None:
    mirror = upstream_mirror(repo)
    missing = missing_objects(mirror, commit)
    if missing:
        pytest.skip(
            f"the mirror of {repo} lacks {len(missing)} object(s) of {commit[:12]}'s tree "
            f"({', '.join(m[:12] for m in missing)}): git cannot check that commit out from it"
        )
    fetched = dlperf("sources", "fetch", name, "--sources-dir", str(mirror), home=tmp_path)
    assert fetched.returncode == 0, fetched.stderr + fetched.stdout
    verified = dlperf("sources", "verify", name, home=tmp_path)
    assert verified.returncode == 0, verified.stderr + verified.stdout
    assert f"{name}: ok {commit[:12]}" in " ".join(verified.stdout.split())


# --------------------------------------------------------------------------- (c) CPU smoke


def standin_of_imagenet(mirror: Path, tmp_path: Path) -> tuple[Path, str]:
    """A git repo holding imagenet/ of the pinned pytorch/examples commit, file for file: the
    mirror lacks blobs elsewhere in that commit's tree, so the commit itself cannot be checked
    out; the patches and the script are upstream's all the same."""
    repo = tmp_path / "standin"
    repo.mkdir()

    def git(*args: str, cwd: Path = repo) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
        ).stdout

    git("init", "-q")
    listed = git("ls-tree", "-r", "--name-only", EXAMPLES_COMMIT, "imagenet", cwd=mirror)
    for path in listed.split():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(
            subprocess.run(
                ["git", "-C", str(mirror), "show", f"{EXAMPLES_COMMIT}:{path}"],
                check=True,
                capture_output=True,
            ).stdout
        )
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "imagenet/ of 77f55b9")
    return repo, git("rev-parse", "HEAD").strip()


@pytest.mark.framework
def test_examples_cpu_smoke_run(tmp_path: Path) -> None:
    mirror = upstream_mirror("pytorch/examples")
    repo, commit = standin_of_imagenet(mirror, tmp_path)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    text = (ROOT / "third_party_scripts" / f"{EXAMPLES}.toml").read_text()
    (manifests / f"{EXAMPLES}.toml").write_text(text.replace(EXAMPLES_COMMIT, commit))
    home = tmp_path / "home"
    home.mkdir()
    shared = envs_root()  # the torch env is built once and reused (several GB)
    shared.mkdir(parents=True, exist_ok=True)
    (home / "envs").symlink_to(shared)
    proc = dlperf(
        "run", "pytorch", "resnet50", "--impl", "official", "--profile", "current",
        "--device", "cpu", "--batch-size", "2", "--skip", "2", "--measure", "3",
        "--repeats", "1", "--timeout", "900", "--sources-dir", str(repo),
        "--results-dir", str(tmp_path / "results"), "--json",
        home=home, DLPERF_MANIFESTS=str(manifests),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["source"]["profile"] == "current"
    assert sorted(result["source"]["patches"]) == [
        "0001-max-iters.patch",
        "0002-cpu-gloo.patch",
        "0003-amp.patch",
        "0004-synthetic-on-device.patch",
    ]
    (repeat,) = result["repeats"]
    assert repeat["status"] == "ok"
    assert (repeat["window"]["start_step"], repeat["window"]["end_step"]) == (2, 5)
    # The throughput is the parsed marks': batches 3..5 (printed 1-based) of 2 images each.
    log = Path(repeat["log_path"]).read_text()
    times = [float(t) for t in re.findall(r"Epoch: \[0\]\[\s*[345]/\d+\]\tTime\s+(\S+)", log)]
    assert len(times) == 3
    assert repeat["throughput"] == pytest.approx(6 / sum(times), rel=1e-9)
    assert "using CPU, this will be slow" in log


# --------------------------------------------------------------------------- (d) log format

# imagenet/main.py at 77f55b9 (+ our patches), resnet50, 1 CPU process, batch 2, --print-freq 1,
# captured from `dlperf run pytorch resnet50 --impl official --device cpu` on the 2-core dev VM.
REAL_LINES = "".join(
    "Using device: cpu\n"
    "=> creating model 'resnet50'\n"
    "using CPU, this will be slow\n"
    "Epoch: [0][     1/640584]\tTime  9.887 ( 9.887)"
    "\tData  0.000 ( 0.000)\tLoss 7.2995e+00 (7.2995e+00)"
    "\tAcc@1   0.00 (  0.00)\tAcc@5   0.00 (  0.00)\n"
    "Epoch: [0][     2/640584]\tTime  6.358 ( 8.122)"
    "\tData  0.000 ( 0.000)\tLoss 7.9214e-01 (4.0458e+00)"
    "\tAcc@1  50.00 ( 25.00)\tAcc@5 100.00 ( 50.00)\n"
    "Epoch: [0][     3/640584]\tTime  6.974 ( 7.740)"
    "\tData  0.000 ( 0.000)\tLoss 3.2227e+01 (1.3440e+01)"
    "\tAcc@1  50.00 ( 33.33)\tAcc@5 100.00 ( 66.67)\n"
    "Epoch: [0][     4/640584]\tTime  4.756 ( 6.994)"
    "\tData  0.000 ( 0.000)\tLoss 7.8706e+01 (2.9756e+01)"
    "\tAcc@1  50.00 ( 37.50)\tAcc@5 100.00 ( 75.00)\n"
    "Epoch: [0][     5/640584]\tTime  5.856 ( 6.766)"
    "\tData  0.000 ( 0.000)\tLoss 3.4359e+01 (3.0677e+01)"
    "\tAcc@1  50.00 ( 40.00)\tAcc@5 100.00 ( 80.00)\n"
)


def test_one_based_progress_lines() -> None:
    ctx = LogContext(2, 1, 1)
    run = parse_log("pytorch_examples_1based", REAL_LINES, ctx)
    assert [m.step for m in run.marks] == [0, 1, 2, 3, 4, 5]
    assert run.marks[-1].time == pytest.approx(9.887 + 6.358 + 6.974 + 4.756 + 5.856)
    assert run.marks[2].time == pytest.approx(9.887 + 6.358) and run.marks[2].samples == 2
    assert run.malformed == 0 and run.failure is None
    # The 2020 format reads the same lines one batch late: batch "1" would be the second.
    old = parse_log("pytorch_examples", REAL_LINES, ctx)
    assert [m.step for m in old.marks][:3] == [0, 2, 3]
    # From several ranks: the slowest running average, times its 1-based count.
    ranks = REAL_LINES + REAL_LINES.replace("( 6.766)", "( 7.000)")
    merged = parse_log("pytorch_examples_1based", ranks, ctx)
    assert merged.marks[-1].step == 5 and merged.marks[-1].time == pytest.approx(7.000 * 5)
    # A line printing batch 0 cannot come from this script.
    bad = parse_log("pytorch_examples_1based", REAL_LINES.replace("[     1/", "[     0/"), ctx)
    assert bad.malformed == 1
