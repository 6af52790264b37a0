"""The MCS standard itself: contract, models, prompt packs, parsing, HybridDriver.

Imports neither python-can nor pyserial. Each name is imported on first use, so that a
module of the core (`hwbridge.core.errors`, `hwbridge.core.models`) loads without the
rest of it.
"""

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_names

if TYPE_CHECKING:
    from hwbridge.core.aio import ExecutionCancelled
    from hwbridge.core.contract import Capability, MCSDriver, MCSToolDriver
    from hwbridge.core.decorators import (
        AuditLog,
        ConsentGate,
        Hooks,
        RateLimit,
        ToolDriverDecorator,
    )
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

_LAZY = {
    "AuditLog": "hwbridge.core.decorators",
    "CallOutcome": "hwbridge.core.runner",
    "Capability": "hwbridge.core.contract",
    "ChatClient": "hwbridge.core.runner",
    "ChatSetup": "hwbridge.core.runner",
    "ChatTurn": "hwbridge.core.runner",
    "ConsentGate": "hwbridge.core.decorators",
    "DriverBinding": "hwbridge.core.models",
    "DriverMeta": "hwbridge.core.models",
    "DriverResponse": "hwbridge.core.models",
    "DriverTrustError": "hwbridge.core.trust",
    "ExecutionCancelled": "hwbridge.core.aio",
    "Health": "hwbridge.core.health",
    "Hooks": "hwbridge.core.decorators",
    "HybridDriver": "hwbridge.core.hybrid",
    "MCSDriver": "hwbridge.core.contract",
    "MCSToolDriver": "hwbridge.core.contract",
    "NativeToolContext": "hwbridge.core.models",
    "Orchestrator": "hwbridge.core.orchestrator",
    "PromptPackError": "hwbridge.core.prompts",
    "PromptStrategy": "hwbridge.core.prompts",
    "ProviderError": "hwbridge.core.runner",
    "RateLimit": "hwbridge.core.decorators",
    "RawSpec": "hwbridge.core.health",
    "RunResult": "hwbridge.core.runner",
    "Runner": "hwbridge.core.runner",
    "Step": "hwbridge.core.runner",
    "Tool": "hwbridge.core.models",
    "ToolCall": "hwbridge.core.models",
    "ToolDriverDecorator": "hwbridge.core.decorators",
    "ToolError": "hwbridge.core.errors",
    "ToolParameter": "hwbridge.core.models",
    "TrustManifest": "hwbridge.core.models",
    "Usage": "hwbridge.core.runner",
    "estimate_tokens": "hwbridge.core.prompts",
    "installed_drivers": "hwbridge.core.trust",
    "load_driver": "hwbridge.core.trust",
    "verify_distribution": "hwbridge.core.trust",
    "wheel_digest": "hwbridge.core.trust",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


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
