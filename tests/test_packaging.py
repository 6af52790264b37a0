"""What the sdist and the wheel carry, and that the packaged data is found from the wheel.

The wheel is built the way PyPI gets it: the sdist first, then the wheel from the sdist, from
a copy of the checkout with one device spec added, so the test also proves that a spec dropped
into devices/ ships. `make wheel-check` (CI) goes further: it installs the real wheel into a
fresh virtual environment and runs the commands from another folder.
"""

from __future__ import annotations

import email
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import hwbridge

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("src", "firmware-sim", "prompts", "dbc", "devices", "tests", "examples", "benchmarks")
SPEC = "bench_power_supply.toml"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    checkout = tmp_path_factory.mktemp("checkout")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        shutil.copytree(ROOT / name, checkout / name, ignore=skip)
    for name in ("pyproject.toml", "README.md", "Makefile"):
        shutil.copy2(ROOT / name, checkout / name)
    (checkout / "devices" / SPEC).write_text('[device]\nname = "bench PSU"\n')
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(checkout)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return out


def wheel_of(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_the_wheel_carries_the_data_files(dist: Path) -> None:
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        names = set(wheel.namelist())
        assert (
            wheel.read("hwbridge/dbc/demo_vehicle.dbc")
            == (ROOT / "dbc" / "demo_vehicle.dbc").read_bytes()
        )
        for pack in (ROOT / "prompts").glob("*.toml"):
            assert f"hwbridge/prompts/{pack.name}" in names
    assert f"hwbridge/devices/{SPEC}" in names
    assert "hwbridge/cli/demo_session.toml" in names
    assert {"firmware_sim/__main__.py", "firmware_sim/cli.py", "hwbridge/py.typed"} <= names


def test_the_wheel_and_its_metadata_have_the_one_version(dist: Path) -> None:
    wheel = wheel_of(dist)
    assert wheel.name.startswith(f"mcs_hwbridge-{hwbridge.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        info = f"mcs_hwbridge-{hwbridge.__version__}.dist-info/METADATA"
        metadata = email.message_from_bytes(archive.read(info))
    assert metadata["Version"] == hwbridge.__version__
    assert "mf4" in metadata.get_all("Provides-Extra", [])


def test_the_sdist_can_build_everything(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for wanted in (
        "firmware-sim/firmware_sim/cli.py",
        "dbc/demo_vehicle.dbc",
        f"devices/{SPEC}",
        "prompts/json.toml",
        "src/hwbridge/__about__.py",
        "tests/test_packaging.py",
    ):
        assert wanted in names
    assert not any(name.startswith(".venv") for name in names)


FROM_THE_WHEEL = """
import json, hwbridge, firmware_sim
from hwbridge.resources import bundled_dbc, bundled_spec, bundled_specs
print(json.dumps({
    "modules": [hwbridge.__file__, firmware_sim.__file__],
    "dbc": bundled_dbc().read_bytes().decode("latin-1"),
    "specs": list(bundled_specs()),
    "spec": bundled_spec("bench_power_supply").read_text(),
}))
"""


def test_packaged_files_are_found_inside_a_zipped_wheel(dist: Path, tmp_path: Path) -> None:
    """The wheel itself on sys.path (zipimport): importlib.resources reads from the archive,
    and callers still get real files."""
    wheel = wheel_of(dist)
    out = subprocess.run(
        [sys.executable, "-c", FROM_THE_WHEEL],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(wheel), "PATH": "/usr/bin:/bin"},
    ).stdout
    found = json.loads(out)
    assert all(path.startswith(str(wheel)) for path in found["modules"]), found["modules"]
    assert found["dbc"] == (ROOT / "dbc" / "demo_vehicle.dbc").read_bytes().decode("latin-1")
    assert SPEC in found["specs"]
    assert "bench PSU" in found["spec"]
