"""Official upstream implementations' pinned checkouts and tracked patches.

`fetch_source` clones a manifest's upstream into a cache at exactly its commit (or unpacks its
release archive after checking the archive's sha256, and commits the files as they are, so the
same git checks hold) and applies the patches in `patches/<upstream>/` with `git apply`; a
marker written last records what the checkout is, and `verify_checkout` checks it again before
every use. Results carry the upstream URL, commit (or archive digest) and each patch's sha256
(`SourceInfo`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dlperf import DlperfError
from dlperf.files import atomic_write_json, dlperf_home
from dlperf.official.manifest import (
    ARCHIVE_MAX_BYTES,
    UNPACKED_MAX_BYTES,
    UNPACKED_MAX_MEMBERS,
    Manifest,
    Upstream,
    patches_root,
)
from dlperf.redact import redact_value
from dlperf.schema import SourceInfo

MARKER = ".dlperf-source.json"
GIT_TIMEOUT_S = 60.0
DOWNLOAD_TIMEOUT_S = 120.0
CHUNK_BYTES = 1 << 20
# The identity and date of the commit an archive's files are recorded in: fixed, so the same
# archive always gives the same commit.
_IMPORT_ENV = {
    "GIT_AUTHOR_NAME": "dlperf", "GIT_AUTHOR_EMAIL": "dlperf@localhost",
    "GIT_COMMITTER_NAME": "dlperf", "GIT_COMMITTER_EMAIL": "dlperf@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}  # fmt: skip


def sources_root() -> Path:
    return dlperf_home() / "sources"


@dataclass(frozen=True)
class Patch:
    path: Path
    sha256: str

    @property
    def name(self) -> str:
        return self.path.name


def upstream_patches(upstream: Upstream, root: Path | None = None) -> list[Patch]:
    folder = (root or patches_root()) / upstream.name
    return [
        Patch(p, hashlib.sha256(p.read_bytes()).hexdigest()) for p in sorted(folder.glob("*.patch"))
    ]


def checkout_dir(upstream: Upstream) -> Path:
    return sources_root() / f"{upstream.name}-{upstream.short.replace(':', '-')}"


def _git(
    args: list[str],
    cwd: Path | None = None,
    timeout: float = GIT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", **(env or {})}
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise DlperfError("git is not installed; install it (apt install git)") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(args, f"no answer within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise GitError(args, (proc.stderr or proc.stdout).strip())
    return proc.stdout.strip()


class GitError(DlperfError):
    def __init__(self, args: list[str], detail: str) -> None:
        self.detail = detail
        super().__init__(f"git {' '.join(args)} failed: {detail}")


def source_info(upstream: Upstream, patches: list[Patch], profile: str) -> SourceInfo:
    return SourceInfo(
        name=upstream.name,
        url=redact_value(upstream.archive or upstream.url),  # a token in a URL is not stored
        commit=upstream.revision,
        patches={p.name: p.sha256 for p in patches},
        profile=profile,
    )


def fetch_source(
    upstream: Upstream,
    *,
    sources_dir: Path | None = None,
    refetch: bool = False,
    patches_dir: Path | None = None,
) -> Path:
    """A verified checkout of `upstream` at its commit (or of its release archive) with its
    patches applied (cached).

    `sources_dir` is an existing clone to take the commit from instead of the network, or for
    an archive upstream a folder holding the archive (it is read, never modified).
    A patch that does not apply aborts with git's reason, and nothing half-made is left in the
    cache.
    """
    dest = checkout_dir(upstream)
    patches = upstream_patches(upstream, patches_dir)
    if dest.exists() and not refetch:
        try:
            verify_checkout(upstream, dest, patches)
            return dest
        except DlperfError:
            pass  # stale or damaged: rebuild below
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _git(["init", "--quiet", str(partial)])
        if upstream.archive:
            _import_archive(partial, upstream, sources_dir)
        else:
            origin = str(sources_dir.resolve()) if sources_dir else upstream.url
            if sources_dir and not sources_dir.is_dir():
                raise DlperfError(f"--sources-dir {sources_dir} is not a directory")
            _fetch_commit(partial, origin, upstream, offline_hint=sources_dir is None)
            _git(["checkout", "--quiet", "--detach", upstream.commit], cwd=partial)
        for patch in patches:
            _apply_patch(partial, patch)
        _write_marker(partial, upstream, patches)
        partial.rename(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return dest


def _fetch_commit(repo: Path, origin: str, upstream: Upstream, *, offline_hint: bool) -> None:
    try:
        _git(["fetch", "--quiet", "--depth", "1", origin, upstream.commit], cwd=repo)
        return
    except GitError as shallow:
        first = shallow
    try:  # servers that refuse fetching a bare commit: take everything, then look for it
        _git(["fetch", "--quiet", origin, "+refs/heads/*:refs/remotes/origin/*"], cwd=repo)
        _git(["fetch", "--quiet", "--tags", origin], cwd=repo)
    except GitError as exc:
        where = f"{upstream.url} (offline?)" if offline_hint else origin
        raise DlperfError(
            f"cannot fetch {upstream.name} from {where}: {exc.detail or first.detail}\n"
            f"Clone it where the network reaches ({upstream.url}), copy the clone here and run "
            f"again with --sources-dir PATH; the clone must contain commit {upstream.commit}."
        ) from exc
    try:
        _git(["cat-file", "-e", f"{upstream.commit}^{{commit}}"], cwd=repo)
    except GitError as exc:
        raise DlperfError(
            f"{origin} does not contain commit {upstream.commit} ({upstream.name}); "
            "fetch its full history or pick a manifest pinned to a commit it has"
        ) from exc


def _import_archive(repo: Path, upstream: Upstream, sources_dir: Path | None) -> None:
    """Unpack the archive's single top folder into `repo` and commit it (detached HEAD)."""
    name = upstream.archive_name
    with tempfile.TemporaryDirectory() as tmp:
        if sources_dir is None:
            path = Path(tmp) / name
            digest = _download(upstream, path)
        else:
            path = sources_dir / name
            if not path.is_file():
                raise DlperfError(
                    f"--sources-dir {sources_dir} holds no {name}; download {upstream.archive} "
                    "into it"
                )
            digest = _file_digest(path)
        shown = str(path) if sources_dir else upstream.archive  # the temporary copy is gone
        if digest != upstream.sha256:
            raise DlperfError(
                f"{shown} has sha256 {digest}, the manifest pins {upstream.sha256} "
                f"({upstream.name}): not the release it names, so nothing was unpacked"
            )
        if path.stat().st_size == 0:
            raise DlperfError(f"{shown} is an empty file: not a release of {upstream.name}")
        unpacked = Path(tmp) / "unpacked"
        try:
            with tarfile.open(path) as tar:
                _extract(tar, unpacked, shown)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            # A truncated .tar.gz ends in EOFError, which is no interruption by the user.
            raise DlperfError(f"cannot unpack {shown}: {exc or type(exc).__name__}") from None
        tops = list(unpacked.iterdir()) if unpacked.is_dir() else []
        if not tops:
            raise DlperfError(f"{shown} holds no files: not a release of {upstream.name}")
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked
        for item in root.iterdir():
            shutil.move(str(item), repo / item.name)
    _git(["add", "--all", "."], cwd=repo)
    message = f"{name} (sha256 {upstream.sha256}) as published at {upstream.archive}"
    _git(["commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message], cwd=repo,
         env=_IMPORT_ENV)  # fmt: skip
    _git(["checkout", "--quiet", "--detach"], cwd=repo)


def _checked_members(tar: tarfile.TarFile, path: str) -> list[tarfile.TarInfo]:
    """The archive's members, read before anything is written: refused when they hold a git
    repository anywhere (its files would be left out of the checkout's commit, so `sources
    verify` would not see them change) or pass the unpacked limits."""
    members: list[tarfile.TarInfo] = []
    total = 0
    for member in tar:
        if ".git" in PurePosixPath(member.name).parts:
            raise DlperfError(
                f"{path} holds a git repository ({member.name}); a release archive should not, "
                "and its files would escape `dlperf sources verify`, so nothing was unpacked"
            )
        members.append(member)
        total += member.size if member.isfile() else 0
        if total > UNPACKED_MAX_BYTES or len(members) > UNPACKED_MAX_MEMBERS:
            raise DlperfError(
                f"{path} unpacks to more than {UNPACKED_MAX_BYTES / 2**20:,.0f} MiB or "
                f"{UNPACKED_MAX_MEMBERS:,} files (dlperf.official.manifest.UNPACKED_MAX_BYTES); "
                "no release of an upstream is that large, so nothing was unpacked"
            )
    return members


def _extract(tar: tarfile.TarFile, dest: Path, path: str) -> None:
    """Extract refusing absolute paths, `..`, links leaving `dest` and devices (tarfile's
    "data" filter; its own rule on Pythons too old to have it), after `_checked_members`."""
    members = _checked_members(tar, path)
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=members, filter="data")
        return
    for member in members:  # pragma: no cover - Python < 3.10.12 / 3.11.4
        target = (dest / member.name).resolve()
        if not (member.isfile() or member.isdir()) or not target.is_relative_to(dest.resolve()):
            raise tarfile.TarError(f"refusing {member.name!r} (a link, device or outside path)")
    tar.extractall(dest, members=members)  # noqa: S202 - every member checked above


def _too_large(what: str) -> DlperfError:
    return DlperfError(
        f"{what} is larger than {ARCHIVE_MAX_BYTES / 2**20:,.0f} MiB "
        "(dlperf.official.manifest.ARCHIVE_MAX_BYTES): not a release archive of an upstream"
    )


def _file_digest(path: Path) -> str:
    """The sha256 of a file in --sources-dir, read in chunks (refused past the size limit)."""
    if path.stat().st_size > ARCHIVE_MAX_BYTES:
        raise _too_large(str(path))
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _download(upstream: Upstream, dest: Path) -> str:
    """Download the archive into `dest`, hashing it as it comes; returns its sha256. A
    download past ARCHIVE_MAX_BYTES stops there."""
    digest, size = hashlib.sha256(), 0
    try:
        with (
            urllib.request.urlopen(upstream.archive, timeout=DOWNLOAD_TIMEOUT_S) as response,
            dest.open("wb") as f,
        ):
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > ARCHIVE_MAX_BYTES:
                raise _too_large(f"{upstream.archive} ({int(length):,} bytes)")
            while chunk := response.read(CHUNK_BYTES):
                size += len(chunk)
                if size > ARCHIVE_MAX_BYTES:
                    raise _too_large(upstream.archive)
                digest.update(chunk)
                f.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        raise DlperfError(
            f"cannot download {upstream.archive} ({upstream.name}; offline?): {exc}\n"
            "Download it where the network reaches, copy it into a folder here and run again "
            "with --sources-dir FOLDER."
        ) from exc
    return digest.hexdigest()


def _apply_patch(repo: Path, patch: Patch) -> None:
    try:
        _git(["apply", "--check", str(patch.path)], cwd=repo)
    except GitError as exc:
        raise DlperfError(
            f"patch {patch.path} does not apply to {repo.name.removesuffix('.partial')}: "
            f"{exc.detail}\nRebase the patch onto the pinned commit (git apply -3 helps) or pin "
            "the commit it was written for; nothing was applied."
        ) from exc
    _git(["apply", str(patch.path)], cwd=repo)


def _write_marker(repo: Path, upstream: Upstream, patches: list[Patch]) -> None:
    data = {
        "name": upstream.name,
        "url": redact_value(upstream.archive or upstream.url),
        "commit": upstream.revision,
        "head": _git(["rev-parse", "HEAD"], cwd=repo),
        "patches": {p.name: p.sha256 for p in patches},
        "patch_order": [p.name for p in patches],
    }
    atomic_write_json(repo / MARKER, data)
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a") as f:  # what running the code leaves behind is not a change to it
        f.write(f"\n{MARKER}\n__pycache__/\n*.pyc\n")


def verify_checkout(upstream: Upstream, repo: Path, patches: list[Patch] | None = None) -> None:
    """Raise DlperfError unless `repo` is exactly upstream's commit plus the current patches."""
    patches = upstream_patches(upstream) if patches is None else patches
    marker = repo / MARKER
    if not marker.exists():
        raise DlperfError(f"{repo} is not a finished dlperf checkout (no {MARKER}); refetch it")
    recorded = json.loads(marker.read_text())
    head = _git(["rev-parse", "HEAD"], cwd=repo)
    if recorded.get("commit") != upstream.revision:
        raise DlperfError(
            f"{repo} holds {recorded.get('commit')}, the manifest pins {upstream.revision}; "
            "refetch it"
        )
    if head != (upstream.commit or recorded.get("head")):
        raise DlperfError(f"{repo} is at {head}, not the commit it was fetched at; refetch it")
    want = {p.name: p.sha256 for p in patches}
    if recorded.get("patches") != want:
        raise DlperfError(
            f"{repo} was patched with {sorted(recorded.get('patches', {}))} but patches/"
            f"{upstream.name}/ now holds {sorted(want)} (or their contents changed); refetch it"
        )
    # The working tree must be exactly the commit plus these patches: compare tree hashes.
    expected = _patched_tree(repo, head, patches)
    actual = _worktree_tree(repo)
    if expected != actual:
        differ = _git(["diff", "--name-only", expected, actual], cwd=repo).split()
        raise DlperfError(
            f"{repo} differs from {upstream.short} + its patches in "
            f"{', '.join(differ[:5]) or 'file modes'}; refetch it (dlperf sources fetch --refetch)"
        )


def _patched_tree(repo: Path, commit: str, patches: list[Patch]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(["read-tree", commit], cwd=repo, env=index)
        for patch in patches:
            try:
                _git(["apply", "--cached", str(patch.path)], cwd=repo, env=index)
            except GitError as exc:
                raise DlperfError(
                    f"{patch.path} no longer applies to {commit[:12]}: {exc.detail}"
                ) from exc
        return _git(["write-tree"], cwd=repo, env=index)


def _worktree_tree(repo: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(["read-tree", "HEAD"], cwd=repo, env=index)
        _git(["add", "--all", "."], cwd=repo, env=index)
        return _git(["write-tree"], cwd=repo, env=index)


@dataclass(frozen=True)
class SourceState:
    manifest: Manifest
    path: Path
    state: str  # "ready", "missing", or why it cannot be used


def source_states(manifests: Mapping[str, Manifest]) -> list[SourceState]:
    """Each manifest's checkout state; a checkout several manifests share is verified once."""
    verified: dict[Path, str] = {}
    states = []
    for m in manifests.values():
        path = checkout_dir(m.upstream)
        if path not in verified:
            verified[path] = _checkout_state(m.upstream, path)
        states.append(SourceState(m, path, verified[path]))
    return states


def _checkout_state(upstream: Upstream, path: Path) -> str:
    if not path.exists():
        return "missing"
    try:
        verify_checkout(upstream, path)
    except DlperfError as exc:
        return f"broken: {exc}"
    return "ready"
