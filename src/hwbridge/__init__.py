"""hwbridge: Model Context Standard drivers that let any LLM read a CAN bus and talk to hardware.

This module only re-exports the public API.
"""

from hwbridge.core import (
    Capability,
    DriverBinding,
    DriverMeta,
    DriverResponse,
    HybridDriver,
    MCSDriver,
    MCSToolDriver,
    PromptPackError,
    PromptStrategy,
    Tool,
    ToolCall,
    ToolError,
    ToolParameter,
    TrustManifest,
    estimate_tokens,
)

__version__ = "0.1.0"

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
    "__version__",
    "estimate_tokens",
]
