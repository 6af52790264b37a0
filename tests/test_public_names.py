"""Each package's public names are written once, as its __init__'s imports (hwbridge._lazy):
every name of `__all__` resolves, `from package import *` gives exactly them, `dir()` lists
them before they are loaded, and importing a lazy package loads none of them."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(
    str(p.parent.relative_to(SRC)).replace("/", ".")
    for p in (SRC / "hwbridge").rglob("__init__.py")
    if "lazy_package(globals())" in p.read_text(encoding="utf-8")
)
OPTIONAL = {"hwbridge.mcp": "mcp", "hwbridge.interop": "mcs"}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves_and_star_gives_exactly_them(name: str) -> None:
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name])
    package = importlib.import_module(name)
    public = package.__all__
    assert public and public == sorted(set(public))
    for attribute in public:
        assert getattr(package, attribute) is not None
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)  # the star import under test
    assert sorted(k for k in namespace if k != "__builtins__") == public
    if name != "hwbridge":  # the top level documents its names where they are defined
        assert set(public) <= set(dir(package))


def test_a_lazy_package_loads_none_of_its_names_until_one_is_asked_for() -> None:
    code = (
        "import sys, hwbridge, hwbridge.can, hwbridge.core, hwbridge.captures;"
        "print(sorted(m for m in ('hwbridge.can.driver', 'hwbridge.core.hybrid', "
        "'hwbridge.captures.decode', 'ast') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    import hwbridge.can

    with pytest.raises(AttributeError, match=r"'hwbridge\.can' has no attribute 'Nope'"):
        _ = hwbridge.can.Nope
