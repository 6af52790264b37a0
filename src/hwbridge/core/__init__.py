"""The MCS standard itself: contract, models, prompt packs, parsing, HybridDriver.

Imports neither python-can nor pyserial.
"""

from hwbridge.core.aio import ExecutionCancelled
from hwbridge.core.contract import Capability, MCSDriver, MCSToolDriver
from hwbridge.core.decorators import AuditLog, ConsentGate, Hooks, RateLimit, ToolDriverDecorator
from hwbridge.core.health import Health, RawSpec
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import (
    DriverBinding,
    DriverMeta,
    DriverResponse,
    NativeToolContext,
    Tool,
    ToolCall,
    ToolError,
    ToolParameter,
    TrustManifest,
)
from hwbridge.core.orchestrator import Orchestrator
from hwbridge.core.prompts import PromptPackError, PromptStrategy, estimate_tokens
from hwbridge.core.runner import (
    CallOutcome,
    ChatClient,
    ChatSetup,
    ChatTurn,
    ProviderError,
    Runner,
    RunResult,
    Step,
    Usage,
)
from hwbridge.core.trust import (
    DriverTrustError,
    installed_drivers,
    load_driver,
    verify_distribution,
    wheel_digest,
)

__all__ = [
    "AuditLog",
    "CallOutcome",
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
    "Orchestrator",
    "PromptPackError",
    "PromptStrategy",
    "ProviderError",
    "RateLimit",
    "RawSpec",
    "RunResult",
    "Runner",
    "Step",
    "Tool",
    "ToolCall",
    "ToolDriverDecorator",
    "ToolError",
    "ToolParameter",
    "TrustManifest",
    "Usage",
    "estimate_tokens",
    "installed_drivers",
    "load_driver",
    "verify_distribution",
    "wheel_digest",
]
