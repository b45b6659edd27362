"""Secrets never reach a stored file: the value rule, the argv rule, and one real run with every
secret of issue 11 (point 7) set, its results folder searched byte by byte."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf.redact import (
    REDACTED,
    SSH_OPTIONS_HIDDEN,
    is_secret_name,
    redact_env,
    redact_value,
    stored_argv,
)

KEY_LIKE = "ghp_xJ31jmWdPdYJdqaOZuMIY49xtZWG8fS5xWLt"


@pytest.mark.parametrize(
    "name",
    ["DLPERF_DB_PASS", "DLPERF_PASSPHRASE", "TF_CREDS", "TF_VAR_db_pwd", "SSHPASS",
     "TF_TOKEN_app_terraform_io", "AWS_SECRET_ACCESS_KEY", "api_key", "X-Amz-Signature", "sig",
     "access_token", "--password", "GOOGLE_APPLICATION_CREDENTIALS", "DB_PW", "SSH_AUTH_SOCK",
     "NCCL_SSHKEY", "session_cookie", "PRIVATE_PEM"],
)  # fmt: skip
def test_secret_looking_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["PWD", "OLDPWD", "TOKENIZERS_PARALLELISM", "NCCL_IB_PKEY", "OMP_NUM_THREADS", "XLA_FLAGS",
     "TF_GPU_THREAD_MODE", "SIGNAL", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "CUDA_VISIBLE_DEVICES"],
)  # fmt: skip
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("env SSHPASS=s3cr3t ssh", f"env SSHPASS={REDACTED} ssh"),
        ("https://db.example.com/q?access_token=s3cr3t&n=1",
         f"https://db.example.com/q?access_token={REDACTED}&n=1"),
        ("https://store/x?X-Amz-Credential=s3cr3t;X-Amz-Signature=s3cr3t",
         f"https://store/x?X-Amz-Credential={REDACTED};X-Amz-Signature={REDACTED}"),
        ("user:s3cr3t@host", f"user:{REDACTED}@host"),
        ("user:s3cr3t@host:29500", f"user:{REDACTED}@host:29500"),
        ("redis://default:s3cr3t@cache:6379/0", f"redis://default:{REDACTED}@cache:6379/0"),
        ("--export=ALL,DB_PASSWORD=s3cr3t,OMP_NUM_THREADS=4",
         f"--export=ALL,DB_PASSWORD={REDACTED},OMP_NUM_THREADS=4"),
        ("cd /w && TOKEN='s3 cr'\"'\"'3t' OMP_NUM_THREADS=4 python x.py",
         f"cd /w && TOKEN={REDACTED} OMP_NUM_THREADS=4 python x.py"),
        ('{"user": "me", "password": "s3cr3t"}', f'{{"user": "me", "password": "{REDACTED}"}}'),
        ("--xla_dump_to=/tmp/x --xla_auth_token=s3cr3t",
         f"--xla_dump_to=/tmp/x --xla_auth_token={REDACTED}"),
        ("train.py --api-key s3cr3t --batch 2", f"train.py --api-key {REDACTED} --batch 2"),
        (f"Bearer {KEY_LIKE}", f"Bearer {REDACTED}"),
        (f"https://{KEY_LIKE}@github.com/org/repo.git", f"https://{REDACTED}@github.com/org/repo.git"),
    ],
)  # fmt: skip
def test_secret_parts_of_values_are_redacted(value: str, stored: str) -> None:
    assert redact_value(value) == stored
    assert "s3cr3t" not in redact_value(value) and KEY_LIKE not in redact_value(value)


@pytest.mark.parametrize(
    "value",
    ["--xla_gpu_autotune_level=2 --xla_gpu_enable_latency_hiding_scheduler=true",
     "/usr/local/cuda-12.1/lib64:/opt/nccl/lib", "expandable_segments:True",
     "gpu0:8,gpu1:8", "git@github.com:NVIDIA/DeepLearningExamples.git",
     "nvcr.io/nvidia/pytorch:23.10-py3@sha256:0123abcd", "a82f0ff4b9f2a82f0ff4b9f2a82f0ff4b9f2a82f",
     "/root/.cache/dlperf/envs/pytorch-cpu-py3.11-a82f0ff4b9f2/bin/python",
     '{"cluster": {"worker": ["gpu0:29500"]}, "task": {"type": "worker", "index": 0}}',
     "0,1,2,3", "INFO", "", "resnet50_v1_5_imagenet_checkpoint_dir_2024"],
)  # fmt: skip
def test_ordinary_values_are_kept(value: str) -> None:
    assert redact_value(value) == value


def test_redact_env_hides_secret_names_whole() -> None:
    assert redact_env({"DB_PASSWORD": "x y", "OMP_NUM_THREADS": "4"}) == {
        "DB_PASSWORD": REDACTED,
        "OMP_NUM_THREADS": "4",
    }


SSH_WITH_SECRETS = "env SSHPASS=s3cr3t-sshpass ssh -i /keys/s3cr3t-id -o ProxyJump=s3cr3t-jump"


def test_stored_argv_keeps_no_ssh_options_and_no_secret_words() -> None:
    environ = {"DLPERF_SSH": SSH_WITH_SECRETS}
    argv = [*shlex.split(SSH_WITH_SECRETS), "-tt", "-o", "BatchMode=yes", "gpu0", "cd /w && x"]
    assert stored_argv(argv, environ) == [
        "env", SSH_OPTIONS_HIDDEN, "-tt", "-o", "BatchMode=yes", "gpu0", "cd /w && x",
    ]  # fmt: skip
    plain = ["ssh", "-tt", "gpu0", "true"]
    assert stored_argv(plain, {"DLPERF_SSH": "ssh"}) == plain
    assert stored_argv(plain, {}) == plain
    argv = ["mpirun", "-x", "NCCL_TOKEN=s3cr3t", "-x", "OMP_NUM_THREADS=2", "--password",
            "s3cr3t", "docker", "run", "-e", "TF_CREDS=s3 cr3t", "img",
            "--db=user:s3cr3t@h"]  # fmt: skip
    got = stored_argv(argv, {})
    assert got == ["mpirun", "-x", f"NCCL_TOKEN={REDACTED}", "-x", "OMP_NUM_THREADS=2",
                   "--password", REDACTED, "docker", "run", "-e", f"TF_CREDS={REDACTED}", "img",
                   f"--db=user:{REDACTED}@h"]  # fmt: skip


def test_source_urls_keep_no_token() -> None:
    from dlperf.official.checkout import source_info
    from dlperf.official.manifest import Upstream

    url = "https://oauth2:s3cr3t@gitlab.example.com/x.git"
    info = source_info(Upstream(name="x", url=url, commit="0" * 40), [], "current")
    assert info.url == f"https://oauth2:{REDACTED}@gitlab.example.com/x.git"


@pytest.mark.multiprocess
def test_log_headers_keep_no_ssh_options(tmp_path: Path, monkeypatch) -> None:
    from dlperf.proc import run_process

    monkeypatch.setenv("DLPERF_SSH", "env SSHPASS=s3cr3t")
    log = tmp_path / "x.log"
    run_process(["env", "SSHPASS=s3cr3t", "true", "--token", "s3cr3t"], log_path=log,
                env=dict(os.environ), timeout_s=30)  # fmt: skip
    header = log.read_text().splitlines()[0]
    assert header == f"# dlperf: env '{SSH_OPTIONS_HIDDEN}' true --token '{REDACTED}'"


# ------------------------------------------------------------------ one real run, end to end

# Issue 11, point 7: what was stored verbatim, and what else a results folder could leak.
SECRET_ENV = {
    "DLPERF_DB_PASS": "s3cr3t-dbpass",
    "DLPERF_PASSPHRASE": "s3cr3t-passphrase",
    "TF_CREDS": "s3cr3t-tfcreds",
    "DLPERF_URL": "https://metrics.example.com/push?job=x&access_token=s3cr3t-urltoken",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "user:s3cr3t-gloo@10.0.0.1",
    "TF_VAR_db_pwd": "s3cr3t-tfvar",
    "TF_TOKEN_app_terraform_io": "s3cr3t-tftoken",
    "FLAGS_db_password": "s3cr3t-flags",  # a kept prefix, a secret name
    "TORCHINDUCTOR_REDIS_URL": "redis://default:s3cr3t-redis@cache:6379/0",
    "XLA_FLAGS": "--xla_dump_to=/tmp/xla --xla_auth_token=s3cr3t-xlaflag",
    "MXNET_KVSTORE_SIGNING": f"{KEY_LIKE}",  # API-key-like value under a kept prefix
    "NCCL_SOCKET_IFNAME": "lo",  # an ordinary knob, kept as is
}


@pytest.mark.multiprocess
def test_a_run_through_ssh_stores_no_secret_anywhere(tmp_path: Path) -> None:
    # A stand-in for ssh: runs the remote line here, ignoring the options and the host.
    fake_ssh = tmp_path / "bin" / "fake-ssh"
    fake_ssh.parent.mkdir()
    fake_ssh.write_text('#!/bin/sh\nfor last; do :; done\nexec /bin/sh -c "$last"\n')
    fake_ssh.chmod(0o755)
    ssh = f"env SSHPASS=s3cr3t-sshpass {fake_ssh} -i /keys/s3cr3t-idfile -o ProxyJump=s3cr3t-jump"
    env = {**os.environ, **SECRET_ENV, "DLPERF_SSH": ssh, "DLPERF_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-m", "dlperf", "run", "calibration", "pace", "--preset", "smoke",
         "--set", "step_ms=5", "--repeats", "1", "--nodes", "2", "--launcher", "ssh",
         "--hosts", "localhost,user:s3cr3t-host@localhost", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    stored = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in stored) and any(p.suffix == ".log" for p in stored)
    secrets = ["s3cr3t", KEY_LIKE, "/keys/", "ProxyJump", "fake-ssh"]
    for path in stored:
        text = path.read_bytes().decode(errors="replace")
        leaked = [s for s in secrets if s in text]
        assert not leaked, f"{path.relative_to(tmp_path)} holds {leaked}"
    env_vars = result["environment"]["env_vars"]
    for name in ("DLPERF_DB_PASS", "DLPERF_PASSPHRASE", "TF_CREDS", "DLPERF_URL", "DLPERF_SSH",
                 "TF_VAR_db_pwd", "TF_TOKEN_app_terraform_io"):  # fmt: skip
        assert name not in env_vars
    assert env_vars["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == f"user:{REDACTED}@10.0.0.1"
    assert env_vars["FLAGS_db_password"] == REDACTED
    assert env_vars["MXNET_KVSTORE_SIGNING"] == REDACTED
    assert env_vars["NCCL_SOCKET_IFNAME"] == "lo"
    (repeat,) = result["repeats"]
    assert repeat["status"] == "ok"
    assert repeat["command"][:3] == ["env", SSH_OPTIONS_HIDDEN, "-tt"]
    assert result["job"]["hosts"] == ["localhost", f"user:{REDACTED}@localhost"]
    for node in (0, 1):  # each node's log names how it was started
        log = (tmp_path / repeat["log_path"]).with_name(f"repeat-1.node{node}.log")
        assert log.read_text().startswith(f"# dlperf: env '{SSH_OPTIONS_HIDDEN}' -tt ")
