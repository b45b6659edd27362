import json
from pathlib import Path

import pytest

from dlperf import doctor
from dlperf.doctor import Check

CPU = Path("sys/devices/system/cpu")


def write(root: Path, rel: str | Path, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fake_governors(root: Path, *governors: str) -> None:
    for i, governor in enumerate(governors):
        write(root, CPU / f"cpu{i}" / "cpufreq" / "scaling_governor", governor)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def no_processes(sample_s: float) -> list:
    return []


def test_governor_powersave_warns(tmp_path):
    fake_governors(tmp_path, "powersave", "powersave")
    check = doctor.check_governor(tmp_path)
    assert check.status == "warn"
    assert "powersave on 2 cpus" in check.value
    assert "cpupower frequency-set -g performance" in check.advice


def test_governor_mixed_warns(tmp_path):
    fake_governors(tmp_path, "performance", "schedutil")
    check = doctor.check_governor(tmp_path)
    assert check.status == "warn"
    assert "schedutil" in check.value


def test_governor_performance_ok(tmp_path):
    fake_governors(tmp_path, "performance", "performance", "performance")
    check = doctor.check_governor(tmp_path)
    assert check == Check("cpu governor", "ok", "performance on 3 cpus", "")


def test_turbo(tmp_path):
    write(tmp_path, CPU / "intel_pstate" / "no_turbo", "0")
    check = doctor.check_turbo(tmp_path)
    assert check.status == "warn" and "no_turbo" in check.advice
    write(tmp_path, CPU / "intel_pstate" / "no_turbo", "1")
    assert doctor.check_turbo(tmp_path).status == "ok"


def test_turbo_cpufreq_boost(tmp_path):
    write(tmp_path, CPU / "cpufreq" / "boost", "1")
    assert doctor.check_turbo(tmp_path).status == "warn"
    write(tmp_path, CPU / "cpufreq" / "boost", "0")
    assert doctor.check_turbo(tmp_path).status == "ok"


def test_smt(tmp_path):
    write(tmp_path, CPU / "smt" / "active", "1")
    check = doctor.check_smt(tmp_path)
    assert check.status == "warn" and check.advice
    write(tmp_path, CPU / "smt" / "active", "0")
    assert doctor.check_smt(tmp_path).status == "ok"


def test_isolation(tmp_path):
    write(tmp_path, CPU / "isolated", "")
    write(tmp_path, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet")
    check = doctor.check_isolation(tmp_path)
    assert check.status == "info" and check.value == "no isolated cpus"
    write(tmp_path, CPU / "isolated", "2-7")
    write(tmp_path, "proc/cmdline", "root=/dev/sda1 isolcpus=2-7 nohz_full=2-7")
    check = doctor.check_isolation(tmp_path)
    assert check.status == "ok"
    assert "2-7" in check.value and "nohz_full=2-7" in check.value


def test_load_from_fake_loadavg(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.os, "cpu_count", lambda: 4)
    write(tmp_path, "proc/loadavg", "3.50 2.00 1.00 2/300 12345")
    check = doctor.check_load(tmp_path, processes=no_processes)
    assert check.status == "warn" and "load1 3.50 on 4 cpus" in check.value
    write(tmp_path, "proc/loadavg", "0.10 0.20 0.30 1/300 12345")
    assert doctor.check_load(tmp_path, processes=no_processes).status == "ok"


def test_load_names_busy_processes(tmp_path):
    write(tmp_path, "proc/loadavg", "0.00 0.00 0.00 1/300 12345")

    def busy(sample_s):
        return [("stress-ng", 4242, 97.0), ("sshd", 7, 1.0)]

    check = doctor.check_load(tmp_path, processes=busy)
    assert check.status == "warn"
    assert "stress-ng (pid 4242) 97%" in check.value
    assert "stress-ng" in check.advice and "sshd" not in check.advice


MEMINFO = """MemTotal:       16000000 kB
MemFree:         1000000 kB
MemAvailable:    {avail} kB
SwapTotal:       {swap_total} kB
SwapFree:        {swap_free} kB"""


def test_memory_and_swap(tmp_path):
    write(tmp_path, "proc/meminfo", MEMINFO.format(avail=8000000, swap_total=0, swap_free=0))
    assert doctor.check_memory(tmp_path).status == "ok"
    assert doctor.check_swap(tmp_path) == Check("swap", "ok", "no swap", "")
    write(
        tmp_path,
        "proc/meminfo",
        MEMINFO.format(avail=1000000, swap_total=4000000, swap_free=1000000),
    )
    assert doctor.check_memory(tmp_path).status == "warn"
    swap = doctor.check_swap(tmp_path)
    assert swap.status == "warn" and "swapoff" in swap.advice


def test_missing_files_are_info(tmp_path):
    checks = by_name(
        [
            doctor.check_governor(tmp_path),
            doctor.check_turbo(tmp_path),
            doctor.check_smt(tmp_path),
            doctor.check_isolation(tmp_path),
            doctor.check_memory(tmp_path),
            doctor.check_swap(tmp_path),
            doctor.check_load(tmp_path, processes=no_processes),
        ]
    )
    for check in checks.values():
        assert check.status == "info", check
    assert checks["cpu governor"].value == "not exposed (VM or container)"


def test_run_checks_on_empty_tree_never_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor, "top_processes", lambda sample_s=0.5, limit=3: [])
    checks = doctor.run_checks(tmp_path)
    names = [c.name for c in checks]
    for name in ("cpu governor", "turbo", "smt", "cpu isolation", "affinity", "load", "memory"):
        assert name in names
    assert all(c.status in ("ok", "warn", "info") for c in checks)


def test_run_checks_turns_a_crash_into_info(tmp_path, monkeypatch):
    def boom(root):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(doctor, "check_smt", boom)
    monkeypatch.setattr(doctor, "top_processes", lambda sample_s=0.5, limit=3: [])
    smt = by_name(doctor.run_checks(tmp_path))["smt"]
    assert smt.status == "info" and "kaboom" in smt.value


GPU_CSV = (
    "0, NVIDIA H100 80GB HBM3, 1980, 1980, 0x0000000000000000, Enabled\n"
    "1, NVIDIA H100 80GB HBM3, 1410, 1980, 0x0000000000000044, Disabled\n"
)


def test_gpu_checks_from_nvidia_smi_text():
    gpus = doctor.parse_gpu_query(GPU_CSV)
    assert len(gpus) == 2
    checks = by_name(doctor.gpu_checks_from(gpus, "12345, python, 1024 MiB\n"))
    assert checks["gpu persistence"].status == "warn"
    assert "nvidia-smi -pm 1" in checks["gpu persistence"].advice
    clocks = checks["gpu clocks"]
    assert clocks.status == "warn"
    assert "sw power cap" in clocks.value and "hw thermal slowdown" in clocks.value
    assert checks["gpu processes"].status == "warn"
    assert "python" in checks["gpu processes"].value


def test_gpu_checks_idle_gpu_is_not_throttled():
    gpus = doctor.parse_gpu_query(
        "0, NVIDIA A100-SXM4-80GB, 210, 1410, 0x0000000000000001, Enabled"
    )
    checks = by_name(doctor.gpu_checks_from(gpus, ""))
    assert [c.status for c in checks.values()] == ["ok", "ok", "ok"]


def test_no_nvidia_smi_is_info(monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda cmd: None)
    assert doctor.check_gpus() == [Check("gpu", "info", "no NVIDIA GPU (nvidia-smi not found)", "")]


@pytest.mark.parametrize("root", [Path("/")])
def test_run_checks_on_this_machine(root):
    checks = doctor.run_checks(root)
    assert checks
    assert all(isinstance(c, Check) and c.status in ("ok", "warn", "info") for c in checks)
    for check in checks:
        if check.status == "ok":
            assert check.advice == ""
    as_dicts = doctor.checks_as_dicts(checks)
    json.dumps(as_dicts)
    assert set(as_dicts[0]) == {"name", "status", "value", "advice"}
