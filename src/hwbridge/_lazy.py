"""Names of a package imported on first use (PEP 562), so importing the package stays cheap.

    __getattr__, __dir__ = lazy_names(__name__, {"CanDriver": "hwbridge.can.driver"}, globals())

A name is imported from its module the first time it is read and kept in the package's
namespace; `dir()` lists every name, imported or not (the API reference reads it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package` for `names` (name -> module)."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
