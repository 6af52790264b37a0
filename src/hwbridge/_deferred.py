"""asammdf imported when an MF4 file is read, not whenever python-can is.

`import can` imports asammdf (with pandas and numpy) for its MF4 reader and writer: about
0.4 s and 100 MB that `hwbridge decode drive.blf` or `hwbridge inspect --bus ...` never use.
The `hwbridge` command (its own process only) calls `defer_asammdf()` before anything
imports python-can; whatever reads MF4 calls `require_asammdf()` first, which imports
asammdf then and re-runs python-can's MF4 module so its reader and writer work as usual.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import cast

__all__ = ["defer_asammdf", "require_asammdf"]

_state = {"deferred": False}


def defer_asammdf() -> None:
    """Make `import asammdf` fail fast until `require_asammdf()`; python-can then loads
    without MF4 support. A no-op once asammdf or python-can is imported."""
    if "asammdf" in sys.modules or "can" in sys.modules:
        return
    sys.modules["asammdf"] = cast(ModuleType, None)
    _state["deferred"] = True


def require_asammdf() -> None:
    """Undo `defer_asammdf()`: import asammdf (ImportError if it is not installed) and give
    python-can its MF4 reader and writer back. A no-op when nothing was deferred."""
    if not _state["deferred"]:
        return
    _state["deferred"] = False
    if sys.modules.get("asammdf", False) is None:
        del sys.modules["asammdf"]
    importlib.import_module("asammdf")
    mf4 = sys.modules.get("can.io.mf4")
    if mf4 is not None:  # it ran without asammdf: run it again, in the same namespace
        importlib.reload(mf4)
