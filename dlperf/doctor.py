"""What on this machine threatens a stable number.

The checks mirror what TorchBench's V0 methodology controls: the CPU frequency governor, turbo
boost, SMT, isolated cores, process affinity, other load, memory pressure and swap, and the GPU's
persistence mode, clock throttling and other GPU processes.

Everything is read from sysfs/procfs under ``root`` (tests point it at a fake tree) or asked of
psutil / nvidia-smi. A check that cannot look (missing file, container, no command) reports
status "info"; no check ever raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

OK, WARN, INFO = "ok", "warn", "info"
NOT_EXPOSED = "not exposed (VM or container)"
CPU_SYS = Path("sys/devices/system/cpu")


@dataclass(frozen=True)
class Check:
    name: str  # "cpu governor", "turbo", "smt", ...
    status: str  # "ok" | "warn" | "info"
    value: str  # what was found
    advice: str  # what to do about a warn ("" when ok)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------ CPU ---


def _cpu_index(path: Path) -> int:
    match = re.search(r"cpu(\d+)", str(path.parent.parent.name))
    return int(match.group(1)) if match else -1


def check_governor(root: Path) -> Check:
    paths = sorted((root / CPU_SYS).glob("cpu[0-9]*/cpufreq/scaling_governor"), key=_cpu_index)
    governors = {p.parent.parent.name: _read(p) for p in paths}
    governors = {cpu: g for cpu, g in governors.items() if g}
    if not governors:
        return Check("cpu governor", INFO, NOT_EXPOSED, "")
    counts = Counter(governors.values())
    value = ", ".join(f"{g} on {n} cpu{'s' if n != 1 else ''}" for g, n in counts.most_common())
    if set(counts) == {"performance"}:
        return Check("cpu governor", OK, value, "")
    return Check(
        "cpu governor",
        WARN,
        value,
        "frequency scaling moves clocks between runs: sudo cpupower frequency-set -g performance",
    )


def check_turbo(root: Path) -> Check:
    no_turbo = _read(root / CPU_SYS / "intel_pstate" / "no_turbo")
    if no_turbo in ("0", "1"):
        if no_turbo == "1":
            return Check("turbo", OK, "off (intel_pstate no_turbo=1)", "")
        return Check(
            "turbo",
            WARN,
            "on (intel_pstate no_turbo=0)",
            "turbo clocks vary with temperature and active cores: "
            "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo",
        )
    boost = _read(root / CPU_SYS / "cpufreq" / "boost")
    if boost in ("0", "1"):
        if boost == "0":
            return Check("turbo", OK, "off (cpufreq boost=0)", "")
        return Check(
            "turbo",
            WARN,
            "on (cpufreq boost=1)",
            "boost clocks vary with temperature and active cores: "
            "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost",
        )
    return Check("turbo", INFO, NOT_EXPOSED, "")


def check_smt(root: Path) -> Check:
    active = _read(root / CPU_SYS / "smt" / "active")
    if active == "1":
        return Check(
            "smt",
            WARN,
            "on (hyper-threads share cores)",
            "sibling threads compete for one core: echo off | sudo tee "
            "/sys/devices/system/cpu/smt/control, or pin to one thread per core",
        )
    if active == "0":
        control = _read(root / CPU_SYS / "smt" / "control")
        return Check("smt", OK, f"off ({control})" if control else "off", "")
    return Check("smt", INFO, NOT_EXPOSED, "")


def _cmdline_params(root: Path) -> dict[str, str]:
    cmdline = _read(root / "proc" / "cmdline") or ""
    params = {}
    for word in cmdline.split():
        key, _, value = word.partition("=")
        if key in ("isolcpus", "nohz_full", "rcu_nocbs"):
            params[key] = value
    return params


def check_isolation(root: Path) -> Check:
    isolated = _read(root / CPU_SYS / "isolated")
    params = _cmdline_params(root)
    found = []
    if isolated:
        found.append(f"isolated {isolated}")
    found.extend(f"{k}={v}" for k, v in params.items())
    if found:
        return Check("cpu isolation", OK, "; ".join(found), "")
    if isolated is None and not (root / "proc" / "cmdline").exists():
        return Check("cpu isolation", INFO, NOT_EXPOSED, "")
    return Check(
        "cpu isolation",
        INFO,
        "no isolated cpus",
        "optional: boot with isolcpus=<cpus> nohz_full=<cpus> and pin the benchmark there "
        "(taskset -c <cpus>) to keep the kernel and other work off its cores",
    )


def check_affinity(root: Path) -> Check:
    total = os.cpu_count() or 0
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return Check("affinity", INFO, "not available on this platform", "")
    if total and len(allowed) >= total:
        return Check("affinity", OK, f"all {total} cpus", "")
    return Check(
        "affinity",
        INFO,
        f"restricted to {len(allowed)} of {total} cpus ({_ranges(allowed)})",
        "fine if intended (taskset/cgroup); thread counts should match the allowed cpus",
    )


def _ranges(cpus: list[int]) -> str:
    parts: list[str] = []
    start = prev = None
    for cpu in cpus + [None]:  # type: ignore[list-item]
        if start is None:
            start = prev = cpu
        elif cpu is not None and cpu == prev + 1:
            prev = cpu
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = cpu
    return ",".join(parts)


# ------------------------------------------------------------------------- load, memory ---


def _loadavg(root: Path) -> tuple[float, float, float] | None:
    text = _read(root / "proc" / "loadavg")
    if text:
        with contextlib.suppress(ValueError, IndexError):
            fields = text.split()
            return float(fields[0]), float(fields[1]), float(fields[2])
    if root == Path("/"):
        with contextlib.suppress(OSError, AttributeError):
            return psutil.getloadavg()
    return None


def top_processes(sample_s: float = 0.5, limit: int = 3) -> list[tuple[str, int, float]]:
    """Other processes by CPU % over ``sample_s`` seconds: (name, pid, percent), busiest first.

    This process and its descendants are left out (they are the benchmark, not noise).
    """
    me = psutil.Process()
    mine = {me.pid}
    with contextlib.suppress(psutil.Error):
        mine.update(child.pid for child in me.children(recursive=True))
    procs = []
    for proc in psutil.process_iter(["name"]):
        if proc.pid in mine or proc.pid == 0:
            continue
        with contextlib.suppress(psutil.Error):
            proc.cpu_percent(None)
            procs.append(proc)
    time.sleep(sample_s)
    usage = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            percent = proc.cpu_percent(None)
            if percent > 0:
                usage.append((proc.info.get("name") or "?", proc.pid, percent))
    usage.sort(key=lambda item: item[2], reverse=True)
    return usage[:limit]


def check_load(
    root: Path,
    sample_s: float = 0.5,
    processes: Callable[[float], list[tuple[str, int, float]]] | None = None,
) -> Check:
    cores = os.cpu_count() or 1
    load = _loadavg(root)
    try:
        top = (processes or top_processes)(sample_s)
    except Exception:  # a failing scan must not hide the load average
        top = []
    busy = [(name, pid, pct) for name, pid, pct in top if pct > 10.0]
    parts = []
    if load is not None:
        parts.append(f"load1 {load[0]:.2f} on {cores} cpus")
    if top:
        parts.append("top: " + ", ".join(f"{n} (pid {p}) {c:.0f}%" for n, p, c in top))
    value = "; ".join(parts) or "not available"
    high_load = load is not None and load[0] > 0.2 * cores
    if busy:
        names = ", ".join(f"{n} (pid {p})" for n, p, _ in busy)
        return Check(
            "load",
            WARN,
            value,
            f"other work competes for cpus and memory bandwidth: stop {names} before measuring",
        )
    if high_load:
        return Check(
            "load",
            WARN,
            value,
            "the machine was busy recently (the load average lags by about a minute): "
            "wait for other work to finish, then run again",
        )
    if load is None and not top:
        return Check("load", INFO, value, "")
    return Check("load", OK, value, "")


def _meminfo(root: Path) -> dict[str, int]:
    """/proc/meminfo in bytes, or psutil's view when the file is absent at the real root."""
    text = _read(root / "proc" / "meminfo")
    info: dict[str, int] = {}
    if text:
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields and fields[0].isdigit():
                unit = 1024 if len(fields) > 1 and fields[1].lower() == "kb" else 1
                info[key.strip()] = int(fields[0]) * unit
        return info
    if root == Path("/"):
        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
        return {
            "MemTotal": vm.total,
            "MemAvailable": vm.available,
            "SwapTotal": sw.total,
            "SwapFree": sw.free,
        }
    return info


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_memory(root: Path) -> Check:
    info = _meminfo(root)
    total, available = info.get("MemTotal"), info.get("MemAvailable")
    if not total or available is None:
        return Check("memory", INFO, "not available", "")
    value = f"{_gib(available)} available of {_gib(total)}"
    if available < 0.15 * total:
        return Check(
            "memory",
            WARN,
            value,
            "little free memory: the page cache and allocator will thrash; stop other "
            "memory users or use a smaller batch",
        )
    return Check("memory", OK, value, "")


def check_swap(root: Path) -> Check:
    info = _meminfo(root)
    if "SwapTotal" not in info:
        return Check("swap", INFO, "not available", "")
    total = info["SwapTotal"]
    if total == 0:
        return Check("swap", OK, "no swap", "")
    used = total - info.get("SwapFree", total)
    value = f"{used / 2**20:.0f} MiB used of {_gib(total)}"
    if used > 256 * 2**20:
        return Check(
            "swap",
            WARN,
            value,
            "pages were swapped out (memory pressure); touching them stalls a run: "
            "free memory, then sudo swapoff -a && sudo swapon -a",
        )
    return Check("swap", OK, value, "")


# ------------------------------------------------------------------------------------ GPU ---

# nvidia-smi clocks_throttle_reasons.active bits (NVML nvmlClocksThrottleReasons).
THROTTLE_BITS = {
    0x4: "sw power cap",
    0x8: "hw slowdown",
    0x20: "sw thermal slowdown",
    0x40: "hw thermal slowdown",
    0x80: "hw power brake",
}
GPU_QUERY = "index,name,clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,persistence_mode"


def _nvidia_smi(args: list[str]) -> tuple[int, str]:
    """(returncode, output) of nvidia-smi; (-1, reason) when it cannot run."""
    if shutil.which("nvidia-smi") is None:
        return -1, "nvidia-smi not found"
    try:
        proc = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=15, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, str(exc)
    out = proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout)
    return proc.returncode, out.strip()


def parse_gpu_query(text: str) -> list[dict[str, str]]:
    """Rows of ``--query-gpu=GPU_QUERY --format=csv,noheader,nounits``."""
    keys = GPU_QUERY.split(",")
    rows = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == len(keys):
            rows.append(dict(zip(keys, fields, strict=True)))
    return rows


def throttle_reasons(mask: str) -> list[str]:
    try:
        bits = int(mask, 16)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


def gpu_checks_from(gpus: list[dict[str, str]], apps_text: str | None) -> list[Check]:
    """The GPU checks for parsed nvidia-smi output (split out so tests can feed text)."""
    checks = []
    off = [g for g in gpus if g["persistence_mode"].lower() != "enabled"]
    if off:
        checks.append(
            Check(
                "gpu persistence",
                WARN,
                "off on GPU " + ",".join(g["index"] for g in off),
                "the driver unloads between processes (slow first CUDA call, clocks reset): "
                "sudo nvidia-smi -pm 1",
            )
        )
    else:
        checks.append(Check("gpu persistence", OK, f"on ({len(gpus)} GPU)", ""))
    clocks, throttled = [], []
    for g in gpus:
        reasons = throttle_reasons(g["clocks_throttle_reasons.active"])
        clocks.append(
            f"GPU{g['index']} {g['name']}: sm {g['clocks.sm']}/{g['clocks.max.sm']} MHz"
            + (f" throttled ({', '.join(reasons)})" if reasons else "")
        )
        if reasons:
            throttled.append(g["index"])
    if throttled:
        checks.append(
            Check(
                "gpu clocks",
                WARN,
                "; ".join(clocks),
                "the GPU is power/thermal throttling: check cooling and power limits, and lock "
                "clocks for repeatable numbers (sudo nvidia-smi -lgc <min>,<max>)",
            )
        )
    else:
        checks.append(Check("gpu clocks", OK, "; ".join(clocks), ""))
    if apps_text is None:
        checks.append(Check("gpu processes", INFO, "could not list compute processes", ""))
    else:
        apps = [line.strip() for line in apps_text.splitlines() if line.strip()]
        if apps:
            checks.append(
                Check(
                    "gpu processes",
                    WARN,
                    "; ".join(apps),
                    "other processes share the GPU (compute and memory): stop them first",
                )
            )
        else:
            checks.append(Check("gpu processes", OK, "none", ""))
    return checks


def check_gpus() -> list[Check]:
    rc, out = _nvidia_smi([f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"])
    if rc == -1 and out == "nvidia-smi not found":
        return [Check("gpu", INFO, "no NVIDIA GPU (nvidia-smi not found)", "")]
    if rc != 0:
        return [Check("gpu", INFO, f"nvidia-smi failed: {out[:200]}", "")]
    gpus = parse_gpu_query(out)
    if not gpus:
        return [Check("gpu", INFO, "no NVIDIA GPU listed by nvidia-smi", "")]
    rc, apps = _nvidia_smi(
        ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
    )
    return gpu_checks_from(gpus, apps if rc == 0 else None)


# ---------------------------------------------------------------------------------- driver --


def run_checks(root: Path = Path("/"), sample_s: float = 0.5) -> list[Check]:
    """Every check, in a fixed order; a check that fails unexpectedly becomes an "info"."""
    root = Path(root)
    single: list[tuple[str, Callable[[], Check]]] = [
        ("cpu governor", lambda: check_governor(root)),
        ("turbo", lambda: check_turbo(root)),
        ("smt", lambda: check_smt(root)),
        ("cpu isolation", lambda: check_isolation(root)),
        ("affinity", lambda: check_affinity(root)),
        ("load", lambda: check_load(root, sample_s)),
        ("memory", lambda: check_memory(root)),
        ("swap", lambda: check_swap(root)),
    ]
    checks: list[Check] = []
    for name, fn in single:
        try:
            checks.append(fn())
        except Exception as exc:  # the doctor must never crash
            checks.append(Check(name, INFO, f"could not check: {exc}", ""))
    try:
        checks.extend(check_gpus())
    except Exception as exc:
        checks.append(Check("gpu", INFO, f"could not check: {exc}", ""))
    return checks


def checks_as_dicts(checks: list[Check]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(check) for check in checks]
