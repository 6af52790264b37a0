"""The MCS standard itself: contract, models, prompt packs, parsing, HybridDriver.

Imports neither python-can nor pyserial.
"""

from hwbridge.core.contract import Capability, MCSDriver, MCSToolDriver
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
from hwbridge.core.prompts import PromptPackError, PromptStrategy, estimate_tokens

__all__ = [
    "Capability",
    "DriverBinding",
    "DriverMeta",
    "DriverResponse",
    "HybridDriver",
    "MCSDriver",
    "MCSToolDriver",
    "PromptPackError",
    "PromptStrategy",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolParameter",
    "TrustManifest",
    "estimate_tokens",
]
