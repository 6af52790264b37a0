"""The two MCS interfaces (spec sections 3 and 4) and the capability flags a driver declares.

`MCSToolDriver` is the technical bridge (no LLM knowledge); `MCSDriver` is what a client or
an LLM loop talks to. `HybridDriver` implements both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import StrEnum
from typing import Any, TypeVar, cast

from hwbridge.core.aio import CallJob, run_in_worker
from hwbridge.core.models import DriverMeta, DriverResponse, Tool

__all__ = ["Capability", "MCSDriver", "MCSToolDriver"]

T = TypeVar("T")


class Capability(StrEnum):
    """Capability flags a driver lists in `DriverMeta.capabilities`.

    A flag both SDKs define means the same in both: the MCS reference SDK (mcs-driver-core)
    names tool-call signaling `tcs`, so a driver that has it lists `tcs` beside hwbridge's
    own `tool_call_signaling`, and `native_tools` promises the reference's
    `get_native_tool_context(model)` as well as hwbridge's `get_native_tools(provider)`.
    """

    STANDALONE = "standalone"  # implements MCSDriver
    ORCHESTRATABLE = "orchestratable"  # implements MCSToolDriver
    TWO_PHASE = "two_phase"  # detect_tool_call / execute_tool_call (consent seam)
    TOOL_CALL_SIGNALING = "tool_call_signaling"  # might_be_tool_call / is_complete_tool_call
    TCS = "tcs"  # the same, under the reference SDK's name (ToolCallSignaling.CAPABILITY)
    # get_native_tool_context(model) (the reference's SupportsNativeTools) and
    # get_native_tools(provider) for provider function calling
    NATIVE_TOOLS = "native_tools"
    MULTI_CONNECTION = "multi_connection"  # several networks or ports in one driver
    HEALTHCHECK = "healthcheck"  # healthcheck() -> Health (bus or port state, counters, ages)
    RAW_SPEC = "raw_spec"  # raw_spec() -> {name: RawSpec}, the source specs as loaded


def _resolve_capability(driver: Any, contract: type[T]) -> T | None:
    """The driver itself when it honours `contract`, else None.

    This is the reference SDK's `SupportsCapabilityResolution`, which its
    `DriverMeta.resolve_capability(driver, contract)` asks before an isinstance check that an
    hwbridge driver cannot pass: a driver honours a contract (`SupportsNativeTools`,
    `ToolCallSignaling`, `SupportsHealthcheck`, ...) when it lists the contract's flag and
    has every method the contract declares.
    """
    if isinstance(driver, contract):
        return driver
    meta = getattr(driver, "meta", None)
    if meta is None or not meta.has_capability(contract):
        return None
    required: frozenset[str] = getattr(contract, "__abstractmethods__", frozenset())
    if all(callable(getattr(driver, name, None)) for name in required):
        return cast(T, driver)
    return None


class MCSDriver(ABC):
    """What a client uses: a system prompt, a tool description and a response processor."""

    CAPABILITY = Capability.STANDALONE.value  # what `DriverMeta.has_capability` looks for
    meta: DriverMeta
    resolve_capability = _resolve_capability

    @abstractmethod
    def get_function_description(self, model_name: str | None = None) -> str:
        """A machine-readable description of the tools, rendered for `model_name`."""

    @abstractmethod
    def get_driver_system_message(self, model_name: str | None = None) -> str:
        """A complete system prompt that embeds the function description."""

    @abstractmethod
    def process_llm_response(
        self, llm_response: str | dict[str, Any], *, streaming: bool = False
    ) -> DriverResponse:
        """Find and execute the tool calls in an LLM output. Never raises."""

    async def aprocess_llm_response(
        self, llm_response: str | dict[str, Any], *, streaming: bool = False
    ) -> DriverResponse:
        """`process_llm_response` for asyncio, in a worker thread (spec section 14).

        This default cannot tell reads from sends, so a cancelled await waits for the call
        to finish and raises `ExecutionCancelled` with its response; HybridDriver abandons
        reads at once.
        """

        def work(job: CallJob) -> DriverResponse:
            if not job.begin(True):
                return DriverResponse()
            return self.process_llm_response(llm_response, streaming=streaming)

        return await run_in_worker(work, name=f"hwbridge-call[{type(self).__name__}]")


class MCSToolDriver(ABC):
    """The technical bridge: which tools exist and how each one executes."""

    CAPABILITY = Capability.ORCHESTRATABLE.value
    meta: DriverMeta
    resolve_capability = _resolve_capability

    @abstractmethod
    def list_tools(self) -> list[Tool]:
        """The tools this driver offers."""

    @abstractmethod
    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """Run one tool and return its JSON-safe result; raise ToolError to fail cleanly."""
