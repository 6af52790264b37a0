"""The layer check `make lint` runs (.ci/check_layers.py): it passes on hwbridge as it is, and
it fails on an upward import, a sideways one, an import hidden in a function and a circle -
shown on small trees of the same shape."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / ".ci" / "check_layers.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    src = root / "src"
    for name, text in {"hwbridge/__init__.py": "", **files}.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(src).parents:
            init = src / parent / "__init__.py"
            if parent != Path(".") and not init.exists():
                init.write_text("")
        path.write_text(text)
    return src


def test_hwbridge_keeps_its_layer_order() -> None:
    result = subprocess.run(
        [sys.executable, str(CHECK), str(ROOT / "src")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout
    assert "every import downwards, no circles" in result.stdout


@pytest.mark.parametrize(
    ("files", "said"),
    [
        (  # the bridge imports what is built on it
            {"hwbridge/can/driver.py": "from hwbridge.discovery.api import discover\n",
             "hwbridge/discovery/api.py": "discover = 1\n"},
            "can imports discovery, a layer above it",
        ),
        (  # hidden in a function, to dodge a circle: it still counts
            {"hwbridge/core/models.py": "def f():\n    from hwbridge.cli import main\n",
             "hwbridge/cli/main.py": ""},
            "core imports cli, a layer above it",
        ),
        (  # two packages of one layer
            {"hwbridge/j1939/tools.py": "import hwbridge.obd.pids\n",
             "hwbridge/obd/pids.py": ""},
            "j1939 imports obd, a package of its own layer",
        ),
        (  # a circle inside one package
            {"hwbridge/can/a.py": "from hwbridge.can import b\n",
             "hwbridge/can/b.py": "from . import c\n",
             "hwbridge/can/c.py": "from .a import x\n"},
            "modules import each other: hwbridge.can.a -> hwbridge.can.b -> hwbridge.can.c",
        ),
        (  # a package the layers do not know
            {"hwbridge/extra/thing.py": "from hwbridge.core import models\n",
             "hwbridge/core/models.py": ""},
            "extra is in no layer",
        ),
    ],
)  # fmt: skip
def test_a_change_that_breaks_the_order_fails(
    tmp_path: Path, files: dict[str, str], said: str
) -> None:
    src = _tree(tmp_path, files)
    problems = _checker().check(src)
    assert any(said in line for line in problems), problems
    result = subprocess.run(
        [sys.executable, str(CHECK), str(src)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and said in result.stdout


def test_what_the_order_allows_passes(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "hwbridge/core/models.py": "",
            "hwbridge/can/driver.py": "from hwbridge.core.models import x\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from hwbridge.discovery.api import discover\n",
            "hwbridge/obd/elm.py": "from hwbridge.serial import port\n",  # allowed sideways
            "hwbridge/serial/port.py": "",
            "hwbridge/discovery/api.py": "from hwbridge.can import driver\n",
            "hwbridge/__init__.py": "from hwbridge.cli import main\n",
            "hwbridge/cli/main.py": "",
        },
    )
    assert _checker().check(src) == []
