"""The CAN bridge: python-can transports, cantools databases, tools an LLM can call."""

from typing import TYPE_CHECKING, Any

from hwbridge.can.database import (
    CanDatabase,
    DatabaseError,
    DatabaseImportWarning,
    DatabaseRepairWarning,
)
from hwbridge.can.driver import CanDriver
from hwbridge.can.tools import CanToolDriver, FrameHook, counter_and_checksum, xor_checksum
from hwbridge.policy import SendPolicy, SendRequest

if TYPE_CHECKING:
    from hwbridge.can.discovery.api import discover

__all__ = [
    "CanDatabase",
    "CanDriver",
    "CanToolDriver",
    "DatabaseError",
    "DatabaseImportWarning",
    "DatabaseRepairWarning",
    "FrameHook",
    "SendPolicy",
    "SendRequest",
    "counter_and_checksum",
    "discover",
    "xor_checksum",
]


def __getattr__(name: str) -> Any:
    # discover needs numpy (the `discovery` extra): imported on first use only
    if name == "discover":
        from hwbridge.can.discovery.api import discover

        return discover
    raise AttributeError(f"module 'hwbridge.can' has no attribute {name!r}")
