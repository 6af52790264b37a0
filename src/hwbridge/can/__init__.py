"""The CAN bridge: python-can transports, cantools databases, tools an LLM can call."""

from hwbridge.can.database import (
    CanDatabase,
    DatabaseError,
    DatabaseImportWarning,
    DatabaseRepairWarning,
)
from hwbridge.can.driver import CanDriver
from hwbridge.can.tools import CanToolDriver, FrameHook, counter_and_checksum, xor_checksum
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
    "xor_checksum",
]
