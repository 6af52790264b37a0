"""The CAN bridge: python-can transports, cantools databases, tools an LLM can call."""

from hwbridge.can.database import CanDatabase, DatabaseError, DatabaseRepairWarning
from hwbridge.can.driver import CanDriver
from hwbridge.can.policy import SendPolicy, SendRequest
from hwbridge.can.sending import FrameHook, counter_and_checksum, xor_checksum
from hwbridge.can.tools import CanToolDriver

__all__ = [
    "CanDatabase",
    "CanDriver",
    "CanToolDriver",
    "DatabaseError",
    "DatabaseRepairWarning",
    "FrameHook",
    "SendPolicy",
    "SendRequest",
    "counter_and_checksum",
    "xor_checksum",
]
