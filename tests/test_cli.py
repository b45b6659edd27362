"""The command line as a user meets it: real processes, exit codes, stored files."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiprocess


def dlperf(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args], cwd=cwd, capture_output=True, text=True
    )


def test_run_json_prints_the_stored_result_and_report_renders_it(tmp_path):
    out = dlperf(
        "run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=10",
        "--measure", "10", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok"
    from conftest import throughput_from_marks

    from dlperf.schema import Repeat

    marks = [
        throughput_from_marks(Repeat.model_validate(r), tmp_path)[0] for r in result["repeats"]
    ]
    assert result["metrics"]["throughput"]["values"] == pytest.approx(marks, rel=1e-9)
    assert list((tmp_path / "results").rglob("*.json"))
    rep = dlperf("report", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "1000." in (tmp_path / "reports" / "pace.md").read_text()


def test_a_failed_benchmark_exits_2_and_is_stored(tmp_path):
    out = dlperf(
        "run", "calibration", "pace", "--preset", "smoke", "--repeats", "2",
        "--set", "crash_at_step=2", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2
    assert "crashed" in out.stdout
    (path,) = (tmp_path / "results").rglob("*.json")
    assert json.loads(path.read_text())["status"] == "failed"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "caffe", "resnet50"], "known frameworks: calibration, "),
        (["run", "pytorch", "gpt9"], "its models: resnet50, bert"),
        (["run", "calibration", "pace", "--batch-size", "0"], "--batch-size 0 is below 1"),
        (["run", "calibration", "pace", "--measure", "0"], "--measure 0 is below 1"),
        (["run", "calibration", "pace", "--set", "nope=1"], "valid keys"),
        (["run", "calibration", "pace", "--set", "nope"], "KEY=VALUE"),
        (["run", "calibration", "pace", "--no-such-flag"], "No such option"),
        (["run", "pytorch", "resnet50", "--device", "tpu"], "--device takes cpu or cuda"),
    ],
)
def test_bad_input_is_refused_with_exit_1_before_anything_runs(tmp_path, args, message):
    out = dlperf(*args, cwd=tmp_path)
    assert out.returncode == 1
    assert message in out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists()


def test_list_and_doctor(tmp_path):
    out = dlperf("list", cwd=tmp_path)
    assert out.returncode == 0 and "resnet50" in out.stdout and "pace" in out.stdout
    doc = dlperf("doctor", "--json", cwd=tmp_path)
    assert doc.returncode == 0, doc.stderr
    payload = json.loads(doc.stdout)
    assert payload["cpu_peak"]["flops"] > 0
    assert {c["name"] for c in payload["checks"]} >= {"cpu governor", "load"}


def test_report_without_results_says_what_to_do(tmp_path):
    out = dlperf("report", cwd=tmp_path)
    assert out.returncode == 1 and "dlperf run" in out.stderr


def dlperf_with_signals(ignored: tuple[str, ...], *args: str) -> list[str]:
    """The argv of `python -m dlperf ARGS` started with SIGINT, SIGTERM and SIGHUP at their
    defaults (a foreground command's, whatever this test run inherited: `nohup` or a background
    job ignore some), except those named in `ignored`. Set in the child's own Python before
    dlperf starts: no preexec_fn, which is unsafe in a process with threads."""
    code = (
        "import runpy, signal, sys\n"
        f"for name in ('SIGINT', 'SIGTERM', 'SIGHUP'):\n"
        f"    ignored = name in {ignored!r}\n"
        "    signal.signal(getattr(signal, name), signal.SIG_IGN if ignored else signal.SIG_DFL)\n"
        "sys.argv = ['dlperf', *sys.argv[1:]]\n"
        "runpy.run_module('dlperf', run_name='__main__', alter_sys=True)\n"
    )
    return [sys.executable, "-c", code, *args]


def _start_slow_run(tmp_path, running_repeat: int, ignored: tuple[str, ...] = ()):
    """A 3-repeat calibration run, and its processes once repeat `running_repeat` is running.
    `ignored`: the signals it starts with ignored, as `nohup` or a shell's `&` start a job."""
    import time

    import psutil

    proc = subprocess.Popen(
        dlperf_with_signals(ignored, "run", "calibration", "pace", "--preset", "smoke",
                            "--set", "step_ms=400", "--skip", "1", "--measure", "2",
                            "--repeats", "3"),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    started = f"repeat-{running_repeat}.log"
    workload: list[psutil.Process] = []
    while time.monotonic() < deadline and not workload:
        time.sleep(0.02)
        if list(tmp_path.rglob(started)):
            # The workload has printed its first step: it is exec'd, not a fork in progress.
            log = next(tmp_path.rglob(started)).read_text()
            if "\npace: " in log:
                workload = psutil.Process(proc.pid).children(recursive=True)
    assert workload, "the workload never started"
    return proc, workload


def _all_end(procs, within_s: float = 30.0) -> list:
    """Those of `procs` still running after waiting up to `within_s` for them to end."""
    import psutil

    _, alive = psutil.wait_procs(procs, timeout=within_s)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("after_repeats", [0, 1])
def test_a_signal_stops_the_workload_and_keeps_the_finished_repeats(
    tmp_path, signame, after_repeats
):
    import signal

    proc, workload = _start_slow_run(tmp_path, after_repeats + 1)
    proc.send_signal(getattr(signal, signame))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert not _all_end(workload)  # the workload, and the guard once dlperf has gone
    stored = list((tmp_path / "results").glob("*/*.json"))
    if after_repeats == 0:
        assert not stored  # nothing had finished: nothing to keep
        return
    (path,) = stored
    result = json.loads(path.read_text())
    statuses = [r["status"] for r in result["repeats"]]  # finished ones, then the rest marked
    assert statuses[0] == "ok" and statuses[-1] == "interrupted", statuses
    assert statuses == sorted(statuses, key=lambda st: st != "ok") and len(statuses) == 3
    assert result["status"] == "partial"


def test_signals_a_job_was_started_to_ignore_stay_ignored(tmp_path):
    """`nohup dlperf sweep ... &`: the terminal closing (SIGHUP) and Ctrl-C meant for the
    foreground (SIGINT) pass the job by, as nohup and the shell asked; it runs to the end."""
    import signal

    proc, _ = _start_slow_run(tmp_path, 1, ignored=("SIGHUP", "SIGINT"))
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "interrupted" not in stderr
    (path,) = (tmp_path / "results").glob("*/*.json")
    result = json.loads(path.read_text())
    assert [r["status"] for r in result["repeats"]] == ["ok"] * 3


def test_kill_9_of_dlperf_still_ends_its_workload(tmp_path):
    """kill -9 gives dlperf no chance to clean up: the guard process ends the workload."""
    import signal

    proc, processes = _start_slow_run(tmp_path, 1)
    workload = [p for p in processes if "dlperf._guard" not in " ".join(p.cmdline())]
    assert len(workload) < len(processes), "no guard process was started"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not _all_end(processes)


def test_report_flags_more_than_linear_scaling_on_the_console(tmp_path):
    from test_report import sample_results

    from dlperf.store import ResultStore

    for result in sample_results():  # pytorch cpu 2x1 runs at 128 % of its 1x1
        ResultStore(tmp_path / "results").write(result)
    out = dlperf("report", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    suspect = "pytorch-resnet50-train-fp32-cpu-2x1-b128-i224 [channels_last=1, fused_optimizer=1]"
    assert f"suspect: {suspect} scales at 128.4%" in " ".join(out.stdout.split())
    assert "(suspect)" in (tmp_path / "reports" / "resnet50.md").read_text()


def test_doctor_says_how_and_when_the_cpu_peak_was_measured(tmp_path):
    import os

    env = {**os.environ, "DLPERF_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "dlperf", "doctor"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "measured fp32 GEMM peak" in text and "when: 20" in text
    assert "of the CPUs meanwhile" in text
    peak = json.loads(
        subprocess.run(
            [sys.executable, "-m", "dlperf", "doctor", "--json"],
            capture_output=True, text=True, env=env,
        ).stdout
    )["cpu_peak"]  # fmt: skip
    assert {"measured", "other_share", "under_load", "source"} <= set(peak)
    # cached only when measured on an idle machine
    assert (tmp_path / "machine.json").exists() != peak["under_load"]


def test_text_from_paths_workloads_and_hosts_is_printed_as_text(tmp_path):
    """Brackets are rich markup: a path, a message or a host holding them must print as is."""
    results = "r[/dev/nvidia0]"
    out = dlperf(
        "run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=5",
        "--results-dir", results, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "[/dev/nvidia0]" in " ".join(out.stdout.split())
    dry = dlperf(
        "run", "calibration", "pace", "--nodes", "2", "--launcher", "ssh",
        "--hosts", "[fe80::1],[bold]x[/bold]", "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "([fe80::1])" in dry.stdout and "[bold]x[/bold]" in dry.stdout
    bad = dlperf("run", "calibration", "pace", "--nodes", "2", "--launcher", "ssh",
                 "--hosts", "gpu0,-oProxyCommand=touch_x", "--dry-run", cwd=tmp_path)  # fmt: skip
    assert bad.returncode == 1 and "is not a host name" in bad.stderr
    missing = dlperf("run", "calibration", "pace", "--python", "/no/[/such]", cwd=tmp_path)
    assert missing.returncode == 1 and "/no/[/such] does not exist" in missing.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "calibration", "pace", "--timeout", "inf"], "--timeout inf is not a finite"),
        (["run", "calibration", "pace", "--no-output-timeout", "nan"],
         "--no-output-timeout nan is not a finite"),
        (["run", "pytorch", "resnet50", "--mode", "infer", "--scenario", "offline",
          "--target-qps", "nan"], "must be finite numbers > 0"),
        (["run", "pytorch", "resnet50", "--mode", "infer", "--scenario", "offline",
          "--target-qps", "-1"], "must be finite numbers > 0"),
        (["compare", ".", ".", "--threshold", "nan"], "must be a fraction in [0, 1)"),
    ],
)  # fmt: skip
def test_non_finite_and_out_of_range_numbers_are_refused(tmp_path, args, message):
    out = dlperf(*args, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert message in " ".join(out.stderr.split())
    assert not (tmp_path / "results").exists()


def test_an_unloadable_result_file_is_skipped_with_a_warning_naming_it(tmp_path):
    ok = dlperf("run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=5",
                cwd=tmp_path)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    (folder,) = (tmp_path / "results").iterdir()
    (folder / "broken.json").write_text("{not json")
    (folder / "latin1.json").write_bytes(b'{"x": "\xe9"}')
    (folder / "list.json").write_text("[1, 2]")
    out = dlperf("report", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stderr.split())
    for name in ("broken.json", "latin1.json", "list.json"):
        assert f"warning: skipped {(folder / name).relative_to(tmp_path)}" in text
    assert "2000.0" in (tmp_path / "reports" / "pace.md").read_text()  # batch 10 / 5 ms


def test_env_remove_asks_first_and_removes_only_with_yes(tmp_path):
    import os

    env = {**os.environ, "DLPERF_HOME": str(tmp_path)}
    victim = tmp_path / "envs" / "tiny-cpu-py3.11-0123456789ab"
    victim.mkdir(parents=True)

    def remove(*extra):
        return subprocess.run(
            [sys.executable, "-m", "dlperf", "env", "remove", "tiny", *extra],
            capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    out = remove()  # as when `dlperf env list | dlperf env remove tiny` is pasted
    assert out.returncode == 1 and "add --yes" in out.stderr and victim.exists()
    out = remove("--yes")
    assert out.returncode == 0 and not victim.exists()


CANNED_CHECKS = """\
import dlperf.checks as checks
from dlperf.adapters import adapter_names, get_adapter
from dlperf.models import MODELS


def canned(frameworks=None, models=None, log=None):
    out = []
    for name in adapter_names():
        for model in get_adapter(name).models:
            params = MODELS[model].params
            if params:
                shape = "image 224" if "resnet" in model else "seq 128"
                flops = 1234.5678e9 if name == "jax" else 12.271e9
                out.append(checks.ModelCheck(name, model, shape, params, params, flops, 12.271e9))
    out.append(checks.ModelCheck("tensorflow", "resnet50", "image 224", None, 25557032, None,
                                 error="--describe failed (timeout, exit -9): " + "x" * 150))
    return out


checks.check_models = canned
"""


def test_check_models_keeps_every_number_whole_at_80_columns(tmp_path, monkeypatch):
    """`dlperf check-models` in a real 80-column terminal, its checks canned (every framework's
    catalog models, as the real command lists them; no framework runs): every parameter count
    whole in the table, nothing cut with "…", each line within 80 columns, a failed check's
    reason below the table."""
    from test_terminal import in_terminal

    from dlperf.models import MODELS

    (tmp_path / "sitecustomize.py").write_text(CANNED_CHECKS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    code, shown = in_terminal("check-models", cwd=tmp_path, columns=80)
    assert code == 2, shown  # the failed check
    assert "…" not in shown, shown
    assert all(len(line.rstrip()) <= 80 for line in shown.splitlines()), shown
    table = shown.split("MISMATCH tensorflow resnet50:")[0]
    for model in ("resnet50", "bert", "gpt2-xl", "dlrm"):
        assert f" {MODELS[model].params:,} " in table, model
    assert "1234.568" in table  # FLOPs per sample, whole
    assert "MISMATCH tensorflow resnet50: --describe failed (timeout, exit -9):" in shown


ROOT = Path(__file__).resolve().parents[1]
REAL = Path(__file__).parent / "data" / "real_results"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not run from a git checkout")
def test_the_first_hour_changes_only_the_reports(tmp_path):
    """Issue 32, point 2: a fresh clone, a calibration run and stored results (no framework
    runs), then the README's first-hour commands with their default paths. Results folders
    and the site are the user's, ignored by the clone's .gitignore; the one change `git status`
    shows is reports/, the repository's committed record that `dlperf report` regenerates
    (the design: commit it, or write elsewhere with --out)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    shutil.copytree(REAL, clone / "results")
    shutil.copytree(REAL, clone / "results-b")  # a second folder, for compare
    env = {**os.environ, "DLPERF_HOME": str(tmp_path / "home")}
    for args in (
        ["run", "calibration", "pace", "--preset", "smoke", "--set", "step_ms=1", "--measure",
         "5", "--repeats", "1"],
        ["report"],
        ["report", "--style", "fambench"],
        ["publish", "--out", "site/"],
        ["export", "--format", "csv"],
    ):  # fmt: skip
        out = subprocess.run([sys.executable, "-m", "dlperf", *args], cwd=clone, env=env,
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 0, (args, out.stderr)
    assert (clone / "reports" / "resnet50.md").exists() and (clone / "site" / "index.html").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=clone, capture_output=True, text=True, check=True)  # fmt: skip
    changed = [line[3:] for line in status.stdout.splitlines()]
    assert changed, "the report rewrote nothing: the check compared nothing"
    assert all(path.startswith("reports/") for path in changed), status.stdout


def test_run_says_whose_each_setting_is(cli, monkeypatch):
    """Issue 32, point 8: a --set of a best-practice key is the user's ablation, said beside
    the framework's default; the settings the user left alone are the best practice."""
    from dlperf import DlperfError

    def stop(*args, **kwargs):
        raise DlperfError("stopped before the run (test)")

    monkeypatch.setattr("dlperf.runner.run_benchmark", stop)
    sets = ["--set", "channels_last=1", "--set", "seed=3", "--set", "fused_optimizer=1"]
    code, text = cli("run", "pytorch", "resnet50", "--preset", "smoke", *sets)
    assert code == 1 and "stopped before the run (test)" in text, text
    assert (
        "settings: channels_last=1 (yours; default 0), fused_optimizer=1 (yours; also the "
        "default), seed=3 (yours)" in text
    ), text
    code, text = cli("run", "pytorch", "resnet50", "--preset", "smoke")
    assert "settings: channels_last=0 (best practice), fused_optimizer=1 (best practice)" in text
    assert "yours" not in text
