"""The MCS standard itself: contract, models, prompt packs, parsing, HybridDriver.

Imports neither python-can nor pyserial. Each name is imported on first use, so that a
module of the core (`hwbridge.core.errors`, `hwbridge.core.models`) loads without the
rest of it.
"""

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_package

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

# the public names are the imports above (written once): loaded on first use
__getattr__, __dir__ = lazy_package(globals())
