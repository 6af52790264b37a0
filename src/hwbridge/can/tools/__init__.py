"""The tools built from a database: read, wait, capture, decode, and the send tools that
pass the SendPolicy; typed read_<Message> / send_<Message> tools; the CanToolDriver."""

from hwbridge.can.tools.sending import FrameHook, HookFactory, counter_and_checksum, xor_checksum
from hwbridge.can.tools.tool_driver import CanToolDriver, Exposure

__all__ = [
    "CanToolDriver",
    "Exposure",
    "FrameHook",
    "HookFactory",
    "counter_and_checksum",
    "xor_checksum",
]
