"""Official upstream implementations: manifests, pinned checkouts and tracked patches.

A manifest (`third_party_scripts/<name>.toml`) names an upstream repository at a full commit,
its entry command, how each dlperf knob maps onto its arguments, its log format and its
environment. `fetch_source` clones the upstream into a cache at exactly that commit and applies
the patches in `patches/<upstream>/` with `git apply`; a marker written last records what the
checkout is, and `verify_source` checks it again before every use. Results carry the upstream
URL, commit and each patch's sha256 (`SourceInfo`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dlperf import DlperfError
from dlperf.files import atomic_write_json, dlperf_home
from dlperf.launch import check_templates
from dlperf.logformats import FORMATS
from dlperf.redact import redact_value
from dlperf.schema import SourceInfo

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MARKER = ".dlperf-source.json"
KNOBS = ("batch_size", "steps", "synthetic", "amp", "fp32", "xla", "no_xla", "multi_node")
GIT_TIMEOUT_S = 60.0
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Upstream(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    url: str
    commit: str
    ref: str = ""

    @field_validator("commit")
    @classmethod
    def _full_commit(cls, v: str) -> str:
        if not _HEX40.match(v):
            raise ValueError(f"commit must be a full 40-hex git commit, got {v!r}")
        return v


class MeasureWindow(_Strict):
    log_every: int = Field(1, ge=1)
    skip: int = Field(ge=0)
    measure: int = Field(ge=1)
    source: str = ""


class UpstreamEnvironment(_Strict):
    kind: Literal["pip", "container"]
    python: str = ""
    requirements: tuple[str, ...] = ()
    image: str = ""
    runtime: Literal["docker", "apptainer"] = "docker"
    device: Literal["cpu", "cuda"] = "cuda"


class UpstreamCommand(_Strict):
    cwd: str = "."
    scope: Literal["per_node", "once"] = "per_node"
    argv: tuple[str, ...]
    env: dict[str, str] = Field(default_factory=dict)


class Manifest(_Strict):
    name: str
    framework: str
    model: str
    default: bool = False
    title: str
    dlperf_reference: str = ""
    log_format: str
    notes: str = ""
    upstream: Upstream
    window: MeasureWindow
    environment: UpstreamEnvironment
    command: UpstreamCommand
    args: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    env_knobs: dict[str, dict[str, str]] = Field(default_factory=dict)
    unsupported: dict[str, str] = Field(default_factory=dict)

    @field_validator("log_format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if v not in FORMATS:  # the parsers' own list: a format named here can be parsed
            raise ValueError(f"unknown log_format {v!r}; known: {', '.join(sorted(FORMATS))}")
        return v

    @field_validator("args", "env_knobs", "unsupported")
    @classmethod
    def _known_knobs(cls, v: dict) -> dict:
        unknown = sorted(set(v) - set(KNOBS))
        if unknown:
            raise ValueError(f"unknown knob(s) {', '.join(unknown)}; known: {', '.join(KNOBS)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        check_templates(self.command.argv, "command.argv")
        check_templates(list(self.command.env.values()), "command.env")
        for knob, templates in self.args.items():
            check_templates(templates, f"args.{knob}")
        for knob, env in self.env_knobs.items():
            check_templates(list(env.values()), f"env_knobs.{knob}")
        env = self.environment
        if env.kind == "pip" and not env.python:
            raise ValueError("environment.python is required for kind = 'pip'")
        if env.kind == "container" and not env.image:
            raise ValueError("environment.image is required for kind = 'container'")
        return self


# --------------------------------------------------------------------------- manifests


def _project_dir(folder: str) -> Path:
    """A data folder shipped beside the package (wheel) or at the checkout root (source tree)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / folder, here.parent / folder):
        if candidate.is_dir():
            return candidate
    return here.parent / folder


def manifests_dir() -> Path:
    return Path(os.environ.get("DLPERF_MANIFESTS") or _project_dir("third_party_scripts"))


def patches_root() -> Path:
    return Path(os.environ.get("DLPERF_PATCHES") or _project_dir("patches"))


def sources_root() -> Path:
    return dlperf_home() / "sources"


def load_manifest(path: Path) -> Manifest:
    try:
        data = tomllib.loads(path.read_text())
        manifest = Manifest.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DlperfError(f"{path}: cannot read manifest: {exc}") from exc
    except ValidationError as exc:
        raise DlperfError(f"{path}: invalid manifest:\n{exc}") from exc
    if manifest.name != path.stem:
        raise DlperfError(f"{path}: name {manifest.name!r} must equal the file name {path.stem!r}")
    return manifest


def load_manifests(directory: Path | None = None) -> dict[str, Manifest]:
    directory = directory or manifests_dir()
    manifests = {p.stem: load_manifest(p) for p in sorted(directory.glob("*.toml"))}
    defaults: dict[tuple[str, str], list[str]] = {}
    for m in manifests.values():
        if m.default:
            defaults.setdefault((m.framework, m.model), []).append(m.name)
    for (framework, model), names in defaults.items():
        if len(names) > 1:
            raise DlperfError(
                f"{directory}: {framework} {model} has several default manifests "
                f"({', '.join(names)}); set default = true on one"
            )
    return manifests


def select_manifests(names: list[str] | None) -> list[Manifest]:
    """The manifests named (every one when `names` is empty); an unknown name lists the known."""
    manifests = load_manifests()
    if not names:
        return list(manifests.values())
    unknown = [n for n in names if n not in manifests]
    if unknown:
        raise DlperfError(
            f"unknown manifest(s) {', '.join(unknown)}; known: {', '.join(manifests)}"
        )
    return [manifests[n] for n in names]


def find_manifest(framework: str, model: str, name: str | None = None) -> Manifest:
    """The manifest `name`, or the default one for (framework, model)."""
    manifests = load_manifests()
    if name:
        if name not in manifests:
            raise DlperfError(
                f"no manifest named {name!r} in {manifests_dir()}; known: "
                f"{', '.join(manifests) or 'none'} (see `dlperf sources list`)"
            )
        m = manifests[name]
        if (m.framework, m.model) != (framework, model):
            raise DlperfError(
                f"manifest {name} is {m.framework} {m.model}, not {framework} {model}"
            )
        return m
    matching = [m for m in manifests.values() if (m.framework, m.model) == (framework, model)]
    if not matching:
        pairs = sorted({f"{m.framework} {m.model}" for m in manifests.values()})
        raise DlperfError(
            f"no official implementation of {framework} {model} in {manifests_dir()}; "
            f"there are: {', '.join(pairs) or 'none'}"
        )
    defaults = [m for m in matching if m.default]
    if len(matching) > 1 and not defaults:
        raise DlperfError(
            f"{framework} {model} has several official implementations "
            f"({', '.join(m.name for m in matching)}); pick one with --source NAME"
        )
    return (defaults or matching)[0]


# --------------------------------------------------------------------------- checkouts


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
    return sources_root() / f"{upstream.name}-{upstream.commit[:12]}"


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


def source_info(upstream: Upstream, patches: list[Patch]) -> SourceInfo:
    return SourceInfo(
        name=upstream.name,
        url=redact_value(upstream.url),  # a token in a clone URL is not stored
        commit=upstream.commit,
        patches={p.name: p.sha256 for p in patches},
    )


def fetch_source(
    upstream: Upstream,
    *,
    sources_dir: Path | None = None,
    refetch: bool = False,
    patches_dir: Path | None = None,
) -> Path:
    """A verified checkout of `upstream` at its commit with its patches applied (cached).

    `sources_dir` is an existing clone to take the commit from instead of the network (it is
    read, never modified). A patch that does not apply aborts with git's reason, and nothing
    half-made is left in the cache.
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
    data = {**source_info(upstream, patches).model_dump(), "patch_order": [p.name for p in patches]}
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
    if head != upstream.commit:
        raise DlperfError(f"{repo} is at {head}, the manifest pins {upstream.commit}; refetch it")
    want = {p.name: p.sha256 for p in patches}
    if recorded.get("patches") != want:
        raise DlperfError(
            f"{repo} was patched with {sorted(recorded.get('patches', {}))} but patches/"
            f"{upstream.name}/ now holds {sorted(want)} (or their contents changed); refetch it"
        )
    # The working tree must be exactly the commit plus these patches: compare tree hashes.
    expected = _patched_tree(repo, upstream.commit, patches)
    actual = _worktree_tree(repo)
    if expected != actual:
        differ = _git(["diff", "--name-only", expected, actual], cwd=repo).split()
        raise DlperfError(
            f"{repo} differs from {upstream.commit[:12]} + its patches in "
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
