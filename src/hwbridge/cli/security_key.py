"""`--security-key MODULE:FUNCTION`: the user's own SecurityAccess key function, loaded for
`uds_unlock` (`chat`, `mcp`, `inspect`). hwbridge ships no key algorithm and never shows the
function, a seed or a key to the model; a module that cannot be loaded or names no function is
a usage error, before anything is opened."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwbridge.cli.errors import CliError, one_line

__all__ = ["load_security_key", "security_key_words"]


def _module(name: str) -> Any:
    if name.endswith(".py"):
        path = Path(name)
        spec = importlib.util.spec_from_file_location(f"hwbridge_security_key_{path.stem}", path)
        if spec is None or spec.loader is None or not path.is_file():
            raise CliError(f"--security-key {name}: no such Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def load_security_key(text: str) -> Callable[[bytes, int, str], bytes]:
    """The function `MODULE:FUNCTION` (or `path/to/file.py:FUNCTION`) names."""
    module_name, _, function = text.rpartition(":")
    if not module_name or not function.isidentifier():
        raise CliError(
            f"--security-key {text}: give MODULE:FUNCTION (or FILE.py:FUNCTION), a function "
            "key(seed: bytes, level: int, ecu: str) -> bytes"
        )
    try:
        module = _module(module_name)
    except CliError:
        raise
    except Exception as exc:  # the user's module: any error in it is theirs to see
        raise CliError(
            f"--security-key {text}: {module_name} cannot be loaded ({type(exc).__name__}: "
            f"{one_line(str(exc))})"
        ) from exc
    found = getattr(module, function, None)
    if not callable(found):
        raise CliError(f"--security-key {text}: {module_name} has no function {function}")
    key: Callable[[bytes, int, str], bytes] = found
    return key


def security_key_words(text: str | None) -> list[str]:
    """The option as a client's config repeats it (a file made absolute)."""
    if not text:
        return []
    module_name, _, function = text.rpartition(":")
    if module_name.endswith(".py"):
        module_name = str(Path(module_name).resolve())
    return ["--security-key", f"{module_name}:{function}"]
