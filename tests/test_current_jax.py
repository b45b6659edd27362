"""JAX's official implementations in profile current: Flax's own ImageNet example (google/flax
examples/imagenet) for ResNet50, its CLU log lines (format `clu`), and the declared absence of
an official JAX BERT.

Manifest, dry-runs, parser and refusals run everywhere. The patches and fetch + verify need a
local clone of google/flax (DLPERF_TEST_MIRRORS, see conftest.upstream_mirror) and skip without
it; the CPU smoke run (framework) also builds the manifest's pip env.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, upstream_mirror

from dlperf import DlperfError
from dlperf.envs import envs_root
from dlperf.logformats import LogContext, parse_log
from dlperf.official.adapter import OfficialAdapter
from dlperf.official.checkout import fetch_source, verify_checkout
from dlperf.official.manifest import (
    find_manifest,
    load_absences,
    load_manifest,
    load_manifests,
    select_manifests,
)
from dlperf.stats import window_throughput

NAME = "flax-imagenet-resnet50-current"
BERT = "jax-bert-current"
COMMIT = "18f8f311c275d57f46d95e41b15aa97b454754c0"
PATCHES = (
    "0001-synthetic-data.patch",
    "0002-train-only.patch",
    "0003-distributed-initialize.patch",
    "0004-image-size.patch",
)

# Captured here from `dlperf run jax resnet50 --impl official --preset smoke --repeats 1` on the
# 2-core CPU machine, busy with other work (batch 4, 64 px, fp32; the pinned examples/imagenet +
# patches 0001-0004 in the manifest's env), the repeat's log verbatim from its first CLU line on
# (the last lines of the log: upstream logs nothing after its last report).
REAL_LINES = """\
I1128 10:56:23.396713 140145048385216 logging_writer.py:48] [20] steps_per_second=0.0840874, train_accuracy=0.0, train_learning_rate=9.266659439788327e-09, train_loss=6.922275543212891
I1128 10:57:34.984196 140145048385216 logging_writer.py:48] [40] steps_per_second=0.27939, train_accuracy=0.0, train_learning_rate=2.8782526584336665e-08, train_loss=6.92156457901001
I1128 10:58:44.768100 140145048385216 logging_writer.py:48] [60] steps_per_second=0.286644, train_accuracy=0.0, train_learning_rate=4.829373168036e-08, train_loss=6.919867038726807
I1128 10:59:43.167916 140145048385216 logging_writer.py:48] [80] steps_per_second=0.342672, train_accuracy=0.0, train_learning_rate=6.780959438401624e-08, train_loss=6.917232036590576
I1128 11:00:39.277577 140145048385216 logging_writer.py:48] [100] steps_per_second=0.356778, train_accuracy=0.0, train_learning_rate=8.732079948003957e-08, train_loss=6.913686275482178
I1128 11:01:36.211876 140145048385216 logging_writer.py:48] [120] steps_per_second=0.351029, train_accuracy=0.0, train_learning_rate=1.0683667284183684e-07, train_loss=6.909236907958984
"""  # noqa: E501


def dlperf(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "DLPERF_HOME": str(home), "PYTHONPATH": str(ROOT), "COLUMNS": "250",
               **env}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args],
        capture_output=True, text=True, env=run_env, cwd=ROOT, timeout=2400,
    )  # fmt: skip


# --------------------------------------------------------------------------- the manifest


def test_the_manifest_is_the_current_default_and_pins_everything() -> None:
    m = load_manifests()[NAME]
    assert (m.profile, m.framework, m.model, m.default) == ("current", "jax", "resnet50", True)
    assert find_manifest("jax", "resnet50").name == NAME  # current is the default profile
    assert (m.upstream.name, m.upstream.url, m.upstream.commit) == (
        "flax-imagenet-current",
        "https://github.com/google/flax",
        COMMIT,
    )
    assert m.log_format == "clu"
    assert (m.window.log_every, m.window.skip, m.window.measure) == (20, 20, 100)
    assert "--config.log_every_steps=20" in m.command.argv  # the window's marks
    env = m.environment
    assert (env.kind, env.python) == ("pip", "3.11")
    for line in (*env.requirements, *env.cuda_requirements):
        assert "==" in line, line
    assert "jax==0.10.2" in env.requirements and "flax==0.12.8" in env.requirements
    assert env.cuda_requirements == ("jax[cuda12]==0.10.2",)
    assert set(m.unsupported) == {"xla"}
    patches = sorted(p.name for p in (ROOT / "patches" / m.upstream.name).glob("*.patch"))
    assert tuple(patches) == PATCHES
    for name in PATCHES:  # each says why before its diff
        text = (ROOT / "patches" / m.upstream.name / name).read_text()
        assert not text.startswith("diff") and "Not in upstream." in text.split("diff --git")[0]


def test_the_cuda_plugin_is_installed_only_for_cuda_runs() -> None:
    adapter = OfficialAdapter(load_manifests()[NAME])
    cpu, cuda = adapter.env_spec("cpu"), adapter.env_spec("cuda")
    assert "jax[cuda12]==0.10.2" in cuda.requirements
    assert "jax[cuda12]==0.10.2" not in cpu.requirements
    assert cpu.requirements == cuda.requirements[: len(cpu.requirements)]
    assert cpu.name != cuda.name


# --------------------------------------------------------------------------- dry runs


def _node_lines(text: str) -> list[str]:
    """Each node's line of a dry run: 'node R (host): cd ... main.py ...'."""
    return re.findall(r"\bnode (\d+ \([^)]*\): cd .*?)(?= node \d+ \(|$)", text)


@pytest.mark.parametrize(
    ("flags", "expect", "absent"),
    [
        ((), ["--config.batch_size=128 --config.image_size=224",
              "--config.half_precision=False", "knobs applied: batch_size, steps, synthetic, "
              "fp32, no_xla; log format clu; window skip 20, measure 100"], []),
        (("--amp",), ["--config.batch_size=256 ", "--config.half_precision=True"], []),
        # smoke: the preset's window (skip 2, measure 5) in whole report intervals of 20
        (("--preset", "smoke"), ["--config.batch_size=4 --config.image_size=64",
                                 "--config.num_train_steps=40"], []),
        (("--data-dir", "/data/tfds"), ["TFDS_DATA_DIR=/data/tfds"],
         ["--config.dataset=synthetic"]),
    ],
)  # fmt: skip
def test_dry_run_one_node(cli, flags, expect, absent) -> None:
    code, text = cli("run", "jax", "resnet50", "--impl", "official", "--device", "cuda",
                     "--dry-run", *flags)  # fmt: skip
    assert code == 0, text
    assert f"https://github.com/google/flax @ {COMMIT}" in text
    (line,) = _node_lines(text)
    assert "/examples/imagenet && CUDA_VISIBLE_DEVICES=0 " in line
    assert (
        "main.py '--workdir=<results>/<config>/<id>/upstream-output/flax-workdir' "
        "--config=configs/default.py"
    ) in line
    assert "--config.log_every_steps=20 --config.profile=False --config.train_only=True" in line
    assert "--coordinator_address=localhost:29500 --num_processes=1 --process_id=0" in line
    if "--data-dir" not in flags:
        assert "--config.dataset=synthetic" in line and "TFDS_DATA_DIR='' " in line
    for piece in expect:
        assert piece in text, piece
    for piece in absent:
        assert piece not in text, piece


def test_dry_run_two_nodes_of_eight(cli) -> None:
    code, text = cli("run", "jax", "resnet50", "--impl", "official", "--device", "cuda", "--nodes",
                     "2", "--devices-per-node", "8", "--hosts", "a,b", "--dry-run")  # fmt: skip
    assert code == 0, text
    lines = _node_lines(text)
    assert [line.split(":", 1)[0] for line in lines] == ["0 (a)", "1 (b)"]
    for rank, line in enumerate(lines):
        assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 " in line
        assert "--config.batch_size=2048 " in line  # the global batch: 2 x 8 x 128
        assert f"--coordinator_address=a:29500 --num_processes=2 --process_id={rank}" in line


def test_xla_is_refused(cli) -> None:
    code, text = cli("run", "jax", "resnet50", "--impl", "official", "--xla", "--dry-run")
    assert code == 1 and "cannot run with --xla: JAX compiles every step with XLA" in text


# --------------------------------------------------------------------------- refusals


def test_an_official_run_with_no_checkout_is_refused_and_stores_nothing(
    cli, tmp_path, monkeypatch
) -> None:
    """No clone and no way to fetch one (the upstream's URL unreachable, as offline): refused
    with the reason and the way out, before anything is built or stored."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    text = (ROOT / "third_party_scripts" / f"{NAME}.toml").read_text()
    (manifests / f"{NAME}.toml").write_text(
        text.replace("https://github.com/google/flax", "https://example.invalid/flax")
    )
    monkeypatch.setenv("DLPERF_MANIFESTS", str(manifests))
    code, text = cli("run", "jax", "resnet50", "--impl", "official", "--preset", "smoke")
    assert code == 1, text
    assert "cannot fetch flax-imagenet-current from https://example.invalid/flax" in text
    assert "--sources-dir PATH" in text and COMMIT in text
    assert not (tmp_path / "results").exists()
    assert not list(tmp_path.rglob("*.json"))
    assert not list((tmp_path / "home").rglob("envs"))  # nothing built either


def test_there_is_no_official_jax_bert_and_a_run_says_why(cli, tmp_path) -> None:
    (absence,) = [a for a in load_absences().values() if a.framework == "jax"]
    assert (absence.name, absence.model, absence.profile) == (BERT, "bert", "current")
    for words in ("google-research/bert", "TensorFlow 1", "transformers 5", "paxml",
                  "keras-hub 0.32.0", "no pretraining script"):  # fmt: skip
        assert words in absence.message, words
    for args in (
        ("run", "jax", "bert", "--impl", "official"),
        ("run", "jax", "bert", "--impl", "official", "--dry-run"),
        ("run", "jax", "bert", "--impl", "official", "--source", BERT),
    ):
        code, text = cli(*args)
        assert code == 1, text
        assert "no official BERT for jax (profile current): google-research/bert" in text
    assert not (tmp_path / "results").exists()
    code, text = cli("sources", "list")
    assert code == 0 and "no official BERT for jax (profile current):" in text
    assert "keras-hub 0.32.0" in text
    code, text = cli("sources", "list", "--profile", "dlperf-2020")
    assert code == 0 and "no official BERT" not in text
    code, text = cli("sources", "fetch", BERT)
    assert code == 1 and f"{BERT} is no manifest: no official BERT for jax" in text
    with pytest.raises(DlperfError, match="no official BERT for jax"):
        select_manifests([BERT])
    assert BERT not in load_manifests()  # an absence is no manifest anywhere manifests are used


def test_an_absence_beside_a_manifest_of_the_same_model_is_refused(tmp_path) -> None:
    (tmp_path / f"{NAME}.toml").write_bytes(
        (ROOT / "third_party_scripts" / f"{NAME}.toml").read_bytes()
    )
    text = (ROOT / "third_party_scripts" / f"{BERT}.toml").read_text()
    clash = text.replace('name = "jax-bert-current"', 'name = "jax-resnet50-current"')
    clash = clash.replace('model = "bert"', 'model = "resnet50"')
    (tmp_path / "jax-resnet50-current.toml").write_text(clash)
    with pytest.raises(DlperfError, match=f"but {NAME} is one; remove one of them"):
        load_manifests(tmp_path)
    with pytest.raises(DlperfError, match="declares that there is none: no official BERT"):
        load_manifest(ROOT / "third_party_scripts" / f"{BERT}.toml")


# --------------------------------------------------------------------------- the log format


def test_clu_lines_captured_from_the_cpu_run() -> None:
    run = parse_log("clu", REAL_LINES, LogContext(batch_size=4))
    assert run.what == "CLU steps_per_second lines" and not run.notes
    assert run.malformed == 0 and run.failure is None
    # The first report (steps 0..20) holds the compilation: the marks start at step 20.
    assert [(m.step, m.samples) for m in run.marks] == [
        (20, 0.0), (40, 80.0), (60, 80.0), (80, 80.0), (100, 80.0), (120, 80.0)
    ]  # fmt: skip
    rates = [float(r.split(",")[0]) for r in REAL_LINES.split("steps_per_second=")[1:]]
    assert run.marks[-1].time == pytest.approx(sum(20 / r for r in rates[1:]))
    window = window_throughput(run.marks, 20, 100)
    assert (window.start_step, window.end_step, window.samples) == (20, 120, 400.0)
    # images/s: steps per second x the global batch, over the window's five reports
    assert window.throughput == pytest.approx(400 / sum(20 / r for r in rates[1:]))
    assert window.throughput == pytest.approx(1.279, abs=1e-3)  # dlperf stored 1.28 samples/s
    # The lines' absl clock agrees: 10:56:23.396713 .. 11:01:36.211876 is 312.815 s; the rates
    # leave out only the host's writes between reports.
    assert run.marks[-1].time == pytest.approx(312.815163, abs=0.1)
    assert len(run.losses) == 6


def test_clu_lines_of_several_processes_merge_and_skip_what_is_not_a_report() -> None:
    """Every process logs each report (2 nodes x 8 devices: the global batch is 8 x 2 x 4);
    the slower line of a step is kept; eval lines and a resumed run's first report are not
    marks; a missing report stops the chain."""
    lines = REAL_LINES.splitlines()
    slower = [line.replace("steps_per_second=", "steps_per_second=0") for line in lines]
    eval_line = "I1128 10:50:00.000000 1 logging_writer.py:48] [60] eval_loss=6.9, eval_accuracy=0"
    run = parse_log("clu", "\n".join([*lines, eval_line, *slower]) + "\n", LogContext(4, 8, 2))
    assert [m.step for m in run.marks] == [20, 40, 60, 80, 100, 120]
    assert run.marks[1].samples == 20 * 64
    alone = parse_log("clu", "\n".join(slower) + "\n", LogContext(4, 8, 2))
    assert [m.time for m in run.marks] == [m.time for m in alone.marks]
    gappy = parse_log("clu", "\n".join(lines[:2] + lines[3:]) + "\n", LogContext(4))
    assert [m.step for m in gappy.marks] == [20, 40]
    assert gappy.notes == ["no throughput line covers steps 40..60; marks after step 40 unused"]


# --------------------------------------------------------------------------- the upstream


def _missing_blobs(mirror: Path, commit: str) -> list[str]:
    out = subprocess.run(
        ["git", "rev-list", "--objects", "--missing=print", commit],
        cwd=mirror, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [line[1:] for line in out.stdout.splitlines() if line.startswith("?")]


def standin(mirror: Path, root: Path) -> tuple[Path, str]:
    """A git repository holding examples/imagenet of the pinned commit, file for file, for a
    clone that lacks blobs elsewhere in the commit's tree (it cannot be checked out whole);
    the script, its configs and the patches' files are upstream's all the same."""
    repo = root / "flax-standin"
    repo.mkdir()

    def git(*args: str, cwd: Path = repo, text: bool = True):
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=text).stdout  # fmt: skip

    git("init", "-q")
    listed = git("ls-tree", "-r", "--name-only", COMMIT, "examples/imagenet", cwd=mirror)
    for path in listed.split():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git("show", f"{COMMIT}:{path}", cwd=mirror, text=False))
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "imagenet of 18f8f31")
    return repo, git("rev-parse", "HEAD").strip()


def test_the_patches_apply_to_the_pinned_commit(tmp_path) -> None:
    mirror = upstream_mirror("google/flax")
    repo, _ = standin(mirror, tmp_path)
    for name in PATCHES:
        patch = ROOT / "patches" / "flax-imagenet-current" / name
        subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
        subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    train = (repo / "examples/imagenet/train.py").read_text()
    assert "if config.dataset == 'synthetic':" in train
    assert "image_size = config.image_size" in train
    assert "jax.distributed.initialize(" in (repo / "examples/imagenet/main.py").read_text()
    config = (repo / "examples/imagenet/configs/default.py").read_text()
    assert "config.train_only = False" in config and "config.image_size = 224" in config


def test_fetch_and_verify_against_the_mirror(tmp_path, monkeypatch) -> None:
    mirror = upstream_mirror("google/flax")
    missing = _missing_blobs(mirror, COMMIT)
    if missing:
        pytest.skip(f"the clone of google/flax lacks object(s) {', '.join(missing)} of {COMMIT}")
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    upstream = load_manifests()[NAME].upstream
    path = fetch_source(upstream, sources_dir=mirror)
    verify_checkout(upstream, path)
    assert "config.train_only" in (path / "examples/imagenet/configs/default.py").read_text()


@pytest.mark.framework
def test_cpu_smoke_run(tmp_path) -> None:
    """Upstream's main.py on a CPU through dlperf, in the manifest's own env: --preset smoke
    (batch 4, 64 px), one repeat over the reports of steps 20 and 40."""
    mirror = upstream_mirror("google/flax")
    env: dict[str, str] = {}
    sources, commit = mirror, COMMIT
    if _missing_blobs(mirror, COMMIT):  # the commit cannot be fetched whole: its imagenet/
        sources, commit = standin(mirror, tmp_path)
        manifests = tmp_path / "manifests"
        manifests.mkdir()
        text = (ROOT / "third_party_scripts" / f"{NAME}.toml").read_text()
        (manifests / f"{NAME}.toml").write_text(text.replace(COMMIT, commit))
        env["DLPERF_MANIFESTS"] = str(manifests)
    home = tmp_path / "home"
    home.mkdir()
    shared = envs_root()  # the env is built once and reused
    shared.mkdir(parents=True, exist_ok=True)
    (home / "envs").symlink_to(shared)
    out = dlperf("run", "jax", "resnet50", "--impl", "official", "--preset", "smoke",
                 "--device", "cpu", "--repeats", "1", "--timeout", "1200",
                 "--sources-dir", str(sources), "--results-dir", str(tmp_path / "results"),
                 "--json", home=home, **env)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout[out.stdout.index("{") :])
    assert result["status"] == "ok", result.get("warnings")
    assert result["source"]["commit"] == commit and result["source"]["profile"] == "current"
    assert sorted(result["source"]["patches"]) == list(PATCHES)
    (repeat,) = result["repeats"]
    window = repeat["window"]
    assert (window["start_step"], window["end_step"], window["samples"]) == (20, 40, 80.0)
    log = Path(repeat["log_path"])
    log = log if log.is_absolute() else ROOT / log
    text = log.read_text()
    rate = float(text.split("] [40] steps_per_second=")[1].split(",")[0])
    assert repeat["throughput"] == pytest.approx(4 * rate, rel=1e-5)
    assert "JAX local devices: [CpuDevice(id=0)]" in text
