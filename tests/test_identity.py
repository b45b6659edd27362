"""What a number belongs to (`dlperf.identity`): benchmark ids, machines, settings, and the
store that finds results by them; files that follow the umask; "dirty" meaning dlperf's code."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlperf import DlperfError, gitinfo
from dlperf.adapters import adapter_names, get_adapter
from dlperf.assemble import build_result
from dlperf.cli import app
from dlperf.files import StorageError, atomic_write
from dlperf.identity import (
    ID_CHARS,
    Machine,
    benchmark_id,
    describe,
    identity_of,
    legacy_config_key,
    machine_of,
    parameters_of,
    settings_of,
)
from dlperf.official.manifest import load_manifests
from dlperf.resultio import load_result
from dlperf.schema import (
    LOADGEN_SETTINGS,
    MAX_DEVICES_PER_NODE,
    MAX_NODES,
    BenchmarkSpec,
    Environment,
    Repeat,
    RepeatStatus,
    Window,
)
from dlperf.spec import resolve_spec
from dlperf.store import ResultStore, newest

FOLDER_SAFE = re.compile(r"[a-z0-9][a-z0-9.-]*")


def test_the_id_names_the_benchmark_not_how_often_or_with_which_settings() -> None:
    a = resolve_spec("pytorch", "resnet50", overrides={"repeats": 3})
    b = resolve_spec("pytorch", "resnet50", overrides={"repeats": 7, "timeout_s": 60.0})
    assert benchmark_id(a) == benchmark_id(b) == "pytorch-resnet50-train-fp32-cpu-1x1-b128-i224"
    big = {"precision": "amp", "xla": True, "devices_per_node": 8}
    amp = resolve_spec("pytorch", "resnet50", overrides=big)
    assert benchmark_id(amp) == "pytorch-resnet50-train-amp-xla-cpu-1x8-b256-i224"
    # The window is part of what is measured: another window than DLPerf's is another id, said
    # through the hash of every field.
    other = resolve_spec("pytorch", "resnet50", overrides={"skip": 5})
    assert benchmark_id(other).startswith(benchmark_id(a) + "-") and len(benchmark_id(other)) <= 64
    # Best practice and an ablation of it are settings: the same benchmark.
    ablated = resolve_spec("pytorch", "resnet50", overrides={"options": {"channels_last": "0"}})
    assert benchmark_id(ablated) == benchmark_id(a)
    assert settings_of(a) == {"channels_last": "1", "fused_optimizer": "1"}
    assert settings_of(ablated)["channels_last"] == "0"
    assert describe(ablated).endswith("[channels_last=0, fused_optimizer=1]")
    threads = resolve_spec("pytorch", "resnet50", overrides={"options": {"threads": "2"}})
    assert benchmark_id(threads) == benchmark_id(a) and settings_of(threads)["threads"] == "2"


def test_a_parameter_is_part_of_the_benchmark_a_setting_is_not() -> None:
    slow = resolve_spec("calibration", "pace", overrides={"options": {"step_ms": "40"}})
    fast = resolve_spec("calibration", "pace", overrides={"options": {"step_ms": "20"}})
    assert benchmark_id(slow) != benchmark_id(fast)  # what the test double measures
    assert parameters_of(slow) == {"step_ms": "40"} and settings_of(slow) == {}
    wide = resolve_spec("pytorch", "linear", overrides={"options": {"out_features": "2048"}})
    assert benchmark_id(wide) != benchmark_id(resolve_spec("pytorch", "linear"))
    seeded = resolve_spec("pytorch", "linear", overrides={"options": {"seed": "3"}})
    assert benchmark_id(seeded) == benchmark_id(resolve_spec("pytorch", "linear"))
    # A framework dlperf does not know (an imported suite's): every option is a parameter.
    spec = BenchmarkSpec(framework="external", model="sut", batch_size=1, options={"k": "v"})
    assert parameters_of(spec) == {"k": "v"} and settings_of(spec) == {}


LOADGEN = {name: 123456.5 for name in LOADGEN_SETTINGS} | {
    "min_duration_s": 1.0,
    "max_duration_s": 2.0,
    "min_query_count": 1.0,
    "max_query_count": 2.0,
}


def _every_override(sources: list[str]):
    """Overrides at the edges of what a framework's model takes: every implementation (each
    official manifest in `sources`), device, precision, compiler and mode, the largest node
    shape, batch and window, LoadGen with every setting."""
    impls = [None, "official"] if sources else [None]
    for impl, device, amp, xla, mode in itertools.product(
        impls, ("cpu", "cuda"), (False, True), (False, True), ("train", "infer")
    ):
        over = {"impl": impl, "device": device, "precision": "amp" if amp else None, "xla": xla,
                "mode": mode, "nodes": MAX_NODES, "devices_per_node": MAX_DEVICES_PER_NODE,
                "batch_size": 2**31 - 1, "skip": 999_999, "measure": 999_999}  # fmt: skip
        for source in sources if impl else [None]:
            yield {**over, "source": source}
        if mode == "infer" and impl is None:
            yield {**over, "nodes": 1, "devices_per_node": 1, "scenario": "server",
                   "loadgen": LOADGEN, "latency_target_ms": 1e9}  # fmt: skip


def test_every_id_any_adapter_makes_is_short_and_safe_as_a_folder_name() -> None:
    manifests = load_manifests().values()
    made = 0
    for framework in adapter_names():
        for model in [*get_adapter(framework).models, *get_adapter(framework).micro_models]:
            sources = [m.name for m in manifests if (m.framework, m.model) == (framework, model)]
            for over in _every_override(sources):
                try:
                    spec = resolve_spec(framework, model, overrides=over)
                except DlperfError:  # a combination the adapter refuses
                    continue
                made += 1
                key = benchmark_id(spec)
                assert len(key) <= ID_CHARS and FOLDER_SAFE.fullmatch(key), key
    assert made > 200  # the loop compared something


def test_the_issues_longest_dry_run_makes_a_short_id() -> None:
    args = ["run", "mxnet", "resnet50", "--device", "cuda", "--amp", "--xla", "--nodes", "2",
            "--devices-per-node", "8", "--dry-run"]  # fmt: skip
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    key = out.output.split(":")[0].split(" [")[0]
    assert key == "mxnet-resnet50-train-amp-xla-cuda-2x8-b256-i224"


def env(host: str = "node-1", **hardware) -> Environment:
    facts = {"cpu": "AMD EPYC 7B13", "cpu_count": 2} | hardware
    return Environment(dlperf_version="0.1.0", host=host, os="linux", **facts)


def test_a_machine_is_its_hardware_not_its_host_name() -> None:
    one = Machine(cpu="AMD EPYC 7B13", cpu_count=2)
    assert one.label == "AMD EPYC 7B13, 2 CPUs" and re.fullmatch(r"[0-9a-f]{16}", one.id)
    from dlperf.identity import machine_of_environment

    assert machine_of_environment(env("node-1")) == machine_of_environment(env("node-2"))
    assert machine_of_environment(env(cpu_count=4)).id != one.id
    gpus = machine_of_environment(env(gpu="NVIDIA H200", gpu_count=8, gpu_memory_mb=143771), "cuda")
    assert gpus.label == "8 x NVIDIA H200 140 GiB, AMD EPYC 7B13, 2 CPUs"
    assert Machine().id == "unknown" and Machine().label == "unknown machine"
    # An imported log knows at most its device: it stands for the GPU.
    imported = Environment(dlperf_version="0", host="unknown (imported log)", os="unknown",
                           device_name="Tesla V100-SXM2-16GB")  # fmt: skip
    assert machine_of_environment(imported, "cuda").label == "Tesla V100-SXM2-16GB"


def made(spec: BenchmarkSpec, rid: str, value: float, environment: Environment):
    window = Window(start_step=0, end_step=10, samples=10 * spec.batch_size,
                    elapsed_s=10 * spec.batch_size / value)  # fmt: skip
    repeats = [Repeat(index=i, status=RepeatStatus.ok, throughput=value, window=window)
               for i in (1, 2, 3)]  # fmt: skip
    return build_result(spec, rid, repeats, environment=environment).model_copy(
        update={"created": f"2025-01-0{rid[-1]}T00:00:00+00:00"}
    )


def test_results_stored_before_ids_group_with_new_ones(tmp_path: Path) -> None:
    spec = resolve_spec("pytorch", "resnet50", preset="smoke")
    old = made(spec, "r1", 100.0, env())
    # As dlperf 6 stored it: under the configuration key, schema 6, no GPU facts.
    data = json.loads(old.model_dump_json())
    data["schema_version"] = 6
    for name in ("gpu_count", "gpu_memory_mb", "interconnect"):
        del data["environment"][name]
    folder = tmp_path / legacy_config_key(spec)
    folder.mkdir(parents=True)
    (folder / "r1.json").write_text(json.dumps(data))
    store = ResultStore(tmp_path)
    path = store.write(made(spec, "r2", 110.0, env(host="node-2")))
    assert path.parent.name == benchmark_id(spec) != folder.name  # nothing renamed
    loaded = store.results()
    assert len(loaded) == 2 and len({identity_of(r).key for r in loaded}) == 1
    (latest,) = store.newest()
    assert latest.id == "r2"
    assert store.find(spec, machine_of(latest)).id == "r2"
    from dlperf.history import history_points

    points = history_points(tmp_path)
    assert [p.result_id for p in points] == ["r1", "r2"] and len({p.series for p in points}) == 1
    assert "host node-1 -> node-2" in points[1].changes


def test_newest_keeps_each_machine_and_settings_apart() -> None:
    spec = resolve_spec("pytorch", "resnet50", preset="smoke")
    ablated = resolve_spec("pytorch", "resnet50", preset="smoke",
                           overrides={"options": {"fused_optimizer": "0"}})  # fmt: skip
    results = [
        made(spec, "r1", 100, env()),
        made(spec, "r2", 100, env(cpu_count=8)),
        made(ablated, "r3", 90, env()),
        made(spec, "r4", 101, env(host="other")),
    ]
    assert sorted(r.id for r in newest(results)) == ["r2", "r3", "r4"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_follow_the_umask_and_the_unsaved_fallback_stays_private(
    tmp_path: Path, monkeypatch, umask: int, mode: int
) -> None:
    """In a subprocess: the umask is the process's."""
    code = f"""
import os, sys
os.umask({umask})
from pathlib import Path
from dlperf.files import atomic_write
atomic_write(Path(sys.argv[1]) / "shared.json", "{{}}")
atomic_write(Path(sys.argv[1]) / "private.json", "{{}}", private=True)
"""
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600


def test_results_reports_and_exports_are_shared_and_unsaved_results_private(
    tmp_path: Path, monkeypatch
) -> None:
    from dlperf import store as store_module
    from dlperf.files import shared_mode

    spec = resolve_spec("pytorch", "resnet50", preset="smoke")
    result = made(spec, "r1", 100.0, env())
    path = ResultStore(tmp_path / "results").write(result)
    assert path.stat().st_mode & 0o777 == shared_mode()
    export = ["export", "--format", "csv", "--results-dir", str(tmp_path / "results")]
    out = CliRunner().invoke(app, [*export, "--out", str(tmp_path / "x.csv")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "x.csv").stat().st_mode & 0o777 == shared_mode()
    monkeypatch.setattr(store_module, "UNSAVED_DIR", tmp_path / "unsaved")
    error = ResultStore(tmp_path / "results").unsaved(result, StorageError("disk full"))
    (kept,) = (tmp_path / "unsaved").rglob("*.json")
    assert kept.stat().st_mode & 0o777 == 0o600 and str(kept) in str(error)
    assert load_result(kept) == result


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_dirty_means_the_code_that_measured_changed(tmp_path: Path) -> None:
    repo = tmp_path / "dlperf-checkout"
    for name in ("dlperf/core.py", "adapters/x/__init__.py", "reports/resnet50.md",
                 "README.md", "results/r/x.json"):  # fmt: skip
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("v1\n")
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    for name in ("reports/resnet50.md", "README.md", "results/r/x.json"):
        (repo / name).write_text("rewritten by the quickstart\n")
    assert gitinfo.checkout_of(repo, gitinfo.DLPERF_CODE).dirty is False
    workdir = tuple(f":(top,exclude){n}" for n in gitinfo.OUTPUT_FOLDERS)
    assert gitinfo.checkout_of(repo / "dlperf", workdir).dirty is True  # README is the user's
    (repo / "README.md").write_text("v1\n")
    assert gitinfo.checkout_of(repo / "dlperf", workdir).dirty is False
    (repo / "adapters" / "x" / "__init__.py").write_text("v2\n")
    assert gitinfo.checkout_of(repo, gitinfo.DLPERF_CODE).dirty is True
    assert gitinfo.checkout_of(repo, workdir).dirty is True


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_a_results_folder_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    folder.chmod(0)
    try:
        with pytest.raises(Exception, match="cannot read the results folder"):
            ResultStore(folder).paths()
    finally:
        folder.chmod(0o755)


def test_a_file_named_as_the_results_folder_is_refused(tmp_path: Path) -> None:
    atomic_write(tmp_path / "results", "not a folder")
    with pytest.raises(DlperfError, match="is a file, not a results folder"):
        ResultStore(tmp_path / "results").results()
