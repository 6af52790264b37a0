"""A package's public names, written once and imported on first use (PEP 562).

A package's `__init__.py` lists its public names as imports under `if TYPE_CHECKING:`, the
one place they are written; the type checker reads them there (the package modules are
configured for implicit re-export in pyproject.toml), and at run time

    __getattr__, __dir__ = lazy_package(globals())

reads the same imports from the module's own source, the first time a name is asked for
(importing the package costs nothing more): each name is imported from its module the first
time it is read and kept in the package's namespace, `__all__` lists them (with the names the
package imports eagerly from hwbridge), and `dir()` lists every name, imported or not (the
API reference reads it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_package"]

Getattr = Callable[[str], Any]
Dir = Callable[[], list[str]]


def lazy_package(namespace: dict[str, Any]) -> tuple[Getattr, Dir]:
    """`__getattr__` and `__dir__` of the package whose globals are `namespace` (`__all__`
    is one of the names they answer)."""
    package = str(namespace["__name__"])

    found: list[tuple[dict[str, tuple[str, str]], list[str]]] = []

    def names() -> tuple[dict[str, tuple[str, str]], list[str]]:
        if not found:  # read once (a race reads it twice, the same)
            loader = namespace["__spec__"].loader  # the source: a folder or a zipped wheel
            lazy, eager = _public_names(loader.get_source(package), package)
            found.append((lazy, sorted({*lazy, *eager})))
        return found[0]

    def __getattr__(name: str) -> Any:
        lazy, public = names()
        if name == "__all__":
            namespace["__all__"] = public
            return public
        found = lazy.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = found
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names()[0]))

    return __getattr__, __dir__


def _public_names(source: str, package: str) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """(name -> (module, attribute)) of the imports under `if TYPE_CHECKING:`, and the names
    imported eagerly from hwbridge (but the lazy loader)."""
    import ast  # only when a name is first asked for: importing a package stays cheap

    def imported(node: ast.stmt) -> list[tuple[str, str, str]]:
        """(name bound, module, attribute) for each name a `from ... import` binds."""
        if not isinstance(node, ast.ImportFrom):
            return []
        module = node.module or ""
        if node.level:  # relative to the package itself
            parts = package.split(".")
            base = parts[: len(parts) - (node.level - 1)]
            module = ".".join([*base, module] if module else base)
        return [(a.asname or a.name, module, a.name) for a in node.names if a.name != "*"]

    lazy: dict[str, tuple[str, str]] = {}
    eager: list[str] = []
    for node in ast.parse(source, package).body:
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            assert isinstance(node, ast.If)
            for inner in node.body:
                for name, module, attribute in imported(inner):
                    lazy[name] = (module, attribute)
        else:
            for name, module, _ in imported(node):
                if module.startswith("hwbridge") and module != "hwbridge._lazy":
                    eager.append(name)
    return lazy, eager
