"""The MCS standard itself: contract, models, prompt packs, parsing, HybridDriver.

Imports neither python-can nor pyserial.
"""

from hwbridge.core.contract import Capability, MCSDriver, MCSToolDriver
from hwbridge.core.decorators import AuditLog, ConsentGate, Hooks, RateLimit, ToolDriverDecorator
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import (
    DriverBinding,
    DriverMeta,
    DriverResponse,
    Tool,
    ToolCall,
    ToolError,
    ToolParameter,
    TrustManifest,
)
from hwbridge.core.orchestrator import Orchestrator
from hwbridge.core.prompts import PromptPackError, PromptStrategy, estimate_tokens

__all__ = [
    "AuditLog",
    "Capability",
    "ConsentGate",
    "DriverBinding",
    "DriverMeta",
    "DriverResponse",
    "Hooks",
    "HybridDriver",
    "MCSDriver",
    "MCSToolDriver",
    "Orchestrator",
    "PromptPackError",
    "PromptStrategy",
    "RateLimit",
    "Tool",
    "ToolCall",
    "ToolDriverDecorator",
    "ToolError",
    "ToolParameter",
    "TrustManifest",
    "estimate_tokens",
]
