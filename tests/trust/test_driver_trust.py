"""Driver trust (spec section 14) as a driver user meets it: a real driver distribution,
built as a wheel and pip-installed, found by its entry point, checked before it loads."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwbridge import CanDriver, DriverTrustError, TrustManifest, load_driver
from hwbridge.core.trust import installed_drivers, verify_distribution, wheel_digest
from tests.cli.conftest import Run
from tests.trust.tiny import MODULE, build_wheel, pip_install


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def installed_once(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    pip_install(wheel, target)
    return target


@pytest.fixture
def site(installed_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh copy of the installed distribution on sys.path, for this test alone."""
    target = tmp_path / "site"
    shutil.copytree(installed_once, target)
    monkeypatch.syspath_prepend(str(target))
    yield target
    for name in [m for m in sys.modules if m == "tinydriver" or m.startswith("tinydriver.")]:
        del sys.modules[name]


def test_a_pinned_driver_loads_with_its_trust_manifest(site: Path, wheel: Path) -> None:
    assert "tiny" in {e.name for e in installed_drivers()}
    check = verify_distribution("tinydriver-hw")
    assert check.status == "intact" and check.files >= 6
    assert (site / "bin" / "tiny-thermostat").is_file()  # recorded as ../../bin/..., unchecked
    digest = wheel_digest(wheel)
    assert check.digest == digest  # the publisher's digest is the one the installation has

    driver_class = load_driver("tiny", sha256=digest)
    assert driver_class.meta.trust == TrustManifest(
        author="Ada Lovelace", source_url="https://github.com/example/tinydriver", sha256=digest
    )
    r = driver_class().process_llm_response(
        '{"tool": "set_setpoint", "arguments": {"celsius": 21}}'
    )
    assert r.call_executed and r.tool_call_result == {"setpoint": 21}
    assert verify_distribution("tinydriver-hw", digest).status == "verified"


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("tamper", "tinydriver/__init__.py differs from its RECORD hash"),
        ("remove", "tinydriver/units.py is missing"),
        ("add", "tinydriver/backdoor.py is not in RECORD"),
        ("no-record", "has no RECORD file"),
        ("editable", "editable install"),
        ("pin", "not the pinned"),
    ],
)
def test_a_damaged_distribution_is_refused_before_import(
    site: Path, damage: str, words: str
) -> None:
    digest = verify_distribution("tinydriver-hw").digest
    assert digest is not None
    package, info = site / "tinydriver", site / "tinydriver_hw-1.0.0.dist-info"
    if damage == "tamper":
        (package / "__init__.py").write_text(MODULE + "\nimport os  # sneaked in\n")
    elif damage == "remove":
        (package / "units.py").unlink()
    elif damage == "add":
        (package / "backdoor.py").write_text("print('hello')\n")
    elif damage == "no-record":
        (info / "RECORD").unlink()
    elif damage == "editable":
        (info / "direct_url.json").write_text(
            json.dumps({"url": "file:///src", "dir_info": {"editable": True}})
        )
    elif damage == "pin":
        digest = "0" * 64
    with pytest.raises(DriverTrustError, match="refused") as refused:
        load_driver("tiny", sha256=digest)
    assert words in str(refused.value)
    assert "tinydriver" not in sys.modules  # nothing of it was imported
    if damage != "pin":  # without a pin, the files are still checked against RECORD
        with pytest.raises(DriverTrustError):
            load_driver("tiny")


def test_hwbridge_drivers_lists_them_with_meta_and_status(
    site: Path, run: Run, wheel: Path
) -> None:
    digest = wheel_digest(wheel)
    listed = run("drivers", "--json", "--sha256", f"tiny={digest}")
    assert listed.code == 0, listed.err
    rows = {r["name"]: r for r in json.loads(listed.out)["drivers"]}
    assert rows["can"]["status"] == "built-in" and rows["can"]["meta"]["name"] == "hwbridge CAN"
    tiny = rows["tiny"]
    assert tiny["status"] == "verified" and tiny["digest"] == digest
    assert tiny["meta"]["trust"] == {
        "author": "Ada Lovelace",
        "source_url": "https://github.com/example/tinydriver",
        "sha256": digest,
    }

    del sys.modules["tinydriver"]  # as in a new process
    (site / "tinydriver" / "units.py").write_text("CELSIUS = 'degF'\n")
    damaged = run("drivers", "--sha256", f"tiny={digest}")
    assert damaged.code == 1
    assert "tiny  tampered  (tinydriver-hw 1.0.0, tinydriver:Tiny)" in damaged.out
    assert "  problem       tinydriver/units.py differs from its RECORD hash" in damaged.out
    assert "tinydriver" not in sys.modules
    listed = run("drivers", "--no-load")
    assert listed.code == 0 and "  driver        not loaded" in listed.out


def test_builtin_drivers_load_and_unknown_names_say_what_exists() -> None:
    assert load_driver("can") is CanDriver
    with pytest.raises(LookupError, match="installed: can, captures, j1939, obd"):
        load_driver("nope")
    with pytest.raises(ValueError, match="64 hexadecimal"):
        load_driver("can", sha256="abc")
