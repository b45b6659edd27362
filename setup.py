"""Package list only (metadata lives in pyproject.toml): every adapters/<name>/ folder ships as
dlperf.adapters.<name>, so adding a framework is adding one folder."""

from pathlib import Path

from setuptools import setup

ADAPTERS = sorted(
    f"dlperf.adapters.{init.parent.name}" for init in Path("adapters").glob("*/__init__.py")
)
DATA = ["dlperf.third_party_scripts", "dlperf.patches"]  # manifests and patches (no code)
setup(
    packages=[
        "dlperf",
        "dlperf.cli",
        "dlperf.report",
        "dlperf.logformats",
        "dlperf.importers",
        "dlperf.official",
        "dlperf.adapters",
        *ADAPTERS,
        *DATA,
    ]
)
