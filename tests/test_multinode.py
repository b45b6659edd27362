"""Data-parallel jobs on this host (the local launcher): node agents, per-rank events, the
max-reduce of step times, and fault teardown with no orphan processes."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from conftest import throughput_from_marks, workload_processes

from dlperf.events import Mark, ParsedRun, merge_ranks
from dlperf.launch import free_port
from dlperf.runner import run_benchmark
from dlperf.schema import RepeatStatus, ResultStatus
from dlperf.spec import check_run, resolve_spec


def test_merge_ranks_keeps_each_ranks_marks_and_the_jobs_facts() -> None:
    fast = ParsedRun(
        start={"rank": 0}, marks=[Mark(0, 100.0, 0), Mark(1, 101.0, 8)], ended=True, losses=[1.0]
    )
    slow = ParsedRun(
        start={"rank": 1}, marks=[Mark(0, 5.0, 0), Mark(1, 7.0, 8), Mark(2, 8.0, 8)],
        failure="NaN loss", notes=["1 malformed event line(s) ignored"], malformed=1,
    )  # fmt: skip
    merged = merge_ranks([fast, slow])
    assert merged.rank_marks == [fast.marks, slow.marks]  # different clocks: never mixed
    assert merged.marks == fast.marks  # rank 0's, on the steps every rank reached
    assert merged.start == {"rank": 0} and merged.losses == [1.0]
    assert not merged.ended and merged.failure == "NaN loss" and merged.malformed == 1
    assert merged.notes == ["1 malformed event line(s) ignored"]


def test_ports_differ_between_jobs() -> None:
    assert len({free_port() for _ in range(5)}) > 1


def spec(nodes: int, devices: int, **options: str):
    return resolve_spec(
        "calibration", "pace", preset="smoke",
        overrides={"nodes": nodes, "devices_per_node": devices, "skip": 3, "measure": 10,
                   "repeats": 1, "batch_size": 10, "no_output_timeout_s": 3.0,
                   "timeout_s": 60.0, "options": {"step_ms": "20", **options}},
    )  # fmt: skip


@pytest.mark.multiprocess
@pytest.mark.parametrize(("nodes", "devices"), [(2, 1), (1, 2), (2, 2)])
def test_job_counts_every_rank(tmp_path: Path, nodes: int, devices: int) -> None:
    result, _ = run_benchmark(check_run(spec(nodes, devices)), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    assert result.spec.world_size == nodes * devices
    (r,) = result.repeats
    # Every rank's samples over the slowest rank's window, from the ranks' own marks.
    expected, elapsed = throughput_from_marks(r)
    assert r.throughput == pytest.approx(expected, rel=1e-9)
    assert r.rank_elapsed_s == pytest.approx(elapsed, abs=1e-6)
    assert len(r.rank_elapsed_s) == nodes * devices
    raw = Path(r.log_path).parent
    assert sorted(p.name for p in raw.glob("repeat-1.node*.log")) == [
        f"repeat-1.node{n}.log" for n in range(nodes)
    ]
    assert len(list(raw.glob("repeat-1.events.rank*.jsonl"))) == nodes * devices


@pytest.mark.multiprocess
def test_a_slow_rank_slows_the_job(tmp_path: Path) -> None:
    result, _ = run_benchmark(check_run(spec(2, 1, slow_rank="1")), tmp_path)
    (r,) = result.repeats
    # Rank 1 takes 40 ms a step, rank 0 20 ms: the job's window is rank 1's.
    expected, elapsed = throughput_from_marks(r)
    assert r.throughput == pytest.approx(expected, rel=1e-9)
    assert r.rank_elapsed_s == pytest.approx(elapsed, abs=1e-6)
    assert max(r.rank_elapsed_s) == r.rank_elapsed_s[1]


@pytest.mark.multiprocess
def test_a_crashed_rank_tears_the_job_down(tmp_path: Path) -> None:
    result, _ = run_benchmark(check_run(spec(2, 1, crash_at_step="4", fault_rank="1")), tmp_path)
    (r,) = result.repeats
    assert r.status == RepeatStatus.crashed
    assert r.message.startswith("node 1: exited with status 3")
    raw = Path(r.log_path).parent  # rank 0 is stopped as soon as node 1 fails
    assert "crashing at step 4" in (raw / "repeat-1.node1.log").read_text()
    assert "another part of the job failed" in (raw / "repeat-1.node0.log").read_text()
    assert not workload_processes(tmp_path)


@pytest.mark.multiprocess
def test_a_hung_rank_brings_every_node_down_within_the_timeout(tmp_path: Path) -> None:
    result, _ = run_benchmark(check_run(spec(2, 1, hang_at_step="4", fault_rank="0")), tmp_path)
    (r,) = result.repeats
    assert r.status == RepeatStatus.hung and r.message.startswith("node 0: no output for 3 s")
    assert not workload_processes(tmp_path)


@pytest.mark.framework
@pytest.mark.parametrize(
    "framework", ["jax", "mxnet", "oneflow", "paddle", "pytorch", "tensorflow"]
)
def test_two_simulated_nodes_train_data_parallel(tmp_path: Path, framework: str) -> None:
    s = resolve_spec(
        framework, "resnet50", preset="smoke",
        overrides={"nodes": 2, "devices_per_node": 1, "repeats": 1},
    )  # fmt: skip
    result, _ = run_benchmark(check_run(s), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    # world_size comes from the framework's own group (DDP / MultiWorkerMirroredStrategy;
    # jax: the devices of the job jax.distributed joined, one per node here).
    assert r.workload["world_size"] == 2 and len(r.rank_elapsed_s) == 2
    assert r.window.samples == 2 * s.batch_size * s.measure  # both ranks' samples
    raw = Path(r.log_path).parent
    assert sorted(p.name for p in raw.glob("repeat-1.events.rank*.jsonl")) == [
        "repeat-1.events.rank0.jsonl", "repeat-1.events.rank1.jsonl"
    ]  # fmt: skip


@pytest.mark.framework
def test_jax_drives_two_emulated_cpu_devices_from_one_process(tmp_path: Path) -> None:
    """--nodes 1 --devices-per-node 2: one jax process with two CPU devices (jax_num_cpu_devices),
    the batch sharded over a two-device mesh. As the core's contract says (Adapter.job_commands),
    a process driving several devices writes one events file, named by its first device's
    global rank, counting every device's samples; the job's window is that one clock's."""
    s = resolve_spec(
        "jax", "resnet50", preset="smoke",
        overrides={"nodes": 1, "devices_per_node": 2, "image_size": 32, "batch_size": 2,
                   "skip": 1, "measure": 2, "repeats": 1},
    )  # fmt: skip
    result, _ = run_benchmark(check_run(s), tmp_path)
    assert result.status == ResultStatus.ok, result.warnings
    assert result.spec.world_size == 2 and result.job.global_batch == 4
    (r,) = result.repeats
    assert r.workload["world_size"] == 2 and r.workload["local_devices"] == 2
    raw = Path(r.log_path).parent
    assert [p.name for p in raw.glob("repeat-1.events.rank*.jsonl")] == [
        "repeat-1.events.rank0.jsonl"
    ]  # fmt: skip
    lines = (raw / "repeat-1.events.rank0.jsonl").read_text().splitlines()
    steps = [e for e in map(json.loads, lines) if e["event"] == "step"]
    assert [e["samples"] for e in steps] == [2 * s.batch_size] * s.steps  # both devices'
    assert r.window.samples == 2 * s.batch_size * s.measure
    expected, elapsed = throughput_from_marks(r)
    assert r.throughput == pytest.approx(expected, rel=1e-9) and len(elapsed) == 1
    assert r.window.elapsed_s == pytest.approx(elapsed[0], abs=1e-6)
    # One clock, so no per-clock list: rank_elapsed_s has an entry per events file of a job
    # that has several (the slowest of them is the job's), as a one-process run has none.
    assert r.rank_elapsed_s == []
    assert not any("ranks reached different steps" in w for w in result.warnings)


def test_an_adapter_without_a_launcher_is_refused_before_any_env_is_built() -> None:
    from dlperf import DlperfError
    from dlperf.adapter import Adapter

    class NoLauncher(Adapter):
        name, description, models = "nolauncher", "test double", ("pace",)

        def env_spec(self, device):
            raise AssertionError("no env may be built for a job that cannot launch")

        def command(self, spec, python):
            raise AssertionError("not reached")

        def option_keys(self, model):
            return {"step_ms": "accepted"}

    s = spec(2, 1)
    refused = pytest.raises(DlperfError, match="nolauncher has no data-parallel launcher yet")
    with mock.patch("dlperf.spec.get_adapter", return_value=NoLauncher()), refused:
        check_run(s)  # the run's one check, before the runner prepares anything


def test_mfu_counts_machines_not_names() -> None:
    from dlperf.system import distinct_machines

    assert distinct_machines(["127.0.0.1", "localhost", "127.0.0.1"]) == 1
    assert distinct_machines(["node-a.invalid", "node-b.invalid"]) == 2  # unresolved: by name
