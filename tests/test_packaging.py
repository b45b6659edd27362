"""The wheel is honest: no top-level `adapters`, and manifests, patches and every subpackage
ship inside `dlperf` (a wheel user has no source tree to fall back on)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.multiprocess
def test_wheel_ships_packages_manifests_and_patches(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("dlperf-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("adapters/")]
    # Every subpackage of the source tree (setup.py lists them by hand).
    subpackages = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "dlperf").rglob("__init__.py")}
    for package in [*sorted(subpackages), "dlperf/adapters/pytorch"]:
        assert f"{package}/__init__.py" in names, package
    manifests = sorted(p.name for p in (ROOT / "third_party_scripts").glob("*.toml"))
    assert manifests == sorted(
        Path(n).name for n in names if n.startswith("dlperf/third_party_scripts/")
    )
    patches = {str(p.relative_to(ROOT)) for p in (ROOT / "patches").glob("*/*.patch")}
    assert patches == {n.removeprefix("dlperf/") for n in names if n.startswith("dlperf/patches/")}

    target = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    assert subprocess.run([*install, str(wheel)], capture_output=True).returncode == 0
    probe = subprocess.run(
        [sys.executable, "-c", "import dlperf.official.manifest as m; print(m.manifests_dir()); "
         "print(sum(map(len, m.load_folder())))"],  # manifests and absences
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(target)},
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    where, count = probe.stdout.split()
    assert where == str(target / "dlperf" / "third_party_scripts") and int(count) == len(manifests)
