"""OneFlow's official implementations in profile current: models ResNet50 and LiBai BERT.

Dry-runs and parsers run everywhere; fetch + verify and the CPU smoke run need local clones of
the upstreams (DLPERF_TEST_MIRRORS, see conftest.upstream_mirror) and skip without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import upstream_mirror

from dlperf.logformats import LogContext, parse_log
from dlperf.official.checkout import fetch_source, verify_checkout
from dlperf.official.manifest import find_manifest, load_manifests

RESNET = "oneflow-models-resnet50-current"
BERT = "libai-bert-current"
MODELS_COMMIT = "fc7cbf8da9b2ee21fa0e9613dd0668c3b45dad4d"
LIBAI_COMMIT = "9dcbe3b281c98ba9a3bd192495bef42570095336"

# Captured here from a CPU run of the pinned models commit + patch 0001 (OneFlow 0.9.0,
# `dlperf run oneflow resnet50 --impl official --device cpu --batch-size 1`), verbatim.
RESNET_LINES = """\
***** Model Init Finish, time escapled: 0.00344 s *****
[rank:0] [train], epoch: 0/50, iter: 20/1281167, loss: 7.01456, top1: 0.00000, throughput: 0.45, timestamp: 27484.661344 | 2026-11-26 16:25:17.886
[rank:0] [train], epoch: 0/50, iter: 40/1281167, loss: 6.92612, top1: 0.00000, throughput: 0.30, timestamp: 27552.362240 | 2026-11-26 16:26:25.587
"""  # noqa: E501

# Real LiBai lines, from upstream's own projects/Baichuan/README.md at the pinned commit
# (log_period 1, global batch 8); the second one logged a NaN loss.
LIBAI_LINES = """\
[09/19 14:39:40 lb.utils.events]:  eta: 22:07:15  iteration: 87/18660  consumed_samples: 704  total_loss: 10.36  time: 4.2893 s/iter  data_time: 0.0105 s/iter total_throughput: 1.87 samples/s lr: 6.99e-07
[09/19 14:39:44 lb.utils.events]:  eta: 22:07:07  iteration: 88/18660  consumed_samples: 712  total_loss: nan  time: 4.2889 s/iter  data_time: 0.0104 s/iter total_throughput: 1.87 samples/s lr: 7.07e-07
"""  # noqa: E501


def dlperf(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLPERF_HOME": str(home), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args], capture_output=True, text=True, env=env
    )


def test_manifests_are_the_current_defaults() -> None:
    manifests = load_manifests()
    for name, model in ((RESNET, "resnet50"), (BERT, "bert")):
        m = manifests[name]
        assert (m.profile, m.framework, m.model, m.default) == ("current", "oneflow", model, True)
        assert find_manifest("oneflow", model).name == name  # current is the default profile
        assert find_manifest("oneflow", model, profile="dlperf-2020").name.startswith(
            "oneflow-benchmark-"
        )
        assert m.environment.python == "3.10" and "oneflow==1.0.0" in m.environment.requirements
    assert manifests[RESNET].upstream.commit == MODELS_COMMIT
    assert manifests[BERT].upstream.commit == LIBAI_COMMIT


def _node_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if "oneflow.distributed.launch" in line]


@pytest.mark.parametrize(
    ("flags", "expect", "absent"),
    [
        ((), ["--nproc_per_node 1 --nnodes 1 --node_rank 0", "--scale-grad --lr 0.768"],
         ["--use-fp16"]),
        (("--amp",), ["--use-fp16 --channel-last --lr 1.536"], ["--scale-grad"]),
    ],
)  # fmt: skip
def test_resnet50_dry_runs(tmp_path, flags, expect, absent) -> None:
    out = dlperf("run", "oneflow", "resnet50", "--impl", "official", "--profile", "current",
                 "--device", "cuda", "--batch-size", "128", "--dry-run", *flags,
                 home=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (line,) = _node_lines(out.stdout)
    assert "CUDA_VISIBLE_DEVICES=0 NCCL_LAUNCH_MODE=PARALLEL" in line
    assert "train.py --ofrecord-path '' --ofrecord-part-num 256 --num-devices-per-node 1" in line
    assert "--train-batch-size 128" in line and "--graph" in line
    assert "--print-interval 20 --print-timestamp --total-batches 120 --synthetic-data" in line
    for text in expect:
        assert text in line
    for text in absent:
        assert text not in line
    assert "log format oneflow_models; window skip 20, measure 100" in " ".join(out.stdout.split())


def test_resnet50_two_nodes_of_eight(tmp_path) -> None:
    out = dlperf("run", "oneflow", "resnet50", "--impl", "official", "--device", "cuda", "--amp",
                 "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b", "--dry-run",
                 home=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = _node_lines(out.stdout)
    assert len(lines) == 2
    for rank, line in enumerate(lines):
        assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in line
        assert (
            f"--nproc_per_node 8 --nnodes 2 --node_rank {rank} --master_addr a --master_port 29500"
        ) in line
        assert "--num-devices-per-node 8" in line and "--num-nodes" not in line
        assert "--train-batch-size 256 " in line and "--use-fp16" in line


@pytest.mark.parametrize("amp", [False, True])
def test_bert_dry_runs(tmp_path, amp) -> None:
    out = dlperf("run", "oneflow", "bert", "--impl", "official", "--device", "cuda",
                 "--batch-size", "32", "--dry-run", *(["--amp"] if amp else []),
                 home=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (line,) = _node_lines(out.stdout)
    assert "ONEFLOW_FUSE_OPTIMIZER_UPDATE_CAST=true" in line
    assert (
        "tools/train_net.py --config-file configs/bert_base_pretrain_synthetic.py "
        "train.train_micro_batch_size=32 train.dist.data_parallel_size=1 train.log_period=20"
    ) in line
    assert "train.train_iter=120" in line
    assert f"train.amp.enabled={amp}" in line
    assert "log format libai; window skip 20, measure 100" in " ".join(out.stdout.split())


def test_bert_two_nodes_of_eight(tmp_path) -> None:
    out = dlperf("run", "oneflow", "bert", "--impl", "official", "--device", "cuda",
                 "--nodes", "2", "--devices-per-node", "8", "--hosts", "a,b", "--dry-run",
                 home=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = _node_lines(out.stdout)
    assert [f"--node_rank {r} --master_addr a" in line for r, line in enumerate(lines)] == [
        True,
        True,
    ]
    assert all("train.dist.data_parallel_size=16" in line for line in lines)


def test_xla_is_refused_by_both(tmp_path) -> None:
    for model in ("resnet50", "bert"):
        out = dlperf("run", "oneflow", model, "--impl", "official", "--device", "cuda", "--xla",
                     "--dry-run", home=tmp_path)  # fmt: skip
        assert out.returncode == 1 and "cannot run with --xla" in out.stderr + out.stdout


def test_oneflow_models_parser_on_real_lines() -> None:
    run = parse_log("oneflow_models", RESNET_LINES, LogContext(1, 1))
    assert [(m.step, m.samples) for m in run.marks] == [(20, 0.0), (40, 20.0)]
    assert run.marks[1].time - run.marks[0].time == pytest.approx(67.700896)
    assert run.losses == [7.01456, 6.92612] and run.failure is None
    # Without --print-timestamp the line's date (milliseconds) is the clock; other ranks and
    # eval lines are left out; 8 ranks of 2 count 16 samples per step.
    other = RESNET_LINES.replace("[rank:0]", "[rank:1]")
    plain = RESNET_LINES.replace(", timestamp: 27484.661344", "").replace(
        ", timestamp: 27552.362240", ""
    )
    run = parse_log("oneflow_models", other + plain, LogContext(2, 8))
    assert [m.samples for m in run.marks] == [0.0, 320.0]
    assert run.marks[1].time - run.marks[0].time == pytest.approx(67.701)


def test_libai_parser_on_real_lines() -> None:
    run = parse_log("libai", LIBAI_LINES, LogContext(8, 1))
    # time x (iteration - 1): 4.2893 x 86 and 4.2889 x 87 s; samples from consumed_samples
    assert [(m.step, m.samples) for m in run.marks] == [(88, 0.0), (89, 8.0)]
    assert run.marks[0].time == pytest.approx(4.2893 * 86)
    rate = 8 / (run.marks[1].time - run.marks[0].time)
    assert rate == pytest.approx(1.88, abs=0.01)  # upstream printed 1.87 (its mean over 87 steps)
    assert run.failure and "NaN" in run.failure
    # The first two steps are not timed by LiBai: no mark, not malformed.
    early = LIBAI_LINES.replace("iteration: 87/", "iteration: 1/")
    run = parse_log("libai", early, LogContext(8, 1))
    assert [m.step for m in run.marks] == [89] and run.malformed == 0


def _missing_blobs(mirror: Path, commit: str) -> list[str]:
    out = subprocess.run(
        ["git", "rev-list", "--objects", "--missing=print", commit],
        cwd=mirror, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [line[1:] for line in out.stdout.splitlines() if line.startswith("?")]


@pytest.mark.parametrize(
    ("name", "repo"), [(RESNET, "Oneflow-Inc/models"), (BERT, "Oneflow-Inc/libai")]
)
def test_fetch_and_verify_against_a_mirror(tmp_path, monkeypatch, name, repo) -> None:
    mirror = upstream_mirror(repo)
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    upstream = load_manifests()[name].upstream
    missing = _missing_blobs(mirror, upstream.commit)
    if missing:
        pytest.skip(
            f"the clone of {repo} lacks object(s) {', '.join(missing)} of the pinned commit"
        )
    path = fetch_source(upstream, sources_dir=mirror)
    verify_checkout(upstream, path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True)
    assert head.stdout.strip() == upstream.commit
    if name == RESNET:
        text = (path / "Vision/classification/image/resnet50/config.py").read_text()
        assert 'args.device = "cuda" if flow.cuda.is_available() else "cpu"' in text
    else:
        assert (path / "configs/bert_base_pretrain_synthetic.py").is_file()
    out = dlperf("sources", "verify", name, home=tmp_path)
    assert out.returncode == 0 and f"{name}: ok {upstream.commit[:12]}" in out.stdout


@pytest.mark.framework
def test_resnet50_cpu_smoke_run(tmp_path) -> None:
    """Upstream's train.py on a CPU through dlperf (OneFlow 0.9.0, dlperf's own oneflow env, as
    --python: OneFlow 1.0 is not on PyPI). Batch 1, steps 20..40 (the log's 20-step marks)."""
    from dlperf.adapters import get_adapter
    from dlperf.envs import ensure_env

    mirror = upstream_mirror("Oneflow-Inc/models")
    env = ensure_env(get_adapter("oneflow").env_spec("cpu"))
    run_env = {**env.run_env(), "DLPERF_HOME": str(tmp_path / "home")}
    run_env.pop("VIRTUAL_ENV")
    run_env["PATH"] = os.environ.get("PATH", "")
    run_env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # dlperf itself
    argv = [sys.executable, "-m", "dlperf", "run", "oneflow", "resnet50", "--impl", "official",
            "--profile", "current", "--device", "cpu", "--python", str(env.python),
            "--batch-size", "1", "--skip", "20", "--measure", "20", "--repeats", "1",
            "--timeout", "900", "--sources-dir", str(mirror), "--results-dir",
            str(tmp_path / "results"), "--json"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (path,) = (tmp_path / "results").rglob("*.json")
    result = json.loads(path.read_text())
    assert result["status"] == "ok" and result["source"]["profile"] == "current"
    assert result["source"]["commit"] == MODELS_COMMIT
    (repeat,) = result["repeats"]
    window = repeat["window"]
    assert repeat["status"] == "ok"
    assert (window["start_step"], window["end_step"], window["samples"]) == (20, 40, 20.0)
    assert repeat["throughput"] == pytest.approx(window["samples"] / window["elapsed_s"])
    assert repeat["throughput"] > 0
