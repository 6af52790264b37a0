"""The tools built from a database: read, wait, capture, decode, and the send tools that
pass the SendPolicy; typed read_<Message> / send_<Message> tools; the CanToolDriver."""

from hwbridge._lazy import lazy_package
from hwbridge.can.tools.sending import FrameHook, HookFactory, counter_and_checksum, xor_checksum
from hwbridge.can.tools.tool_driver import CanToolDriver, Exposure

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
