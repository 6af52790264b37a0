"""hwbridge: Model Context Standard drivers that let any LLM read a CAN bus and talk to hardware.

This module only re-exports the public API.
"""

from typing import TYPE_CHECKING

from hwbridge.__about__ import __version__
from hwbridge._lazy import lazy_names

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

# Everything is imported on first use: `hwbridge --help` loads neither pydantic nor the core,
# and the core alone loads neither python-can nor pyserial.
_LAZY = {
    "AuditLog": "hwbridge.core",
    "CallOutcome": "hwbridge.core",
    "Capability": "hwbridge.core",
    "ChatClient": "hwbridge.core",
    "ChatSetup": "hwbridge.core",
    "ChatTurn": "hwbridge.core",
    "ConsentGate": "hwbridge.core",
    "DriverBinding": "hwbridge.core",
    "DriverMeta": "hwbridge.core",
    "DriverResponse": "hwbridge.core",
    "DriverTrustError": "hwbridge.core",
    "ExecutionCancelled": "hwbridge.core",
    "Health": "hwbridge.core",
    "Hooks": "hwbridge.core",
    "HybridDriver": "hwbridge.core",
    "MCSDriver": "hwbridge.core",
    "MCSToolDriver": "hwbridge.core",
    "NativeToolContext": "hwbridge.core",
    "Orchestrator": "hwbridge.core",
    "PromptPackError": "hwbridge.core",
    "PromptStrategy": "hwbridge.core",
    "ProviderError": "hwbridge.core",
    "RateLimit": "hwbridge.core",
    "RawSpec": "hwbridge.core",
    "Runner": "hwbridge.core",
    "RunResult": "hwbridge.core",
    "Step": "hwbridge.core",
    "Tool": "hwbridge.core",
    "ToolCall": "hwbridge.core",
    "ToolError": "hwbridge.core",
    "ToolParameter": "hwbridge.core",
    "TrustManifest": "hwbridge.core",
    "Usage": "hwbridge.core",
    "estimate_tokens": "hwbridge.core",
    "load_driver": "hwbridge.core",
    "CanDriver": "hwbridge.can",
    "CanDatabase": "hwbridge.can",
    "SendPolicy": "hwbridge.policy",
    "ObdDriver": "hwbridge.obd",
    "J1939Driver": "hwbridge.j1939",
    "SerialDriver": "hwbridge.serial",
    "counter_and_checksum": "hwbridge.can",
}


# no __dir__ here: the API reference documents these names where they are defined
__getattr__, _ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "AuditLog",
    "CallOutcome",
    "CanDatabase",
    "CanDriver",
    "Capability",
    "ChatClient",
    "ChatSetup",
    "ChatTurn",
    "ConsentGate",
    "DriverBinding",
    "DriverMeta",
    "DriverResponse",
    "DriverTrustError",
    "ExecutionCancelled",
    "Health",
    "Hooks",
    "HybridDriver",
    "J1939Driver",
    "MCSDriver",
    "MCSToolDriver",
    "NativeToolContext",
    "ObdDriver",
    "Orchestrator",
    "PromptPackError",
    "PromptStrategy",
    "ProviderError",
    "RateLimit",
    "RawSpec",
    "RunResult",
    "Runner",
    "SendPolicy",
    "SerialDriver",
    "Step",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolParameter",
    "TrustManifest",
    "Usage",
    "__version__",
    "counter_and_checksum",
    "estimate_tokens",
    "load_driver",
]
