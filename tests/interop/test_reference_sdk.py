"""Interop with the MCS reference SDK (mcs-driver-core, mcs-orchestrator-base), as a user of
either SDK meets it: the reference's orchestrator over a CanDriver, hwbridge's Orchestrator
over a reference driver, and the capability checks the reference recommends."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from mcs.driver.core import BaseDriver, SupportsHealthcheck, SupportsNativeTools, ToolCallSignaling
from mcs.driver.core import DriverBinding as RefBinding
from mcs.driver.core import DriverMeta as RefMeta
from mcs.driver.core import MCSDriver as RefDriver
from mcs.driver.core import MCSToolDriver as RefToolDriver
from mcs.driver.core import NativeToolContext as RefContext
from mcs.driver.core import Tool as RefTool
from mcs.driver.core import ToolParameter as RefParameter
from mcs.driver.core.mixins.healthcheck import HealthStatus
from mcs.orchestrator.base import BaseOrchestrator

from firmware_sim import VirtualVehicle
from hwbridge import (
    Capability,
    ConsentGate,
    DriverMeta,
    NativeToolContext,
    Orchestrator,
    SendPolicy,
)
from hwbridge.can import CanDriver
from hwbridge.interop import from_reference, to_reference
from tests.conftest import wait_until

DEMO = "dbc/demo_vehicle.dbc"


def text_call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


@pytest.fixture
def channel() -> str:
    return f"interop-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def car(channel: str) -> Iterator[CanDriver]:
    with (
        VirtualVehicle(DEMO, channel=channel, drive=False),
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as driver,
    ):
        assert wait_until(lambda: driver.healthcheck().status == "ok", 5.0)
        yield driver


# -- a reference driver, written as the reference SDK's examples write them ----------------


class Files(BaseDriver, SupportsHealthcheck):  # type: ignore[misc]
    """A reference BaseDriver: a tiny file store with a tool name no provider accepts."""

    meta = RefMeta(
        id="csv-localfs-demo",  # the reference does not insist on UUIDs
        name="Files",
        version="0.3",
        bindings=(RefBinding(capability="files", adapter="memory", spec_format="Custom"),),
        supported_llms=("*",),
        capabilities=("healthcheck",),
    )

    def __init__(self) -> None:
        super().__init__()
        self.files = {"a.csv": "x,y\n1,2\n"}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.status = HealthStatus.OK

    def list_tools(self) -> list[RefTool]:
        return [
            RefTool(name="files.list", title="List the files."),
            RefTool(
                name="read_file",
                description="Read one file.",
                parameters=[RefParameter(name="path", description="the file", required=True)],
            ),
            RefTool(
                name="write_file",
                description="Write one file.",
                parameters=[
                    RefParameter(name="path", description="the file", required=True),
                    RefParameter(
                        name="size",
                        description="bytes",
                        required=True,
                        schema={"type": "integer", "minimum": 0, "maximum": 100},
                    ),
                ],
            ),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((tool_name, arguments))
        if tool_name == "files.list":
            return sorted(self.files)
        if tool_name == "read_file":
            return self.files[arguments["path"]]  # KeyError for a missing file
        self.files[arguments["path"]] = "." * arguments["size"]
        return {"written": arguments["size"]}

    def healthcheck(self) -> Any:
        return {"status": self.status}


# -- capability names and methods mean the same in both SDKs -------------------------------


def test_hwbridge_drivers_pass_the_checks_the_reference_recommends(car: CanDriver) -> None:
    bench = Orchestrator({"car": car})
    gated = ConsentGate(car, lambda tool, arguments: False)
    for driver in (car, bench, gated):
        meta = driver.meta
        for contract in (RefDriver, RefToolDriver, ToolCallSignaling, SupportsNativeTools):
            assert meta.has_capability(contract), (driver, contract)
            assert RefMeta.resolve_capability(driver, contract) is driver
        # hwbridge's own names keep working beside the reference's
        assert meta.has_capability(Capability.TOOL_CALL_SIGNALING)
        assert meta.has_capability("tcs") and meta.has_capability("tool_call_signaling")
        assert not meta.has_capability("autostart")

    # what a reference client does once it has seen the flags
    tcs = RefMeta.resolve_capability(car, ToolCallSignaling)
    assert tcs.might_be_tool_call('{"to') and not tcs.might_be_tool_call("Hello")
    native = RefMeta.resolve_capability(car, SupportsNativeTools)
    context = native.get_native_tool_context("gpt-4o")
    assert isinstance(context, NativeToolContext) and context.tools is None
    assert "read_signals" in context.system_message  # the text path: tools in the prompt
    chosen = car.get_native_tool_context("gpt-4o", provider="openai")
    assert chosen.tools is not None
    assert {t["function"]["name"] for t in chosen.tools} == {t.name for t in car.list_tools()}
    assert "read_signals" not in chosen.system_message
    # the field names of the reference's NativeToolContext
    assert set(NativeToolContext.model_fields) == set(RefContext.__dataclass_fields__)

    health = RefMeta.resolve_capability(car, SupportsHealthcheck).healthcheck()
    assert health.get("status") is HealthStatus.OK and health["status"] is HealthStatus.OK
    assert health.status == "ok"  # still hwbridge's Health


def test_a_reference_wrapper_flags_what_it_wraps() -> None:
    class Marker:
        CAPABILITY = "marker"

    meta = CanDriver.meta
    assert not meta.has_capability(Marker)
    marked = meta.with_capability(Marker)
    assert marked.has_capability(Marker) and marked.with_capability(Marker) is marked
    assert isinstance(marked, DriverMeta)


# -- the reference orchestrator over a CanDriver's tools ------------------------------------


def test_the_reference_orchestrator_runs_a_can_driver(car: CanDriver) -> None:
    orchestrator = BaseOrchestrator()
    wrapped = to_reference(car)
    assert isinstance(wrapped, RefToolDriver) and isinstance(wrapped, SupportsHealthcheck)
    assert wrapped.meta.capabilities == ("orchestratable", "healthcheck")
    orchestrator.add_driver(wrapped, label="car")

    tools = {t.name: t for t in orchestrator.list_tools()}
    assert {"read_signals", "wait_for_signal", "decode_frame"} <= set(tools)
    assert "send_message" not in tools  # read-only policy: no send tool exists

    read = orchestrator.process_llm_response(
        text_call("read_signals", signals=["EngineSpeed"], timeout_ms=1000)
    )
    assert read.call_executed, read.call_detail
    values = json.loads(read.tool_call_result)["values"]
    assert 600 < values["EngineSpeed"]["value"] < 1000

    # hwbridge validates before anything runs; the reference reports the refusal as failed
    bad = orchestrator.process_llm_response(text_call("read_signals", signals="EngineSpeed"))
    assert bad.call_failed and "INVALID_ARGUMENTS" in (bad.call_detail or "")
    assert orchestrator.healthcheck() == {"status": HealthStatus.OK}


def test_the_reference_orchestrator_reports_a_send_refusal_as_failed(channel: str) -> None:
    with CanDriver.from_dbc(
        DEMO,
        bus=f"virtual:{channel}",
        policy=SendPolicy(
            allow_messages=["ClimateCommand"],
            signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)},
        ),
    ) as car:
        orchestrator = BaseOrchestrator()
        orchestrator.add_driver(to_reference(car), label="car")
        refused = orchestrator.process_llm_response(
            text_call("send_ClimateCommand", CabinSetpoint=29)
        )
        assert refused.call_failed and not refused.call_executed
        assert "OUT_OF_RANGE" in (refused.call_detail or "")
        sent = orchestrator.process_llm_response(text_call("send_ClimateCommand", CabinSetpoint=22))
        assert sent.call_executed, sent.call_detail
        assert json.loads(sent.tool_call_result)["message"] == "ClimateCommand"


def test_a_can_driver_also_works_unwrapped_in_the_reference_orchestrator(car: CanDriver) -> None:
    orchestrator = BaseOrchestrator()
    orchestrator.add_driver(car, label="car")
    assert orchestrator.healthcheck() == {"status": HealthStatus.OK}
    r = orchestrator.process_llm_response(text_call("bus_status"))
    assert r.call_executed, r.call_detail


# -- hwbridge's Orchestrator over a reference driver ----------------------------------------


def test_hwbridge_orchestrator_runs_a_reference_driver(car: CanDriver) -> None:
    files = Files()
    adapted = from_reference(files, read_only=["files.list", "read_file"])
    assert adapted.meta.name == "Files" and adapted.meta.version == "0.3.0"
    assert adapted.meta.id == from_reference(Files()).meta.id  # stable for a non-UUID id
    bench = Orchestrator({"car": car, "files": adapted})
    names = {t.name for t in bench.list_tools()}
    assert {"files_list", "read_file", "write_file", "read_signals"} <= names

    # an OpenAI tool call, answered in kind; the reference driver sees its own tool name
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "files_list", "arguments": "{}"},
            }
        ],
    }
    listed = bench.process_llm_response(message)
    assert listed.call_executed and listed.tool_call_result == ["a.csv"]
    assert listed.messages is not None and listed.messages[-1]["tool_call_id"] == "call_1"
    assert files.calls == [("files.list", {})]

    # arguments are validated before the reference driver sees them
    too_big = bench.process_llm_response(text_call("write_file", path="b.csv", size=500))
    assert too_big.call_failed and (too_big.call_detail or "").startswith("INVALID_ARGUMENTS")
    assert len(files.calls) == 1

    # the reference driver's exception is a failed call with its text, never a crash
    missing = bench.process_llm_response(text_call("read_file", path="nope.csv"))
    assert missing.call_failed
    assert (missing.call_detail or "").startswith("EXECUTION_FAILED: read_file failed:")
    assert "nope.csv" in (missing.retry_prompt or "")

    read = bench.process_llm_response(text_call("read_signals", signals=["EngineSpeed"]))
    assert read.call_executed, read.call_detail

    health = bench.healthcheck()
    assert health.parts["files"].status == "ok" and health.status == "ok"
    files.status = HealthStatus.ERROR
    assert bench.healthcheck().status == "down"


def test_a_consent_gate_asks_before_reference_tools_that_are_not_read_only() -> None:
    files = Files()
    asked: list[str] = []

    def ask(tool: str, arguments: dict[str, Any]) -> bool:
        asked.append(tool)
        return False

    gated = ConsentGate(from_reference(files, read_only=["files.list", "read_file"]), ask)
    assert gated.process_llm_response(text_call("files_list")).call_executed
    denied = gated.process_llm_response(text_call("write_file", path="c.csv", size=3))
    assert denied.call_failed and (denied.call_detail or "").startswith("CONSENT_DENIED")
    assert asked == ["write_file"] and "c.csv" not in files.files


def test_a_read_only_name_the_driver_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="read_only names tools"):
        from_reference(Files(), read_only=["list_fils"])


def test_both_ways_round_trip(car: CanDriver) -> None:
    """A CanDriver wrapped for the reference, then back: the same tools and answers."""
    back = from_reference(to_reference(car), read_only=[t.name for t in car.list_tools()])
    assert [t.name for t in back.list_tools()] == [t.name for t in car.list_tools()]
    r = back.process_llm_response(text_call("describe_message", message="EngineData"))
    assert r.call_executed
    assert (
        r.tool_call_result
        == car.process_llm_response(
            text_call("describe_message", message="EngineData")
        ).tool_call_result
    )


def test_without_the_mcs_extra_the_import_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import sys

    for name in [m for m in sys.modules if m.startswith("hwbridge.interop")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("mcs", "mcs.driver", "mcs.driver.core"):
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'mcs-hwbridge\[mcs\]'"):
        importlib.import_module("hwbridge.interop")
