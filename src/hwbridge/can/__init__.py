"""The CAN bridge: python-can transports, cantools databases, tools an LLM can call.

Names are imported on first use: decoding a capture needs the databases, not the driver,
its tools or python-can's buses.
"""

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_package

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

# the public names are the imports above (written once): loaded on first use
__getattr__, __dir__ = lazy_package(globals())
