"""What machine a number came from: hardware/software capture and peak FLOP/s.

Nothing here imports an ML framework: GPUs are described through ``nvidia-smi`` and the CPU
peak is measured with numpy's (BLAS-backed) float32 matmul.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from dlperf import __version__
from dlperf.files import StorageError, atomic_write_json, dlperf_home
from dlperf.gitinfo import provenance
from dlperf.redact import redact_env
from dlperf.schema import BenchmarkSpec, Environment, JobInfo

if TYPE_CHECKING:
    from dlperf.envs import Env, InterpreterInfo

# --------------------------------------------------------------------------------------------
# Machine description
# --------------------------------------------------------------------------------------------


def _run(cmd: list[str], timeout: float = 10.0) -> str | None:
    """stdout of ``cmd``, or None when it is missing, fails or hangs."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name ("model name" in /proc/cpuinfo), else platform.processor()."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def nvidia_gpus() -> list[dict[str, Any]]:
    """One dict per GPU that nvidia-smi lists: name, memory_mb, driver; [] without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return []
    out = _run(
        [
            "nvidia-smi",
            "--query-gpu=name,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ]
    )
    if not out:
        return []
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        name, memory, driver = parts[0], parts[1], parts[2]
        match = re.match(r"\d+", memory)
        gpus.append(
            {"name": name, "memory_mb": int(match.group()) if match else None, "driver": driver}
        )
    return gpus


def cpu_budget() -> int:
    """The CPUs this process may run on (its affinity, else every CPU): every framework's
    default thread budget on a CPU, so that none gets more cores than another (left to
    themselves they differ: PyTorch takes the physical cores, others one per logical CPU)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def nvidia_gpu_found() -> bool:
    """Whether this host has an NVIDIA GPU a framework could use: nvidia-smi lists one, or the
    driver's device files exist (a container without nvidia-smi)."""
    return bool(nvidia_gpus()) or any(Path("/dev").glob("nvidia[0-9]*"))


def machine_info() -> dict[str, Any]:
    """Host, OS, Python, CPU, memory and NVIDIA GPUs of this machine (JSON-serialisable)."""
    return {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "arch": platform.machine(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": nvidia_gpus(),
    }


# --------------------------------------------------------------------------------------------
# Environment variables
# --------------------------------------------------------------------------------------------

#: Prefixes kept whole: each is one library's or framework's own namespace of run-time knobs
#: (threads, allocators, kernels, collectives, devices). TF_, FLAGS_'s gflags aside, SLURM_,
#: NVIDIA_ and DLPERF_ are shared with other programs (Terraform's TF_VAR_*, TF_CREDS), so
#: only the names below are kept from those.
ENV_PREFIXES: tuple[str, ...] = (
    "OMP_",  # OpenMP: OMP_NUM_THREADS, OMP_PROC_BIND, OMP_PLACES, OMP_WAIT_POLICY
    "GOMP_",  # GNU OpenMP: GOMP_CPU_AFFINITY, GOMP_SPINCOUNT
    "KMP_",  # Intel OpenMP: KMP_AFFINITY, KMP_BLOCKTIME
    "MKL_",
    "OPENBLAS_",
    "DNNL_",
    "ONEDNN_",
    "CUDA_",  # CUDA_VISIBLE_DEVICES, CUDA_LAUNCH_BLOCKING, CUDA_MODULE_LOADING
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "NCCL_",
    "HIP_",
    "ROCR_",
    "HSA_",
    "MIOPEN_",
    "PYTORCH_",  # PYTORCH_CUDA_ALLOC_CONF
    "TORCH_",  # TORCH_NCCL_*, TORCH_CUDNN_V8_API_ENABLED
    "TORCHINDUCTOR_",
    "FLAGS_",  # PaddlePaddle's gflags: FLAGS_cudnn_exhaustive_search, ...
    "PADDLE_",
    "MXNET_",
    "ONEFLOW_",
    "JAX_",  # JAX_ENABLE_X64, JAX_PLATFORMS, JAX_COMPILATION_CACHE_DIR
    "XLA_",  # XLA_FLAGS (jax, TensorFlow's XLA), XLA_PYTHON_CLIENT_MEM_FRACTION
    "HOROVOD_",
    "MALLOC_",  # glibc/jemalloc: MALLOC_ARENA_MAX, MALLOC_CONF
    "TCMALLOC_",
)
#: Whole names kept besides the prefixes.
ENV_NAMES: frozenset[str] = frozenset(
    {
        # thread pools of other numeric libraries
        "BLIS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "NUMEXPR_MAX_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        # NVIDIA containers and drivers
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_TF32_OVERRIDE",
        "NVIDIA_DRIVER_CAPABILITIES",
        # TensorFlow (the TF_ prefix is Terraform's too)
        "TF_CONFIG",
        "TF_CPP_MIN_LOG_LEVEL",
        "TF_CPP_MAX_VLOG_LEVEL",
        "TF_CPP_VMODULE",
        "TF_ENABLE_ONEDNN_OPTS",
        "TF_XLA_FLAGS",
        "TF_GPU_ALLOCATOR",
        "TF_FORCE_GPU_ALLOW_GROWTH",
        "TF_GPU_THREAD_MODE",
        "TF_GPU_THREAD_COUNT",
        "TF_NUM_INTEROP_THREADS",
        "TF_NUM_INTRAOP_THREADS",
        "TF_CUDNN_USE_AUTOTUNE",
        "TF_CUDNN_DETERMINISTIC",
        "TF_DETERMINISTIC_OPS",
        "TF_CUDNN_WORKSPACE_LIMIT_IN_MB",
        "TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT",
        "TF_ENABLE_WINOGRAD_NONFUSED",
        "TF_AUTOTUNE_THRESHOLD",
        "TF_ENABLE_AUTO_MIXED_PRECISION",
        "TF_ENABLE_AUTO_MIXED_PRECISION_GRAPH_REWRITE",
        "TF_ENABLE_XLA",
        "TF_XLA_ENABLE_XLA_DEVICES",
        "TF_GPU_HOST_MEM_LIMIT_IN_MB",
        "TF_USE_LEGACY_KERAS",
        "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS",
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR",
        "TF_DISABLE_NVTX_RANGES",
        "TF_SYNC_ON_FINISH",
        "XLA_FLAGS",
        # Slurm's placement of the job (SLURM_ also holds accounts, comments, job names)
        "SLURM_CPUS_PER_TASK",
        "SLURM_CPU_BIND",
        "SLURM_HINT",
        "SLURM_DISTRIBUTION",
        "SLURM_GPUS_PER_NODE",
        "SLURM_JOB_NUM_NODES",
        "SLURM_NTASKS",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_JOB_NODELIST",
        "SLURM_JOB_PARTITION",
        # which libraries load (a cuDNN build, tcmalloc/jemalloc preloaded), Python's own
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "GLIBC_TUNABLES",
        "PYTHONHASHSEED",
        "PYTHONMALLOC",
        "PYTHONOPTIMIZE",
        # dlperf's own: where its envs, manifests and patches came from ($DLPERF_SSH is not
        # kept: its options are never stored)
        "DLPERF_HOME",
        "DLPERF_MANIFESTS",
        "DLPERF_PATCHES",
        "DLPERF_POWERCAP",  # the RAPL tree the energy was read from
    }
)


def is_performance_env_name(name: str) -> bool:
    """Whether a variable called `name` is one dlperf records with a result."""
    upper = name.upper()
    return upper in ENV_NAMES or upper.startswith(ENV_PREFIXES)


def captured_env_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The performance-relevant environment, sorted by name, with secrets redacted.

    Only names in ENV_NAMES or starting with an ENV_PREFIXES prefix are kept at all (so
    ``HF_TOKEN``, ``TF_VAR_db_pwd`` or ``DLPERF_DB_PASS`` never appear); the kept ones go
    through :func:`dlperf.redact.redact_env`: a secret-looking name keeps only "<redacted>",
    and a secret-looking part of a value (a URL's password or token parameter, ``NAME=secret``,
    an API-key-like string) is replaced too.
    """
    env = os.environ if environ is None else environ
    return redact_env({name: env[name] for name in sorted(env) if is_performance_env_name(name)})


# --------------------------------------------------------------------------------------------
# GPU peaks
# --------------------------------------------------------------------------------------------

# Published DENSE peak FLOP/s per GPU. NVIDIA's datasheets print tensor-core numbers "with
# sparsity" (2:4 structured sparsity, marked with an asterisk); dense training/inference of an
# ordinary model cannot reach those, so we store the dense figure (half the asterisked one).
# Ampere+ "fp32" is the non-tensor CUDA-core rate; "tf32" is the tensor-core rate that
# frameworks use for float32 matmuls when TF32 is allowed. V100 has no TF32/BF16.
GPU_PEAK_FLOPS: dict[str, dict[str, float]] = {
    # NVIDIA Tesla V100 datasheet (SXM2 16/32GB): FP32 15.7 TF, Tensor (FP16) 125 TF.
    "V100 SXM2": {"fp32": 15.7e12, "fp16": 125e12},
    # NVIDIA Tesla V100 datasheet (PCIe 16/32GB): FP32 14 TF, Tensor (FP16) 112 TF.
    "V100 PCIe": {"fp32": 14e12, "fp16": 112e12},
    # NVIDIA V100S datasheet (PCIe 32GB): FP32 16.4 TF, Tensor (FP16) 130 TF.
    "V100S PCIe": {"fp32": 16.4e12, "fp16": 130e12},
    # NVIDIA A100 datasheet (SXM4 40/80GB): FP32 19.5, TF32 156 (312*), BF16/FP16 312 (624*).
    "A100 SXM": {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
    # NVIDIA A100 datasheet (PCIe 40/80GB): same peaks as SXM, lower sustained power (250-300 W).
    "A100 PCIe": {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
    # NVIDIA A10 datasheet: FP32 31.2, TF32 62.5 (125*), BF16/FP16 125 (250*).
    "A10": {"fp32": 31.2e12, "tf32": 62.5e12, "fp16": 125e12, "bf16": 125e12},
    # NVIDIA L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242* -> dense 60 and 121.
    "L4": {"fp32": 30.3e12, "tf32": 60e12, "fp16": 121e12, "bf16": 121e12},
    # NVIDIA L40 datasheet: FP32 90.5, TF32 90.5 (181*), BF16/FP16 181.05 (362.1*).
    "L40": {"fp32": 90.5e12, "tf32": 90.5e12, "fp16": 181.05e12, "bf16": 181.05e12},
    # NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*).
    "L40S": {"fp32": 91.6e12, "tf32": 183e12, "fp16": 362.05e12, "bf16": 362.05e12},
    # NVIDIA H100 datasheet, SXM column: FP32 67, TF32 989*, BF16/FP16 1,979* -> dense halves.
    "H100 SXM": {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
    # NVIDIA H100 datasheet, PCIe column: FP32 51, TF32 756*, BF16/FP16 1,513* -> dense halves
    # (378 / 756.5); 51.2 TF FP32 is the H100 PCIe product brief's figure.
    "H100 PCIe": {"fp32": 51.2e12, "tf32": 378e12, "fp16": 756e12, "bf16": 756e12},
    # NVIDIA H100 datasheet, NVL column (per GPU): FP32 60, TF32 835*, BF16/FP16 1,671*.
    "H100 NVL": {"fp32": 60e12, "tf32": 417.5e12, "fp16": 835.5e12, "bf16": 835.5e12},
    # NVIDIA H200 datasheet, SXM column: same compute as H100 SXM (more/faster memory only).
    "H200 SXM": {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
    # NVIDIA H200 datasheet, NVL column: FP32 60, TF32 835*, BF16/FP16 1,671*.
    "H200 NVL": {"fp32": 60e12, "tf32": 417.5e12, "fp16": 835.5e12, "bf16": 835.5e12},
    # NVIDIA HGX B200 datasheet, per GPU: FP32 75, TF32 2.2 PF*, BF16/FP16 4.5 PF*.
    "B200": {"fp32": 75e12, "tf32": 1.1e15, "fp16": 2.25e15, "bf16": 2.25e15},
}

GPU_PEAK_SOURCES: dict[str, str] = {
    "V100 SXM2": "NVIDIA Tesla V100 datasheet (SXM2)",
    "V100 PCIe": "NVIDIA Tesla V100 datasheet (PCIe)",
    "V100S PCIe": "NVIDIA V100S datasheet",
    "A100 SXM": "NVIDIA A100 datasheet (SXM)",
    "A100 PCIe": "NVIDIA A100 datasheet (PCIe)",
    "A10": "NVIDIA A10 datasheet",
    "L4": "NVIDIA L4 datasheet",
    "L40": "NVIDIA L40 datasheet",
    "L40S": "NVIDIA L40S datasheet",
    "H100 SXM": "NVIDIA H100 SXM datasheet",
    "H100 PCIe": "NVIDIA H100 PCIe datasheet",
    "H100 NVL": "NVIDIA H100 NVL datasheet",
    "H200 SXM": "NVIDIA H200 SXM datasheet",
    "H200 NVL": "NVIDIA H200 NVL datasheet",
    "B200": "NVIDIA HGX B200 datasheet",
}

_PRECISION_ALIASES = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "amp": "amp",
    "amp_fp16": "fp16",
    "amp_bf16": "bf16",
}


def gpu_model(gpu_name: str) -> str | None:
    """Key into GPU_PEAK_FLOPS for an nvidia-smi name, or None when unknown.

    ``"NVIDIA H100 80GB HBM3"`` -> ``"H100 SXM"``, ``"Tesla V100-SXM2-16GB"`` -> ``"V100 SXM2"``,
    ``"NVIDIA A100-SXM4-80GB"`` -> ``"A100 SXM"``. Variants with different clocks that we hold
    no datasheet for (A10G, V100 SXM3, GH200, H20, H800...) give None rather than a wrong peak.
    """
    name = gpu_name.upper().replace("_", " ")
    tokens = set(re.split(r"[\s\-/,()]+", name))

    def has(word: str) -> bool:
        return word in tokens

    pcie = has("PCIE")
    if has("V100S"):
        return "V100S PCIe"
    if has("V100"):
        if has("SXM2"):
            return "V100 SXM2"
        return "V100 PCIe" if pcie else None
    if has("A100"):
        if pcie:
            return "A100 PCIe"
        # "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM-80GB" (DGX A100)
        return "A100 SXM" if any(t.startswith("SXM") for t in tokens) else None
    if has("A10"):
        return "A10"
    if has("L4"):
        return "L4"
    if has("L40S"):
        return "L40S"
    if has("L40"):
        return "L40"
    for chip in ("H100", "H200"):
        if has(chip):
            if has("NVL"):
                return f"{chip} NVL"
            if pcie:
                return "H100 PCIe" if chip == "H100" else None
            # SXM boards: "NVIDIA H100 80GB HBM3", "NVIDIA H200" (141GB HBM3e), "... SXM5 ..."
            if chip == "H200" or "HBM3" in tokens or any(t.startswith("SXM") for t in tokens):
                return f"{chip} SXM"
            return None
    if has("B200"):
        return "B200"
    return None


def gpu_peak_flops(
    gpu_name: str, precision: str, allow_tf32: bool = False
) -> tuple[float, str] | None:
    """(dense peak FLOP/s, where it comes from) for an nvidia-smi GPU name, or None if unknown.

    ``precision``: "amp" (mixed precision: the BF16/FP16 tensor-core peak), "fp32" (the CUDA-core
    FP32 peak, or the TF32 tensor-core peak when ``allow_tf32`` and the GPU has TF32), or an
    explicit "tf32", "fp16", "bf16".
    """
    model = gpu_model(gpu_name or "")
    prec = _PRECISION_ALIASES.get(precision.lower()) if precision else None
    if model is None or prec is None:
        return None
    peaks = GPU_PEAK_FLOPS[model]
    source = GPU_PEAK_SOURCES[model]
    if prec == "amp":
        if "bf16" in peaks:
            return peaks["bf16"], f"{source}, dense BF16/FP16 tensor"
        return peaks["fp16"], f"{source}, dense FP16 tensor"
    if prec == "fp32" and allow_tf32 and "tf32" in peaks:
        prec = "tf32"
    if prec not in peaks:
        return None
    if prec == "fp32":
        return peaks["fp32"], f"{source}, FP32 (non-tensor)"
    return peaks[prec], f"{source}, dense {prec.upper()} tensor"


# --------------------------------------------------------------------------------------------
# CPU peak (measured)
# --------------------------------------------------------------------------------------------


def measure_cpu_gemm_peak(seconds: float = 2.0, n: int = 1024) -> float:
    """Best float32 GEMM FLOP/s that numpy's BLAS reaches (all its threads), 2*n^3 per matmul.

    Warms up (thread pool start, page faults), then times single matmuls into a preallocated
    output until ``seconds`` have passed (at least 3 timings) and returns the best one.
    """
    import numpy as np  # here: `dlperf --help` and `dlperf list` import no numpy

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    flops = 2.0 * n**3
    for _ in range(2):
        np.matmul(a, b, out=c)
    best = float("inf")
    deadline = time.perf_counter() + seconds
    runs = 0
    while runs < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        np.matmul(a, b, out=c)
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        runs += 1
    return flops / max(best, 1e-9)


def numpy_version() -> str:
    """numpy's version, numpy imported only here (`dlperf --help` and `dlperf list` import
    none of the numeric libraries)."""
    import numpy as np

    return np.__version__


def _cpu_peak_key(model: str, logical: int) -> str:
    return f"{model}|{logical}|numpy {numpy_version()}"


CPU_GEMM_N = 1024
CPU_GEMM_SECONDS = 2.0
# Other processes' share of the machine above which it counts as busy: a peak measured then is
# not cached, a repeat run then marks its result noisy.
BUSY_SHARE = 0.10


# --------------------------------------------------------------------------------------------
# Machine load
# --------------------------------------------------------------------------------------------


def _own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class LoadMeter:
    """What the rest of the machine did between start and :meth:`stop`: CPU time taken by
    processes other than this one and the children it has waited for (a workload's processes
    are reaped before it is stopped), from the kernel's per-CPU counters."""

    def __init__(self) -> None:
        self.cpu_count = psutil.cpu_count(logical=True) or os.cpu_count() or 1
        self.load1_start = _load1()
        self._t0 = time.monotonic()
        self._times0 = psutil.cpu_times()
        self._own0 = _own_cpu_s()

    def stop(self) -> dict[str, Any]:
        """MachineLoad's fields: cpu_count, wall_s, other_cpu_s, other_share, load1_start,
        load1_end, steal_s."""
        wall = max(time.monotonic() - self._t0, 1e-9)
        t0, t1 = self._times0, psutil.cpu_times()

        def busy(t: Any) -> float:
            return sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq"))

        other = max(0.0, busy(t1) - busy(t0) - (_own_cpu_s() - self._own0))
        steal = getattr(t1, "steal", None)
        return {
            "cpu_count": self.cpu_count,
            "wall_s": round(wall, 4),
            "other_cpu_s": round(other, 4),
            "other_share": round(min(1.0, other / (wall * self.cpu_count)), 4),
            "load1_start": self.load1_start,
            "load1_end": _load1(),
            "steal_s": None if steal is None else round(steal - getattr(t0, "steal", 0.0), 4),
        }


def _load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


_UNCACHED_PEAKS: dict[str, dict[str, Any]] = {}  # peaks measured under load, this process only


def cpu_peak(cache_dir: Path | None = None, refresh: bool = False) -> dict[str, Any]:
    """This CPU's fp32 peak, measured once per machine on an idle machine and cached in
    ``machine.json``.

    The cache key is (CPU model, logical CPU count, numpy version): a different machine, a
    resized VM or another BLAS build measures again; ``refresh=True`` always re-measures.
    While other processes take more than BUSY_SHARE of the CPUs the GEMMs get fewer cycles and
    measure low (seen: 41 GFLOP/s on a busy VM that gives 305 idle), so such a measurement
    comes back with ``under_load`` true and is never cached (nor measured twice by one
    process); :func:`peak_flops` does not use it. An unreadable cache file is ignored (and
    rewritten), never an error.
    """
    path = Path(cache_dir if cache_dir is not None else dlperf_home()) / "machine.json"
    model = cpu_model()
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    key = _cpu_peak_key(model, logical)
    data: dict[str, Any] = {}
    try:
        loaded = json.loads(path.read_text())
        if isinstance(loaded, dict):
            data = loaded
    except (OSError, ValueError):
        pass
    entries = data.get("cpu_peak")
    if not isinstance(entries, dict):
        entries = {}
    cached = entries.get(key)
    if not refresh and isinstance(cached, dict) and isinstance(cached.get("flops"), int | float):
        return cached
    if not refresh and key in _UNCACHED_PEAKS:
        return _UNCACHED_PEAKS[key]
    meter = LoadMeter()
    flops = measure_cpu_gemm_peak(seconds=CPU_GEMM_SECONDS, n=CPU_GEMM_N)
    load = meter.stop()
    entry = {
        "flops": float(flops),
        "source": (
            f"measured fp32 GEMM (numpy, n={CPU_GEMM_N}, best of repeated runs over "
            f"{CPU_GEMM_SECONDS:g} s, all BLAS threads)"
        ),
        "cpu": model,
        "cpu_count": logical,
        "numpy": numpy_version(),
        "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load1_at_measure": load["load1_start"],
        "other_share": load["other_share"],  # other processes' share of the CPUs meanwhile
        "under_load": load["other_share"] > BUSY_SHARE,
    }
    if entry["under_load"]:
        _UNCACHED_PEAKS[key] = entry
        return entry
    entries[key] = entry
    data["cpu_peak"] = entries
    # a read-only home still gets a peak, just not a cached one
    with contextlib.suppress(StorageError):
        atomic_write_json(path, data)
    return entry


def peak_flops(
    device: str, device_name: str | None, precision: str, allow_tf32: bool = False
) -> tuple[float, str] | None:
    """(peak FLOP/s, source) for a run's device and precision, or None when unknown.

    "cuda" uses the GPU datasheet table; "cpu" uses the measured fp32 GEMM peak for every
    precision (there is no published per-model CPU BF16 peak, so amp says so in the source),
    and only one measured on an idle machine (None while the only measurement was under load).
    """
    kind = device.lower().split(":")[0]
    if kind == "cuda":
        if not device_name:
            return None
        return gpu_peak_flops(device_name, precision, allow_tf32=allow_tf32)
    if kind == "cpu":
        peak = cpu_peak()
        if peak.get("under_load"):
            return None
        source = str(peak["source"])
        if _PRECISION_ALIASES.get(precision.lower(), precision) != "fp32":
            source += " (used for amp too: no published CPU bf16 peak)"
        return float(peak["flops"]), source
    return None


def job_peak_flops(
    device: str, device_name: str | None, precision: str, *, gpus: int, machines: int
) -> tuple[float, str] | None:
    """(peak FLOP/s, source) of a whole job: the per-GPU peak times its `gpus`; a CPU peak is
    already a whole host's, so times its `machines` (the local launcher's simulated nodes share
    this one)."""
    found = peak_flops(device, device_name, precision)
    if found is None:
        return None
    peak, source = found
    scale = gpus if device == "cuda" else machines
    if scale > 1:
        return peak * scale, f"{scale} x {source}"
    return peak, source


def hardware_fields(info: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Environment's hardware fields (what `identity.Machine` is made of) of this host, or
    of `machine_info()`'s answer."""
    info = machine_info() if info is None else info
    gpus = info.get("gpus") or []
    memory = sorted({g["memory_mb"] for g in gpus if g.get("memory_mb")})
    return {
        "cpu": info.get("cpu"),
        "cpu_count": info.get("cpu_count_logical"),
        "gpu": ", ".join(sorted({g["name"] for g in gpus})) or None,
        "gpu_count": len(gpus) or None,
        "gpu_memory_mb": memory[0] if memory else None,  # the smallest, where they differ
    }


def run_environment(
    workload: dict, env: Env | None, interpreter: InterpreterInfo | None
) -> Environment:
    """Where a run measured: this machine (probed now), the env or interpreter that ran the
    workload, and what the workload itself reported at start-up."""
    info = machine_info()
    return Environment(
        dlperf_version=__version__,
        host=info["host"],
        os=info["os"],
        python=workload.get("python"),
        framework_version=workload.get("framework_version")
        or (env.framework_version if env else None),
        env_name=env.path.name if env and env.kind == "built" else None,
        env_kind=env.kind if env else None,
        interpreter=str(interpreter.python) if interpreter else None,
        dists_digest=interpreter.dists_digest if interpreter else None,
        **hardware_fields(info),
        device_name=workload.get("device_name"),
        threads=workload.get("threads") or None,
        env_vars=captured_env_vars(),
        **provenance(),
    )


def run_peak(spec: BenchmarkSpec, workload: dict, job: JobInfo) -> tuple[float, str] | None:
    """The job's peak FLOP/s when the workload reports its FLOPs (the MFU's denominator)."""
    if not workload.get("flops_per_sample"):
        return None
    machines = distinct_machines(job.hosts) if job.hosts else 1
    return job_peak_flops(
        spec.device,
        workload.get("device_name"),
        spec.precision,
        gpus=spec.world_size,
        machines=machines,
    )


def distinct_machines(hosts: Sequence[str]) -> int:
    """How many machines the node addresses name ("localhost" and 127.0.0.1 are one)."""
    found = set()
    for host in hosts:
        try:
            found.add(socket.gethostbyname(host))
        except OSError:
            found.add(host)
    return len(found)
