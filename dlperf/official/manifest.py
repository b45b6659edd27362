"""Official upstream implementations' manifests: the models, their validation, and finding them.

A manifest (`third_party_scripts/<name>.toml`) names an upstream repository at a full commit,
its entry command, how each dlperf knob maps onto its arguments, its log format and its
environment. Its command, knob arguments and environment values are templates
(`{batch_size}`, `{node_rank}`, ...) over `PLACEHOLDERS`, checked when it loads;
`dlperf.official.commands` fills them per node. Where a framework has no official code
for a model, a file of the same folder says so and why (`Absence`).
"""

from __future__ import annotations

import os
import re
import string
import sys
from collections.abc import Sequence
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
from dlperf.logformats import FORMATS
from dlperf.schema import short_revision
from dlperf.wording import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# "dlperf-2020": the stacks and commits DLPerf measured (its reproduction); "current": the same
# official implementations at recent upstream commits on stacks that run on current GPUs.
PROFILES = ("current", "dlperf-2020")
DEFAULT_PROFILE = "current"
# "cpu" / "cuda": arguments for a run with that --device (scripts that pick it by a flag)
KNOBS = (
    "batch_size", "steps", "synthetic", "amp", "fp32", "xla", "no_xla", "multi_node", "cpu",
    "cuda",
)  # fmt: skip
_HEX40 = re.compile(r"^[0-9a-f]{40}$")

PLACEHOLDERS = (
    "python",
    "source",
    "batch_size",
    "node_batch",
    "global_batch",
    "steps",
    "devices",
    "gpus",
    "nodes",
    "world_size",
    "node_rank",
    "node_ip",
    "node_ips",
    "master_addr",
    "master_port",
    "hosts_slots",
    "tf_config",
    "data_dir",
    "out_dir",
    "image_size",  # the spec's image side (the preset's: 224, smoke 64); "" for a model with none
)


def template_names(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def check_templates(templates: Sequence[str], where: str) -> None:
    for template in templates:
        try:
            unknown = template_names(template) - set(PLACEHOLDERS)
        except ValueError as exc:
            raise ValueError(f"{where}: bad template {template!r}: {exc}") from None
        if unknown:
            raise ValueError(
                f"{where}: unknown placeholder(s) {', '.join(sorted(unknown))} in {template!r}; "
                f"known: {', '.join(PLACEHOLDERS)}"
            )


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# A release archive's limits: a download that does not end, or a small archive that unpacks to
# gigabytes, is refused before it fills the disk. Generous for real upstreams: tf-models-official
# 2.20.0's sdist is 1.9 MB and unpacks to about 10 MB; a repository's whole tree at a release is
# at most a few hundred MB.
ARCHIVE_MAX_BYTES = 256 * 2**20  # the archive as downloaded or found in --sources-dir
UNPACKED_MAX_BYTES = 2**30  # its files' sizes together, unpacked
UNPACKED_MAX_MEMBERS = 200_000  # its files and folders


class Upstream(_Strict):
    """Where an official implementation's code comes from: a git repository at a full commit,
    or, for an upstream whose release exists only as a published archive (a PyPI sdist, a
    release tarball), that archive pinned by its sha256."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    url: str  # the repository (and, for a git upstream, where it is fetched from)
    commit: str = ""
    ref: str = ""
    archive: str = ""  # the release archive's URL (.tar.gz), instead of a commit
    sha256: str = ""  # of the archive's bytes, as its publisher lists it

    @field_validator("commit")
    @classmethod
    def _full_commit(cls, v: str) -> str:
        if v and not _HEX40.match(v):
            raise ValueError(f"commit must be a full 40-hex git commit, got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_pin(self) -> Upstream:
        if bool(self.commit) == bool(self.archive):
            raise ValueError(
                "set either commit (a git upstream) or archive + sha256 (a release archive)"
            )
        if self.archive:
            if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
                raise ValueError(f"archive needs its sha256 (64 hex digits), got {self.sha256!r}")
            if not self.archive_name.endswith((".tar.gz", ".tgz", ".tar")):
                raise ValueError(f"archive must be a .tar.gz, .tgz or .tar, got {self.archive!r}")
        elif self.sha256:
            raise ValueError("sha256 pins an archive; a git upstream is pinned by its commit")
        return self

    @property
    def archive_name(self) -> str:
        return self.archive.rstrip("/").rsplit("/", 1)[-1]

    @property
    def revision(self) -> str:
        """The pin as results record it: the commit, or `sha256:<hex>` of the archive."""
        return self.commit or f"sha256:{self.sha256}"

    @property
    def short(self) -> str:
        return short_revision(self.revision)


class MeasureWindow(_Strict):
    log_every: int = Field(1, ge=1)
    skip: int = Field(ge=0)
    measure: int = Field(ge=1)
    source: str = ""


class UpstreamEnvironment(_Strict):
    kind: Literal["pip", "container"]
    python: str = ""
    requirements: tuple[str, ...] = ()
    # Added to `requirements` for a run with --device cuda only: a GPU plugin that the CPU
    # env does without (jax[cuda12] and its NVIDIA wheels).
    cuda_requirements: tuple[str, ...] = ()
    image: str = ""
    runtime: Literal["docker", "apptainer"] = "docker"
    device: Literal["cpu", "cuda"] = "cuda"

    def requirements_for(self, device: str) -> tuple[str, ...]:
        """What the env of a run on `device` installs."""
        return self.requirements + (self.cuda_requirements if device == "cuda" else ())


class UpstreamCommand(_Strict):
    cwd: str = "."
    scope: Literal["per_node", "once"] = "per_node"
    argv: tuple[str, ...]
    env: dict[str, str] = Field(default_factory=dict)


class Manifest(_Strict):
    name: str
    profile: Literal[PROFILES]
    framework: str
    model: str
    default: bool = False  # the one run for its framework, model and profile without --source
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


class Absence(_Strict):
    """A framework's official implementation of a model that does not exist in a profile, and
    why: what was looked at and why none of it qualifies. A file of its own in the manifests
    folder, with `absent` (the reason) in place of a manifest's upstream, command and the rest;
    `dlperf sources list` shows it and `--impl official` is refused with it, so that "none"
    is an answer someone checked, not a gap."""

    name: str
    profile: Literal[PROFILES]
    framework: str
    model: str
    title: str  # the model as a sentence names it: "no official {title} for {framework}"
    absent: str

    @property
    def message(self) -> str:
        reason = " ".join(self.absent.split())
        return f"no official {self.title} for {self.framework} (profile {self.profile}): {reason}"


# --------------------------------------------------------------------------- manifests


def _project_dir(folder: str) -> Path:
    """A data folder shipped beside the package (wheel) or at the checkout root (source tree)."""
    here = Path(__file__).resolve().parents[1]  # the dlperf package folder
    for candidate in (here / folder, here.parent / folder):
        if candidate.is_dir():
            return candidate
    return here.parent / folder


def manifests_dir() -> Path:
    return Path(os.environ.get("DLPERF_MANIFESTS") or _project_dir("third_party_scripts"))


def patches_root() -> Path:
    return Path(os.environ.get("DLPERF_PATCHES") or _project_dir("patches"))


def _load(path: Path) -> Manifest | Absence:
    """A manifest, or an absence where the file says `absent`."""
    try:
        data = tomllib.loads(path.read_text())
        kind = Absence if "absent" in data else Manifest
        loaded = kind.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DlperfError(f"{path}: cannot read manifest: {exc}") from exc
    except ValidationError as exc:
        raise DlperfError(f"{path}: invalid manifest:\n{exc}") from exc
    if loaded.name != path.stem:
        raise DlperfError(f"{path}: name {loaded.name!r} must equal the file name {path.stem!r}")
    return loaded


def load_manifest(path: Path) -> Manifest:
    loaded = _load(path)
    if isinstance(loaded, Absence):
        raise DlperfError(f"{path} declares that there is none: {loaded.message}")
    return loaded


def load_manifests(directory: Path | None = None) -> dict[str, Manifest]:
    return load_folder(directory)[0]


def load_absences(directory: Path | None = None) -> dict[str, Absence]:
    return load_folder(directory)[1]


def load_folder(
    directory: Path | None = None,
) -> tuple[dict[str, Manifest], dict[str, Absence]]:
    """The manifests and the absences of the manifests folder, checked together."""
    given = directory is not None
    directory = directory or manifests_dir()
    if not directory.is_dir():
        whence = "" if given or not os.environ.get("DLPERF_MANIFESTS") else " (DLPERF_MANIFESTS)"
        why = "is not a folder" if directory.exists() else "does not exist"
        raise DlperfError(
            f"the manifests folder {directory}{whence} {why}; point DLPERF_MANIFESTS at a "
            "folder of manifests (third_party_scripts/*.toml) or unset it"
        )
    loaded = {p.stem: _load(p) for p in sorted(directory.glob("*.toml"))}
    manifests = {n: m for n, m in loaded.items() if isinstance(m, Manifest)}
    absences = {n: a for n, a in loaded.items() if isinstance(a, Absence)}
    defaults: dict[tuple[str, str, str], list[str]] = {}
    for m in manifests.values():
        if m.default:
            defaults.setdefault((m.framework, m.model, m.profile), []).append(m.name)
    for (framework, model, profile), names in defaults.items():
        if len(names) > 1:
            raise DlperfError(
                f"{directory}: {framework} {model} has several default {profile} manifests "
                f"({', '.join(names)}); set default = true on one"
            )
    for a in absences.values():
        same = (a.framework, a.model, a.profile)
        there = [m.name for m in manifests.values() if (m.framework, m.model, m.profile) == same]
        if there:
            raise DlperfError(
                f"{directory}: {a.name} says there is no official {a.framework} {a.model} in "
                f"profile {a.profile}, but {', '.join(there)} is one; remove one of them"
            )
    return manifests, absences


def select_manifests(names: list[str] | None, profile: str | None = None) -> list[Manifest]:
    """The manifests named (every one, or every one of `profile`, when `names` is empty); an
    unknown name lists the known."""
    manifests, absences = load_folder()
    if not names:
        return [m for m in manifests.values() if profile in (None, m.profile)]
    unknown = [n for n in names if n not in manifests]
    for name in unknown:
        if name in absences:
            raise DlperfError(f"{name} is no manifest: {absences[name].message}")
    if unknown:
        named = ", ".join(n + did_you_mean(n, manifests) for n in unknown)
        raise DlperfError(f"unknown manifest(s) {named}; known: {', '.join(manifests)}")
    return [manifests[n] for n in names]


def find_manifest(
    framework: str, model: str, name: str | None = None, profile: str | None = None
) -> Manifest:
    """The manifest `name`, or the default one for (framework, model) in `profile` (default:
    DEFAULT_PROFILE)."""
    manifests, absences = load_folder()
    if profile is not None and profile not in PROFILES:
        raise DlperfError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    if name:
        if name in absences:
            raise DlperfError(absences[name].message)
        if name not in manifests:
            raise DlperfError(
                f"no manifest named {name!r}{did_you_mean(name, manifests)} in "
                f"{manifests_dir()}; known: "
                f"{', '.join(manifests) or 'none'} (see `dlperf sources list`)"
            )
        m = manifests[name]
        if (m.framework, m.model) != (framework, model):
            raise DlperfError(
                f"manifest {name} is {m.framework} {m.model}, not {framework} {model}"
            )
        if profile is not None and m.profile != profile:
            raise DlperfError(f"manifest {name} is in profile {m.profile}, not {profile}")
        return m
    profile = profile or DEFAULT_PROFILE
    pair = [m for m in manifests.values() if (m.framework, m.model) == (framework, model)]
    matching = [m for m in pair if m.profile == profile]
    if not matching:
        for a in absences.values():
            if (a.framework, a.model, a.profile) == (framework, model, profile):
                raise DlperfError(a.message)
        if pair:
            others = sorted({m.profile for m in pair})
            raise DlperfError(
                f"no {profile} official implementation of {framework} {model}; profile "
                f"{', '.join(others)} has {', '.join(m.name for m in pair)}: add "
                f"--profile {others[0]}"
            )
        pairs = sorted({f"{m.framework} {m.model}" for m in manifests.values()})
        raise DlperfError(
            f"no official implementation of {framework} {model} in {manifests_dir()}; "
            f"there are: {', '.join(pairs) or 'none'}"
        )
    defaults = [m for m in matching if m.default]
    if len(matching) > 1 and not defaults:
        raise DlperfError(
            f"{framework} {model} has several {profile} official implementations "
            f"({', '.join(m.name for m in matching)}); pick one with --source NAME"
        )
    return (defaults or matching)[0]
