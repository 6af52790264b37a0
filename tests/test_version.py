"""The version lives in src/hwbridge/__about__.py; everything that shows one agrees with it."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import hwbridge
from hwbridge.__about__ import __version__
from hwbridge.can.driver import CanDriver
from hwbridge.can.tools.tool_driver import CanToolDriver

ROOT = Path(__file__).resolve().parents[1]


def test_module_metadata_command_and_drivers_agree() -> None:
    """If the metadata lags, `make install` has not run since __about__.py changed."""
    assert hwbridge.__version__ == __version__
    assert importlib.metadata.version("mcs-hwbridge") == __version__
    assert CanDriver.meta.version == __version__
    assert CanToolDriver.meta.version == __version__
    out = subprocess.run(
        [sys.executable, "-m", "hwbridge", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out == f"hwbridge {__version__}\n"


def test_no_driver_writes_its_own_version() -> None:
    """A DriverMeta(version="1.2.3") in the package would drift from the release."""
    literal = re.compile(r"""(?<!<\?xml )\bversion\s*=\s*["']\d""")  # not an XML declaration
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("src", "firmware-sim")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "__about__.py" and literal.search(path.read_text())
    ]
    assert offenders == []
