"""The tiny thermostat driver of the trust tests, as a third party distributes it: a wheel,
built here, and installed by pip into a folder of its own (put it on sys.path to use it).
docs/trust.md's transcript is made from it too (tests/docs_produced.py)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

MODULE = '''"""A tiny thermostat driver, distributed on its own."""
from hwbridge import DriverMeta, HybridDriver, Tool, ToolParameter

class Tiny(HybridDriver):
    meta = DriverMeta(id="2e4c6a8b-0d1f-4e3a-9b5c-7d9e1f3a5b7c", name="Tiny thermostat", version="1.0.0")

    def list_tools(self):
        celsius = ToolParameter(name="celsius", required=True, schema={"type": "number"})
        return [Tool(name="set_setpoint", description="Set the setpoint.", parameters=[celsius])]

    def execute_tool(self, tool_name, arguments):
        return {"setpoint": arguments["celsius"]}
'''
FILES = {
    "tinydriver/__init__.py": MODULE,
    "tinydriver/units.py": "CELSIUS = 'degC'\n\n\ndef main():\n    print(CELSIUS)\n",
    "tinydriver_hw-1.0.0.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: tinydriver-hw\nVersion: 1.0.0\n"
        "Author-email: Ada Lovelace <ada@example.org>\n"
        "Project-URL: Source, https://github.com/example/tinydriver\n"
    ),
    "tinydriver_hw-1.0.0.dist-info/WHEEL": (
        "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ),
    "tinydriver_hw-1.0.0.dist-info/entry_points.txt": (
        "[hwbridge.drivers]\ntiny = tinydriver:Tiny\n\n"
        "[console_scripts]\ntiny-thermostat = tinydriver.units:main\n"  # a script pip writes
    ),
}


def record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(folder: Path) -> Path:
    """tinydriver_hw-1.0.0-py3-none-any.whl in `folder`, its RECORD listing every file."""
    path = folder / "tinydriver_hw-1.0.0-py3-none-any.whl"
    record = [
        f"{name},sha256={record_hash(text.encode())},{len(text.encode())}"
        for name, text in FILES.items()
    ]
    record.append("tinydriver_hw-1.0.0.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in FILES.items():
            archive.writestr(name, text)
        archive.writestr("tinydriver_hw-1.0.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def pip_install(wheel: Path, target: Path) -> None:
    """`pip install --target TARGET WHEEL`, nothing fetched."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "--no-index", "--no-compile", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
