"""The CAN bridge: python-can transports, cantools databases, tools an LLM can call.

Names are imported on first use: decoding a capture needs the databases, not the driver,
its tools or python-can's buses.
"""

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_names

if TYPE_CHECKING:
    from hwbridge.can.database import (
        CanDatabase,
        DatabaseError,
        DatabaseImportWarning,
        DatabaseRepairWarning,
    )
    from hwbridge.can.driver import CanDriver
    from hwbridge.can.tools import (
        CanToolDriver,
        FrameHook,
        counter_and_checksum,
        xor_checksum,
    )
    from hwbridge.discovery.api import discover
    from hwbridge.policy import SendPolicy, SendRequest

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

_LAZY = {
    "CanDatabase": "hwbridge.can.database",
    "DatabaseError": "hwbridge.can.database",
    "DatabaseImportWarning": "hwbridge.can.database",
    "DatabaseRepairWarning": "hwbridge.can.database",
    "CanDriver": "hwbridge.can.driver",
    "CanToolDriver": "hwbridge.can.tools",
    "FrameHook": "hwbridge.can.tools",
    "counter_and_checksum": "hwbridge.can.tools",
    "xor_checksum": "hwbridge.can.tools",
    "SendPolicy": "hwbridge.policy",
    "SendRequest": "hwbridge.policy",
    "discover": "hwbridge.discovery.api",  # needs numpy (the `discovery` extra)
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
