"""hwbridge: Model Context Standard drivers that let any LLM read a CAN bus and talk to hardware.

This module only re-exports the public API.
"""

import importlib
from typing import TYPE_CHECKING, Any

from hwbridge.__about__ import __version__
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

if TYPE_CHECKING:
    from hwbridge.can import CanDatabase, CanDriver, counter_and_checksum
    from hwbridge.obd import ObdDriver
    from hwbridge.policy import SendPolicy
    from hwbridge.serial import SerialDriver

# The bridges are imported on first use, so that the core alone loads neither python-can nor
# pyserial.
_LAZY = {
    "CanDriver": "hwbridge.can",
    "CanDatabase": "hwbridge.can",
    "SendPolicy": "hwbridge.policy",
    "ObdDriver": "hwbridge.obd",
    "SerialDriver": "hwbridge.serial",
    "counter_and_checksum": "hwbridge.can",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hwbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
