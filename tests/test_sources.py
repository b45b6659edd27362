"""Official implementations end to end against a stand-in upstream that the test creates.

The stand-in is a real git repository holding a stdlib training script that paces its steps and
prints Keras `TimeHistory` lines, like tensorflow/models does; the "network" URL is unreachable,
so fetching must fail fast and `--sources-dir` must work offline.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf import DlperfError
from dlperf.logformats import FORMATS
from dlperf.official.checkout import MARKER, checkout_dir, fetch_source, verify_checkout
from dlperf.official.manifest import find_manifest, load_manifests
from dlperf.runner import run_benchmark
from dlperf.schema import ResultStatus
from dlperf.spec import OfficialOptions, check_run, resolve_spec

TRAIN_PY = '''\
"""Stand-in upstream trainer: paced steps, Keras TimeHistory log lines."""
import argparse
import os
import time

p = argparse.ArgumentParser()
p.add_argument("--batch_size", type=int, default=32)
p.add_argument("--log_steps", type=int, default=5)
p.add_argument("--step_ms", type=float, default=10.0)
p.add_argument("--model_dir", default="model")
p.add_argument("--worker_hosts", default="")
p.add_argument("--task_index", type=int, default=0)
a = p.parse_args()
STEPS = 10000  # upstream trains for a fixed, long schedule
last = done = time.monotonic()
for step in range(1, STEPS + 1):
    # each step at least step_ms after the last one (never catching up after a delay), so no
    # stretch of steps beats batch_size * 1000 / step_ms samples/s, however busy the machine
    while time.monotonic() < done + a.step_ms / 1000:
        pass
    done = time.monotonic()
    if step % a.log_steps == 0:
        now = time.monotonic()
        rate = a.batch_size * a.log_steps / (now - last)
        print(f"I1231 23:59:59.000000 1 keras_utils.py:133] TimeHistory: {now - last:.2f} "
              f"seconds, {rate:.2f} examples/second between steps {step - a.log_steps} and "
              f"{step}", flush=True)
        last = now
os.makedirs(a.model_dir, exist_ok=True)
with open(os.path.join(a.model_dir, "checkpoint"), "w") as f:
    f.write(str(STEPS))
'''

PATCHED_TRAIN_PY = TRAIN_PY.replace(
    "a = p.parse_args()\nSTEPS = 10000  # upstream trains for a fixed, long schedule\n",
    'p.add_argument("--train_steps", type=int, default=10000)\na = p.parse_args()\n'
    "STEPS = a.train_steps\n",
)

BAD_PATCH = """\
diff --git a/train.py b/train.py
--- a/train.py
+++ b/train.py
@@ -1,3 +1,3 @@
-this line is not in the file
+nor is this one
 import argparse
 import time
"""

MANIFEST = """\
name = "standin-pace"
profile = "current"
framework = "calibration"
model = "pace"
default = true
title = "stand-in upstream trainer (test)"
log_format = "keras_time_history"

[upstream]
name = "standin"
url = "https://example.invalid/standin.git"
commit = "{commit}"

[window]
log_every = 5
skip = 10
measure = 20

[environment]
kind = "pip"
python = "{python}"
requirements = []
device = "cpu"

[command]
cwd = "."
argv = ["{{python}}", "train.py", "--step_ms", "10", "--model_dir={{out_dir}}/model"]

[args]
batch_size = ["--batch_size={{global_batch}}"]
steps = ["--train_steps={{steps}}"]
multi_node = ["--worker_hosts={{node_ips}}", "--task_index={{node_rank}}"]

[unsupported]
xla = "the stand-in has no compiler"
"""


def checkout_dir_of(upstream) -> Path:
    return checkout_dir(find_manifest("calibration", "pace").upstream)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path | str]:
    repo = tmp_path / "standin-clone"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    (repo / "train.py").write_text(TRAIN_PY)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v1", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    manifests = tmp_path / "third_party_scripts"
    manifests.mkdir()
    python = ".".join(platform.python_version_tuple()[:2])
    (manifests / "standin-pace.toml").write_text(MANIFEST.format(commit=commit, python=python))
    patches = tmp_path / "patches" / "standin"
    patches.mkdir(parents=True)
    # Our tracked patch: a step limit, which the stand-in upstream lacks.
    (repo / "train.py").write_text(PATCHED_TRAIN_PY)
    (patches / "0001-add-train-steps.patch").write_text(git("diff", cwd=repo) + "\n")
    git("checkout", "train.py", cwd=repo)
    monkeypatch.setenv("DLPERF_MANIFESTS", str(manifests))
    monkeypatch.setenv("DLPERF_PATCHES", str(tmp_path / "patches"))
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    return {"repo": repo, "commit": commit, "patches": patches, "tmp": tmp_path}


def test_offline_fetch_fails_fast_and_names_the_way_out(upstream) -> None:
    manifest = find_manifest("calibration", "pace")
    with pytest.raises(DlperfError, match="--sources-dir PATH") as exc:
        fetch_source(manifest.upstream)
    assert "example.invalid" in str(exc.value)
    assert not checkout_dir(manifest.upstream).exists()


def test_fetch_pins_the_commit_applies_patches_and_verify_catches_drift(upstream) -> None:
    manifest = find_manifest("calibration", "pace")
    # The clone moves on after the pinned commit: the checkout must still be the pin.
    (upstream["repo"] / "train.py").write_text(TRAIN_PY + "# later upstream change\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "v2", cwd=upstream["repo"])
    path = fetch_source(manifest.upstream, sources_dir=upstream["repo"])
    assert git("rev-parse", "HEAD", cwd=path) == upstream["commit"]
    text = (path / "train.py").read_text()
    assert "--train_steps" in text and "later upstream change" not in text
    marker = json.loads((path / MARKER).read_text())
    assert marker["commit"] == upstream["commit"]
    assert list(marker["patches"]) == ["0001-add-train-steps.patch"]
    verify_checkout(manifest.upstream, path)

    (path / "train.py").write_text(text + "# a local edit\n")
    with pytest.raises(DlperfError, match=r"differs from \w{12} \+ its patches in train.py"):
        verify_checkout(manifest.upstream, path)
    (path / "train.py").write_text(text)
    (path / "stray.py").write_text("")
    with pytest.raises(DlperfError, match="patches in stray.py"):
        verify_checkout(manifest.upstream, path)
    path2 = fetch_source(manifest.upstream, sources_dir=upstream["repo"])  # repairs the cache
    assert path2 == path and not (path / "stray.py").exists()
    verify_checkout(manifest.upstream, path)

    # A patch edited after the fetch makes the checkout stale.
    patch = upstream["patches"] / "0001-add-train-steps.patch"
    patch.write_text(patch.read_text().replace("default=10000", "default=9999"))
    with pytest.raises(DlperfError, match="refetch"):
        verify_checkout(manifest.upstream, path)


def test_a_patch_that_does_not_apply_is_refused_and_nothing_is_left(upstream) -> None:
    manifest = find_manifest("calibration", "pace")
    (upstream["patches"] / "0002-stale.patch").write_text(BAD_PATCH)
    with pytest.raises(DlperfError, match="0002-stale.patch does not apply") as exc:
        fetch_source(manifest.upstream, sources_dir=upstream["repo"])
    assert "nothing was applied" in str(exc.value)
    assert not checkout_dir(manifest.upstream).exists()
    assert not list(checkout_dir(manifest.upstream).parent.glob("*.partial"))


def test_a_commit_missing_from_the_clone_is_named(upstream, tmp_path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", cwd=other)
    (other / "x").write_text("x")
    git("add", ".", cwd=other)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=other)
    manifest = find_manifest("calibration", "pace")
    with pytest.raises(DlperfError, match=f"does not contain commit {upstream['commit']}"):
        fetch_source(manifest.upstream, sources_dir=other)


def test_manifest_validation(upstream) -> None:
    manifests = Path(os.environ["DLPERF_MANIFESTS"])
    good = (manifests / "standin-pace.toml").read_text()
    (manifests / "standin-pace.toml").write_text(good.replace('commit = "', 'commit = "abc'))
    with pytest.raises(DlperfError, match="full 40-hex"):
        load_manifests()
    (manifests / "standin-pace.toml").write_text(good.replace("{node_rank}", "{rank}"))
    with pytest.raises(DlperfError, match=r"unknown placeholder\(s\) rank"):
        load_manifests()
    (manifests / "standin-pace.toml").write_text(good)
    (manifests / "second.toml").write_text(good.replace('"standin-pace"', '"second"'))
    with pytest.raises(DlperfError, match="several default current manifests"):
        load_manifests()


def test_a_manifest_naming_an_unknown_log_format_is_refused_at_validation(upstream) -> None:
    """Refused when the manifests are read, not when a log is parsed: the formats named are
    the parsers' own (`logformats.FORMATS`)."""
    manifests = Path(os.environ["DLPERF_MANIFESTS"])
    good = (manifests / "standin-pace.toml").read_text()
    for name in ("dllogger_jax", "no_such_format"):
        (manifests / "standin-pace.toml").write_text(
            good.replace('log_format = "keras_time_history"', f'log_format = "{name}"')
        )
        with pytest.raises(DlperfError, match=f"unknown log_format '{name}'") as caught:
            load_manifests()
        assert f"known: {', '.join(sorted(FORMATS))}" in str(caught.value)


def test_per_node_commands_are_derived_not_hand_edited(upstream) -> None:
    from dlperf.official.adapter import OfficialAdapter

    manifest = find_manifest("calibration", "pace")
    spec = resolve_spec(
        "calibration",
        "pace",
        overrides={"impl": "official", "nodes": 2, "devices_per_node": 4, "batch_size": 8},
    )
    assert (spec.source, spec.skip, spec.measure) == ("standin-pace", 10, 20)
    adapter = OfficialAdapter(manifest, Path("/src"), out_dir=Path("out"))
    plan = adapter.plan(spec, "/env/bin/python", ["10.0.0.1", "10.0.0.2"])
    assert [n.node_rank for n in plan.nodes] == [0, 1]
    for node in plan.nodes:
        assert node.argv == (
            "/env/bin/python", "train.py", "--step_ms", "10", "--model_dir=out/model",
            "--batch_size=64", "--train_steps=30",
            "--worker_hosts=10.0.0.1,10.0.0.2", f"--task_index={node.node_rank}",
        )  # fmt: skip
        assert node.cwd == "/src"
    assert plan.knobs == ("batch_size", "steps", "multi_node")
    with pytest.raises(DlperfError, match="needs the nodes' addresses"):
        OfficialAdapter(manifest, Path("/src")).plan(spec, "python")
    xla = spec.model_copy(update={"xla": True})
    with pytest.raises(DlperfError, match="cannot run with --xla: the stand-in has no compiler"):
        adapter.plan(xla, "python", ["10.0.0.1", "10.0.0.2"])


def test_dry_run_prints_every_node(upstream) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dlperf", "run", "calibration", "pace", "--impl", "official",
         "--nodes", "2", "--devices-per-node", "1", "--batch-size", "4",
         "--hosts", "a.example,b.example", "--dry-run"],
        capture_output=True, text=True, env=os.environ.copy(),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "node 0 (a.example)" in out.stdout and "node 1 (b.example)" in out.stdout
    assert "--task_index=0" in out.stdout and "--task_index=1" in out.stdout
    assert "not fetched yet" in out.stdout


@pytest.mark.multiprocess
def test_official_run_end_to_end(upstream) -> None:
    spec = resolve_spec(
        "calibration", "pace", overrides={"impl": "official", "batch_size": 10, "repeats": 2}
    )
    opts = OfficialOptions(sources_dir=upstream["repo"])
    result, path = run_benchmark(check_run(spec, official=opts), upstream["tmp"] / "results")
    assert result.status.value == "ok", result.warnings
    # The window is the marks at steps 10 and 30: 20 steps of 10 samples, over the marks' own
    # time. The stand-in spends at least 10 ms on each step, so it can never beat 1000
    # samples/s; a busy machine only makes it slower.
    for r in result.repeats:
        assert (r.window.start_step, r.window.end_step) == (10, 30)
        assert r.window.samples == 200
        assert r.throughput == pytest.approx(r.window.samples / r.window.elapsed_s)
        assert r.throughput <= 1000 * 1.01
        assert "train.py" in r.command and "--train_steps=30" in r.command
    patch = upstream["patches"] / "0001-add-train-steps.patch"
    import hashlib

    assert result.source.commit == upstream["commit"]
    assert result.source.url == "https://example.invalid/standin.git"
    assert result.source.patches == {
        "0001-add-train-steps.patch": hashlib.sha256(patch.read_bytes()).hexdigest()
    }
    assert result.spec.source == "standin-pace" and result.origin == "run"
    assert json.loads(path.read_text())["source"]["commit"] == upstream["commit"]
    # Upstream's outputs land beside the raw logs; the checkout stays exactly as verified.
    raw = Path(result.repeats[0].log_path).parent
    assert (raw / "upstream-output" / "model" / "checkpoint").read_text() == "30"
    verify_checkout(find_manifest("calibration", "pace").upstream, checkout_dir_of(upstream))


@pytest.mark.multiprocess
def test_official_run_on_two_simulated_nodes(upstream) -> None:
    spec = resolve_spec(
        "calibration", "pace",
        overrides={"impl": "official", "batch_size": 10, "repeats": 1, "nodes": 2},
    )  # fmt: skip
    opts = OfficialOptions(sources_dir=upstream["repo"])
    result, _ = run_benchmark(check_run(spec, official=opts), upstream["tmp"] / "results")
    assert result.status == ResultStatus.ok, result.warnings
    (r,) = result.repeats
    assert result.job.global_batch == 20 and result.job.hosts == ["127.0.0.1"] * 2
    raw = Path(r.log_path).parent
    # The job's throughput is node 0's own TimeHistory lines over the window (each line: the
    # global batch x its steps over the time its rate gives): checked against those lines,
    # not the wall clock. The stand-in never beats 2 nodes x 10 samples every 10 ms.
    lines = re.findall(
        r"([\d.]+) examples/second between steps (\d+) and (\d+)",
        (raw / "repeat-1.node0.log").read_text(),
    )
    window = [(float(rate), int(a), int(b)) for rate, a, b in lines
              if r.window.start_step <= int(a) and int(b) <= r.window.end_step]  # fmt: skip
    samples = sum((b - a) * 20 for _, a, b in window)
    assert samples == r.window.samples
    assert r.throughput == pytest.approx(
        samples / sum((b - a) * 20 / rate for rate, a, b in window), rel=1e-6
    )
    assert r.throughput <= 2000 * 1.01
    for n in (0, 1):
        log = (raw / f"repeat-1.node{n}.log").read_text()
        assert "between steps 25 and 30" in log
    assert "--task_index=0" in r.command and "--worker_hosts=127.0.0.1,127.0.0.1" in r.command


def test_sources_verify_and_list_commands(upstream) -> None:
    def dlperf(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dlperf", *args], capture_output=True,
                              text=True, env={**os.environ, "COLUMNS": "200"})  # fmt: skip

    out = dlperf("sources", "verify")
    assert out.returncode == 1 and "standin-pace: not fetched" in out.stdout
    path = fetch_source(find_manifest("calibration", "pace").upstream,
                        sources_dir=upstream["repo"])  # fmt: skip
    out = dlperf("sources", "verify")
    assert out.returncode == 0 and f"standin-pace: ok {upstream['commit'][:12]}" in out.stdout
    listed = dlperf("sources", "list").stdout
    assert "profile current\n  standin-pace *  calibration pace  ready" in listed
    assert "standin-pace" not in dlperf("sources", "list", "--profile", "dlperf-2020").stdout
    (path / "stray.py").write_text("")
    out = dlperf("sources", "verify")
    assert out.returncode == 1 and "standin-pace: bad" in out.stdout and "stray.py" in out.stdout


# ------------------------------------------- an upstream pinned by its release archive


def make_tarball(path: Path, files: dict[str, str]) -> str:
    """A .tar.gz of `files` (member name -> text); returns its sha256."""
    import hashlib
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def served(tmp_path: Path):
    """A local stand-in for the package index: an HTTP server for the files in a folder."""
    import functools
    import http.server
    import threading

    folder = tmp_path / "index"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def archive_upstream(upstream, served) -> dict:
    """The stand-in upstream published as a release archive (one top folder, as sdists are)
    on the local index, and the manifest pinned to it by sha256 instead of a commit."""
    folder, base = served
    tarball = folder / "standin-1.0.tar.gz"
    sha = make_tarball(tarball, {"standin-1.0/train.py": TRAIN_PY, "standin-1.0/PKG-INFO": "x"})
    manifests = Path(os.environ["DLPERF_MANIFESTS"])
    text = (manifests / "standin-pace.toml").read_text()
    pin = f'archive = "{base}/standin-1.0.tar.gz"\nsha256 = "{sha}"'
    (manifests / "standin-pace.toml").write_text(
        text.replace(f'commit = "{upstream["commit"]}"', pin)
    )
    return {**upstream, "tarball": tarball, "sha256": sha, "url": f"{base}/standin-1.0.tar.gz"}


def test_an_archive_upstream_is_downloaded_checked_unpacked_patched_and_verified(
    archive_upstream,
) -> None:
    up = find_manifest("calibration", "pace").upstream
    assert up.revision == f"sha256:{archive_upstream['sha256']}"
    path = fetch_source(up)
    assert path.name == f"standin-sha256-{archive_upstream['sha256'][:12]}"
    assert "--train_steps" in (path / "train.py").read_text()  # unpacked below the top folder
    assert (path / "PKG-INFO").read_text() == "x"
    marker = json.loads((path / MARKER).read_text())
    assert marker["commit"] == up.revision and marker["url"] == archive_upstream["url"]
    verify_checkout(up, path)
    # The files are recorded as published: the same archive gives the same commit every time.
    head = git("rev-parse", "HEAD", cwd=path)
    assert fetch_source(up, refetch=True) == path and git("rev-parse", "HEAD", cwd=path) == head
    assert git("show", "HEAD:train.py", cwd=path) == TRAIN_PY.rstrip("\n")

    (path / "train.py").write_text("# a local edit\n")
    with pytest.raises(DlperfError, match=r"differs from sha256:\w{12} \+ its patches in train"):
        verify_checkout(up, path)
    fetch_source(up)  # repairs the cache
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x", cwd=path)
    with pytest.raises(DlperfError, match="not the commit it was fetched at"):
        verify_checkout(up, path)


def test_an_archive_that_is_not_the_pinned_release_is_refused(archive_upstream) -> None:
    make_tarball(archive_upstream["tarball"], {"standin-1.0/train.py": TRAIN_PY + "# changed\n"})
    up = find_manifest("calibration", "pace").upstream
    with pytest.raises(DlperfError, match="not the release it names, so nothing was unpacked"):
        fetch_source(up)
    assert not checkout_dir(up).exists()
    assert not list(checkout_dir(up).parent.glob("*.partial"))


def test_an_archive_upstream_offline_and_from_sources_dir(archive_upstream, tmp_path) -> None:
    manifests = Path(os.environ["DLPERF_MANIFESTS"])
    text = (manifests / "standin-pace.toml").read_text()
    port = archive_upstream["url"].split(":")[2].split("/")[0]
    (manifests / "standin-pace.toml").write_text(text.replace(f":{port}/", ":9/"))  # discard
    up = find_manifest("calibration", "pace").upstream
    with pytest.raises(DlperfError, match=r"(?s)cannot download .*offline.*--sources-dir FOLDER"):
        fetch_source(up)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DlperfError, match="holds no standin-1.0.tar.gz"):
        fetch_source(up, sources_dir=empty)
    path = fetch_source(up, sources_dir=archive_upstream["tarball"].parent)
    verify_checkout(up, path)


def test_an_archive_member_leaving_the_tree_is_refused(archive_upstream) -> None:
    sha = make_tarball(archive_upstream["tarball"], {"../evil.py": "x", "standin-1.0/a": "a"})
    manifests = Path(os.environ["DLPERF_MANIFESTS"])
    text = (manifests / "standin-pace.toml").read_text()
    (manifests / "standin-pace.toml").write_text(text.replace(archive_upstream["sha256"], sha))
    up = find_manifest("calibration", "pace").upstream
    with pytest.raises(DlperfError, match="cannot unpack"):
        fetch_source(up)
    assert not (archive_upstream["tmp"] / "evil.py").exists()
    assert not checkout_dir(up).exists()


def pin_archive(archive_upstream, data: bytes) -> str:
    """Publish `data` as the release archive and pin the manifest to its sha256."""
    import hashlib

    archive_upstream["tarball"].write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    manifest = Path(os.environ["DLPERF_MANIFESTS"]) / "standin-pace.toml"
    text = manifest.read_text()
    manifest.write_text(
        text.replace(archive_upstream.get("pinned", archive_upstream["sha256"]), sha)
    )
    archive_upstream["pinned"] = sha
    return sha


def sources_fetch(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI (its exit code and what it prints), in the fixture's environment."""
    return subprocess.run([sys.executable, "-m", "dlperf", "sources", "fetch"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def tar_gz(members: list[tuple[str, bytes | None]]) -> bytes:
    """A .tar.gz of (name, bytes) files and (name, None) folders."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.multiprocess
def test_an_empty_or_truncated_archive_is_refused_with_the_reason(archive_upstream) -> None:
    tmp = archive_upstream["tmp"]
    whole = tar_gz([("standin-1.0/train.py", TRAIN_PY.encode() * 50)])
    cases = {
        "holds no files": tar_gz([]),  # a valid archive of nothing
        "is an empty file": b"",  # no archive at all
        "cannot unpack .*(ended before|EOF)": whole[: len(whole) // 2],  # its sha256 matches
    }
    for reason, data in cases.items():
        pin_archive(archive_upstream, data)
        out = sources_fetch(tmp)
        assert out.returncode == 1, out.stderr  # not 130: nobody interrupted anything
        assert re.search(reason, out.stderr.replace("\n", " ")), out.stderr
        assert "Traceback" not in out.stderr and "interrupted" not in out.stderr
        up = find_manifest("calibration", "pace").upstream
        assert not checkout_dir(up).exists()
        assert not list(checkout_dir(up).parent.glob("*.partial"))


def test_an_archive_unpacking_past_the_limit_is_refused_before_writing(archive_upstream) -> None:
    import gzip
    import tarfile

    from dlperf.official.manifest import UNPACKED_MAX_BYTES

    # 2 GiB of zeros in 1.4 MB: gzip members one after another are one stream to a reader.
    size = 2 * 2**30
    header = tarfile.TarInfo("standin-1.0/zeros")
    header.size, header.mode = size, 0o644
    block = gzip.compress(b"\0" * (16 << 20), compresslevel=9)
    bomb = (
        gzip.compress(header.tobuf()) + block * (size // (16 << 20)) + gzip.compress(b"\0" * 1024)
    )
    assert len(bomb) < 10 * 2**20 and size > UNPACKED_MAX_BYTES
    pin_archive(archive_upstream, bomb)
    up = find_manifest("calibration", "pace").upstream
    with pytest.raises(DlperfError, match=r"unpacks to more than 1,024 MiB"):
        fetch_source(up)
    assert not checkout_dir(up).exists()


def test_an_archive_larger_than_the_limit_stops_downloading(archive_upstream, monkeypatch):
    import dlperf.official.checkout as checkout

    pin_archive(archive_upstream, tar_gz([("standin-1.0/train.py", os.urandom(64 << 10))]))
    monkeypatch.setattr(checkout, "ARCHIVE_MAX_BYTES", 32 << 10)  # a limit the file passes
    up = find_manifest("calibration", "pace").upstream
    with pytest.raises(DlperfError, match=r"larger than 0 MiB .*ARCHIVE_MAX_BYTES"):
        fetch_source(up)
    with pytest.raises(DlperfError, match=r"larger than 0 MiB"):
        fetch_source(up, sources_dir=archive_upstream["tarball"].parent)


@pytest.mark.parametrize("git", ["folder", "file"])
def test_an_archive_holding_a_git_repository_is_refused(archive_upstream, git) -> None:
    # git add skips a nested repository's files: they would escape `sources verify`.
    nested = [("standin-1.0/vendor/lib/.git", None), ("standin-1.0/vendor/lib/.git/HEAD",
              b"ref: refs/heads/main\n")] if git == "folder" else [
              ("standin-1.0/vendor/lib/.git", b"gitdir: /elsewhere\n")]  # fmt: skip
    files = [("standin-1.0/train.py", TRAIN_PY.encode()), ("standin-1.0/vendor/lib/x.py", b"")]
    pin_archive(archive_upstream, tar_gz(files + nested))
    up = find_manifest("calibration", "pace").upstream
    with pytest.raises(DlperfError, match=r"holds a git repository \(standin-1.0/vendor/lib/.git"):
        fetch_source(up)
    assert not checkout_dir(up).exists()


def test_an_upstream_has_one_pin(upstream) -> None:
    manifests = Path(os.environ["DLPERF_MANIFESTS"])
    good = (manifests / "standin-pace.toml").read_text()
    commit = f'commit = "{upstream["commit"]}"'
    cases = {
        "set either commit": good.replace(commit, f'{commit}\narchive = "https://x/a.tar.gz"'),
        "archive needs its sha256": good.replace(commit, 'archive = "https://x/a.tar.gz"'),
        "must be a .tar.gz": good.replace(
            commit, f'archive = "https://x/a.zip"\nsha256 = "{"a" * 64}"'
        ),  # noqa: E501
        "sha256 pins an archive": good.replace(commit, f'{commit}\nsha256 = "{"a" * 64}"'),
    }
    for message, text in cases.items():
        (manifests / "standin-pace.toml").write_text(text)
        with pytest.raises(DlperfError, match=message):
            load_manifests()


@pytest.mark.multiprocess
def test_an_official_run_records_the_archive_as_its_source(archive_upstream) -> None:
    spec = resolve_spec(
        "calibration", "pace", overrides={"impl": "official", "batch_size": 10, "repeats": 1}
    )
    result, _ = run_benchmark(check_run(spec), archive_upstream["tmp"] / "results")
    assert result.status == ResultStatus.ok, result.warnings
    assert result.source.commit == f"sha256:{archive_upstream['sha256']}"
    assert result.source.url == archive_upstream["url"]
    assert list(result.source.patches) == ["0001-add-train-steps.patch"]
    from dlperf.report._data import source_label

    assert source_label(result) == f"standin-pace @ sha256:{archive_upstream['sha256'][:12]}"
