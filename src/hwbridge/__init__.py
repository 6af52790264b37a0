"""hwbridge: Model Context Standard drivers that let any LLM read a CAN bus and talk to hardware.

This module only re-exports the public API.
"""

from typing import TYPE_CHECKING

from hwbridge.__about__ import __version__
from hwbridge._lazy import lazy_package

if TYPE_CHECKING:
    from hwbridge.can import CanDatabase, CanDriver, counter_and_checksum
    from hwbridge.core import (
        AuditLog,
        CallOutcome,
        Capability,
        ChatClient,
        ChatSetup,
        ChatTurn,
        ConsentGate,
        DriverBinding,
        DriverMeta,
        DriverResponse,
        DriverTrustError,
        ExecutionCancelled,
        Health,
        Hooks,
        HybridDriver,
        MCSDriver,
        MCSToolDriver,
        NativeToolContext,
        Orchestrator,
        PromptPackError,
        PromptStrategy,
        ProviderError,
        RateLimit,
        RawSpec,
        Runner,
        RunResult,
        Step,
        Tool,
        ToolCall,
        ToolError,
        ToolParameter,
        TrustManifest,
        Usage,
        estimate_tokens,
        load_driver,
    )
    from hwbridge.j1939 import J1939Driver
    from hwbridge.obd import ObdDriver
    from hwbridge.policy import SendPolicy
    from hwbridge.serial import SerialDriver

# the public names are the imports above (written once), loaded on first use; no __dir__:
# the API reference documents them where they are defined
__getattr__, _ = lazy_package(globals())
