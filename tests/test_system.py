import json
import subprocess
import sys
import time

import pytest

from dlperf import system


def test_captured_env_vars_keeps_perf_vars_and_redacts_secrets():
    environ = {
        "OMP_NUM_THREADS": "8",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_DEBUG": "INFO",
        "XLA_FLAGS": "--xla_gpu_autotune_level=2",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "TOKENIZERS_PARALLELISM": "false",
        "NCCL_IB_PKEY": "0x8001",
        "NCCL_API_TOKEN": "s3cr3t-nccl",
        "FLAGS_db_password": "s3cr3t-flags",
        "TF_SECRET_KEY": "s3cr3t-tf",
        "HF_TOKEN": "s3cr3t-hf",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-aws",
        "PATH": "/usr/bin",
        "HOME": "/root",
        "TORCHINDUCTOR_REDIS_URL": "redis://user:s3cr3t-url@cache.example.com:6379/0",
    }
    got = system.captured_env_vars(environ)
    assert got["OMP_NUM_THREADS"] == "8"
    assert got["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert got["NCCL_DEBUG"] == "INFO"
    assert got["XLA_FLAGS"] == "--xla_gpu_autotune_level=2"
    assert got["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    assert got["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert got["TOKENIZERS_PARALLELISM"] == "false"  # TOKEN in the name, no secret in it
    assert got["NCCL_IB_PKEY"] == "0x8001"  # InfiniBand partition key, not a secret
    assert got["NCCL_API_TOKEN"] == "<redacted>"
    assert got["FLAGS_db_password"] == "<redacted>"
    # not performance-relevant (TF_ is Terraform's too: only TensorFlow's names are kept)
    for name in ("TF_SECRET_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "PATH", "HOME"):
        assert name not in got
    assert got["TORCHINDUCTOR_REDIS_URL"] == "redis://user:<redacted>@cache.example.com:6379/0"
    # no secret value survives anywhere
    assert "s3cr3t" not in json.dumps(got)
    assert list(got) == sorted(got)


def test_captured_env_vars_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    monkeypatch.setenv("HOROVOD_PASSWORD", "hunter2")
    monkeypatch.setenv("DLPERF_PASSWORD", "hunter2")
    got = system.captured_env_vars()
    assert got["MKL_NUM_THREADS"] == "3"
    assert got["HOROVOD_PASSWORD"] == "<redacted>"
    assert "DLPERF_PASSWORD" not in got  # dlperf's own names only: DLPERF_HOME, ...


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM"),
        ("A100-SXM-80GB", "A100 SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA B200", "B200"),
        # different clocks, no datasheet in the table: unknown rather than wrong
        ("NVIDIA A10G", None),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA H20", None),
        ("NVIDIA GeForce RTX 4090", None),
        ("", None),
    ],
)
def test_gpu_model_matches_nvidia_smi_names(name, model):
    assert system.gpu_model(name) == model


def test_gpu_peak_flops_values():
    flops, source = system.gpu_peak_flops("NVIDIA H100 80GB HBM3", "amp")
    assert flops == 989.4e12
    assert "H100 SXM" in source and "dense" in source
    assert system.gpu_peak_flops("NVIDIA H100 80GB HBM3", "fp32")[0] == 67e12
    assert system.gpu_peak_flops("NVIDIA H100 80GB HBM3", "fp32", allow_tf32=True)[0] == 494.7e12
    assert system.gpu_peak_flops("NVIDIA H100 PCIe", "amp")[0] == 756e12
    assert system.gpu_peak_flops("NVIDIA A100-SXM4-80GB", "amp")[0] == 312e12
    assert system.gpu_peak_flops("NVIDIA A100-SXM4-80GB", "fp32", allow_tf32=True)[0] == 156e12
    flops, source = system.gpu_peak_flops("Tesla V100-SXM2-16GB", "amp")
    assert flops == 125e12 and "FP16" in source
    # V100 has no TF32: allow_tf32 falls back to the FP32 peak; no BF16 at all
    assert system.gpu_peak_flops("Tesla V100-SXM2-16GB", "fp32", allow_tf32=True)[0] == 15.7e12
    assert system.gpu_peak_flops("Tesla V100-SXM2-16GB", "bf16") is None
    assert system.gpu_peak_flops("NVIDIA GeForce RTX 4090", "amp") is None
    assert system.gpu_peak_flops("NVIDIA H100 80GB HBM3", "int8") is None


def test_gpu_peak_table_is_dense_and_sane():
    for model, peaks in system.GPU_PEAK_FLOPS.items():
        assert model in system.GPU_PEAK_SOURCES
        assert set(peaks) <= {"fp32", "tf32", "fp16", "bf16"}
        assert "fp32" in peaks and "fp16" in peaks
        assert peaks["fp16"] > peaks["fp32"]
        if "tf32" in peaks:
            assert peaks["fp32"] <= peaks["tf32"] <= peaks["fp16"]


def test_machine_info_has_the_keys():
    info = system.machine_info()
    for key in (
        "host",
        "os",
        "python",
        "cpu",
        "cpu_count_logical",
        "cpu_count_physical",
        "memory_gb",
        "gpus",
    ):
        assert key in info
    assert info["python"] == sys.version.split()[0]
    assert info["cpu_count_logical"] >= 1
    assert info["memory_gb"] > 0
    assert isinstance(info["gpus"], list)
    json.dumps(info)


def test_nvidia_gpus_parses_csv(monkeypatch):
    monkeypatch.setattr(system.shutil, "which", lambda cmd: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        system,
        "_run",
        lambda cmd, timeout=10.0: (
            "NVIDIA H100 80GB HBM3, 81559, 550.54.15\nNVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
        ),
    )
    gpus = system.nvidia_gpus()
    assert (
        gpus == [{"name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559, "driver": "550.54.15"}] * 2
    )


def test_nvidia_gpus_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(system.shutil, "which", lambda cmd: None)
    assert system.nvidia_gpus() == []


def test_measure_cpu_gemm_peak_positive():
    flops = system.measure_cpu_gemm_peak(seconds=0.2, n=256)
    assert flops > 1e8  # anything slower than 0.1 GFLOP/s is a broken measurement


RealLoadMeter = system.LoadMeter


class _FakeMeter:
    """A LoadMeter that reports `share` of the CPUs taken by other processes."""

    share = 0.0

    def stop(self) -> dict:
        return {"other_share": self.share, "load1_start": 0.1}


@pytest.fixture(autouse=True)
def _idle_machine(monkeypatch):
    """The peak tests fake the GEMM; the machine's real load must not decide the caching."""
    _FakeMeter.share = 0.0
    monkeypatch.setattr(system, "LoadMeter", _FakeMeter)
    monkeypatch.setattr(system, "_UNCACHED_PEAKS", {})


def test_cpu_peak_measured_under_load_is_never_cached_nor_used(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(
        system, "measure_cpu_gemm_peak", lambda seconds=2.0, n=1024: calls.append(1) or 41e9
    )
    _FakeMeter.share = 0.6  # other processes took 60 % of the CPUs while the GEMMs ran
    busy = system.cpu_peak()
    assert busy["under_load"] and busy["other_share"] == 0.6 and busy["flops"] == 41e9
    assert not (tmp_path / "machine.json").exists()
    assert system.peak_flops("cpu", None, "fp32") is None  # no MFU from a low peak
    assert len(calls) == 1  # one process does not measure under load twice
    _FakeMeter.share = 0.02
    idle = system.cpu_peak(refresh=True)
    assert not idle["under_load"] and (tmp_path / "machine.json").exists()
    assert system.peak_flops("cpu", None, "fp32")[0] == 41e9


@pytest.mark.multiprocess
def test_load_meter_sees_other_processes():
    hog = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"
    meter = RealLoadMeter()
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(system.cpu_budget())]
    time.sleep(1.0)
    busy = meter.stop()  # the hogs run and are not waited for: other processes, not ours
    for p in hogs:
        p.wait()
    assert busy["other_share"] > 0.5 and busy["other_cpu_s"] > 0.5
    assert busy["cpu_count"] >= 1 and busy["wall_s"] >= 1.0


def test_cpu_peak_is_cached(tmp_path, monkeypatch):
    calls = []

    def fake_measure(seconds=2.0, n=1024):
        calls.append((seconds, n))
        return 123.0e9

    monkeypatch.setattr(system, "measure_cpu_gemm_peak", fake_measure)
    first = system.cpu_peak(cache_dir=tmp_path)
    assert first["flops"] == 123.0e9
    assert "measured fp32 GEMM" in first["source"]
    assert {"cpu", "cpu_count", "measured"} <= set(first)
    assert (tmp_path / "machine.json").exists()
    second = system.cpu_peak(cache_dir=tmp_path)
    assert second == first
    assert len(calls) == 1
    system.cpu_peak(cache_dir=tmp_path, refresh=True)
    assert len(calls) == 2


def test_cpu_peak_uses_dlperf_home_and_survives_a_corrupt_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    (tmp_path / "machine.json").write_text("{not json")
    monkeypatch.setattr(system, "measure_cpu_gemm_peak", lambda seconds=2.0, n=1024: 5e10)
    assert system.cpu_peak()["flops"] == 5e10
    assert json.loads((tmp_path / "machine.json").read_text())["cpu_peak"]


def test_cpu_peak_remeasures_on_another_machine(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        system, "measure_cpu_gemm_peak", lambda seconds=2.0, n=1024: calls.append(1) or 1e10
    )
    system.cpu_peak(cache_dir=tmp_path)
    monkeypatch.setattr(system, "cpu_model", lambda: "Some Other CPU")
    system.cpu_peak(cache_dir=tmp_path)
    assert len(calls) == 2


def test_peak_flops_dispatch(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    monkeypatch.setattr(system, "measure_cpu_gemm_peak", lambda seconds=2.0, n=1024: 2e11)
    assert system.peak_flops("cuda", "NVIDIA H100 80GB HBM3", "amp")[0] == 989.4e12
    assert system.peak_flops("cuda:0", "NVIDIA H100 PCIe", "fp32")[0] == 51.2e12
    assert system.peak_flops("cuda", None, "amp") is None
    flops, source = system.peak_flops("cpu", None, "fp32")
    assert flops == 2e11 and "no published" not in source
    flops, source = system.peak_flops("cpu", None, "amp")
    assert flops == 2e11
    assert "used for amp too: no published CPU bf16 peak" in source
    assert system.peak_flops("mps", None, "fp32") is None
