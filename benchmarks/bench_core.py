"""`process_llm_response` per call: hwbridge's HybridDriver against mcs-driver-core's BaseDriver.

Both drivers expose the same two tools (same parameters, same JSON Schemas), return the
tool list from a prebuilt list, and share one trivial `execute_tool`. Each scenario is
checked before it is timed (the call is really executed, with the expected result) and
counted after (every timed call reached `execute_tool`), so no-ops are never timed.

hwbridge validates the arguments against the JSON Schemas on every call; mcs-driver-core
does not, so hwbridge does strictly more work per call. The result to read is the ratio
(theirs / ours); absolute microseconds depend on the machine.
"""

from __future__ import annotations

import json
import platform
import timeit
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from hwbridge import DriverBinding, DriverMeta, HybridDriver, Tool, ToolParameter

REPEATS = 7
TARGET_SECONDS = 0.2  # per repeat
GOAL = 2.0

ROOMS = ["living_room", "bedroom", "kitchen"]
ROOM_SCHEMA: dict[str, Any] = {"type": "string", "enum": ROOMS}
CELSIUS_SCHEMA: dict[str, Any] = {"type": "number", "minimum": 5, "maximum": 30}
TOOL_SPECS: list[tuple[str, str, list[tuple[str, str, dict[str, Any]]]]] = [
    ("get_temperature", "Read a room's setpoint.", [("room", "The room.", ROOM_SCHEMA)]),
    (
        "set_temperature",
        "Change a room's setpoint.",
        [("room", "The room.", ROOM_SCHEMA), ("celsius", "Setpoint in degC.", CELSIUS_SCHEMA)],
    ),
]
META_ID = "6f0e1a52-8d3b-4c1e-9a57-2b1f0c3d4e5f"

CALL_ARGS: dict[str, Any] = {"room": "living_room", "celsius": 21.5}
EXPECTED: dict[str, Any] = {"ok": True, "room": "living_room", "celsius": 21.5}
TEXT_CALL = '{"tool": "set_temperature", "arguments": {"room": "living_room", "celsius": 21.5}}'
PLAIN_ANSWER = (
    "The living room is currently set to 21 degrees, which is a comfortable temperature for "
    "the evening. If you would like it warmer or cooler, tell me the temperature you prefer "
    "and I will change the setpoint. The bedroom and the kitchen are both at 19 degrees."
)
PROSE_CALL = (
    "Sure, I will make the living room a little warmer for you.\n\n```json\n"
    + TEXT_CALL
    + "\n```\n"
)
OPENAI_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_7dYx2kQ9",
            "type": "function",
            "function": {"name": "set_temperature", "arguments": json.dumps(CALL_ARGS)},
        }
    ],
}
OUT_OF_RANGE = '{"tool": "set_temperature", "arguments": {"room": "living_room", "celsius": 99}}'


def thermostat(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The one `execute_tool` body both drivers run."""
    if tool_name == "get_temperature":
        return {"ok": True, "room": arguments["room"], "celsius": 21.0}
    return {"ok": True, "room": arguments["room"], "celsius": arguments["celsius"]}


# -- hwbridge ---------------------------------------------------------------------------


class HwThermostat(HybridDriver):
    meta = DriverMeta(
        id=META_ID,
        name="Thermostat",
        version="1.0.0",
        bindings=[DriverBinding(capability="thermostat", adapter="memory", spec_format="Custom")],
    )

    def __init__(self) -> None:
        super().__init__()
        self.executed = 0
        self._tools = [
            Tool(
                name=name,
                description=description,
                parameters=[
                    ToolParameter(name=p, description=d, required=True, schema=s)
                    for p, d, s in params
                ],
            )
            for name, description, params in TOOL_SPECS
        ]

    def list_tools(self) -> list[Tool]:
        return self._tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.executed += 1
        return thermostat(tool_name, arguments)


# -- mcs-driver-core --------------------------------------------------------------------


def make_mcs_driver() -> Any | None:
    """An mcs-driver-core BaseDriver with the same tools, or None when it is not installed."""
    try:
        from mcs.driver.core import BaseDriver as McsBaseDriver
        from mcs.driver.core import DriverBinding as McsBinding
        from mcs.driver.core import DriverMeta as McsMeta
        from mcs.driver.core import Tool as McsTool
        from mcs.driver.core import ToolParameter as McsParameter
    except ImportError:
        return None

    class McsThermostat(McsBaseDriver):  # type: ignore[misc]  # untyped package
        meta = McsMeta(
            id=META_ID,
            name="Thermostat",
            version="1.0.0",
            bindings=(McsBinding(capability="thermostat", adapter="memory", spec_format="Custom"),),
            supported_llms=("*",),
            capabilities=(),
        )

        def __init__(self) -> None:
            super().__init__()
            self.executed = 0
            self._tools = [
                McsTool(
                    name=name,
                    description=description,
                    parameters=[
                        McsParameter(name=p, description=d, required=True, schema=s)
                        for p, d, s in params
                    ],
                )
                for name, description, params in TOOL_SPECS
            ]

        def list_tools(self) -> list[Any]:
            return self._tools

        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            self.executed += 1
            return thermostat(tool_name, arguments)

    return McsThermostat()


# -- checks -----------------------------------------------------------------------------


class BenchmarkError(AssertionError):
    """A driver did not do what the benchmark is about to time (raised even under -O)."""


def require(ok: bool, message: str) -> None:
    if not ok:
        raise BenchmarkError(message)


def check_hwbridge(driver: HwThermostat, output: Any, *, call: bool) -> None:
    before = driver.executed
    r = driver.process_llm_response(output)
    if call:
        require(r.call_executed, f"hwbridge did not execute the call: {r!r}")
        require(not r.call_failed, f"hwbridge reported a failure: {r!r}")
        require(r.tool_call_result == EXPECTED, f"hwbridge result: {r.tool_call_result!r}")
        require(driver.executed == before + 1, "hwbridge did not reach execute_tool once")
    else:
        require(r.is_final_answer, f"hwbridge saw a call in a plain answer: {r!r}")
        require(r.messages is None, f"hwbridge built messages for a plain answer: {r!r}")
        require(driver.executed == before, "hwbridge ran execute_tool on a plain answer")


def check_mcs(driver: Any, output: Any, *, call: bool) -> None:
    before = driver.executed
    r = driver.process_llm_response(output)
    if call:
        require(r.call_executed, f"mcs-driver-core did not execute the call: {r!r}")
        require(not r.call_failed, f"mcs-driver-core reported a failure: {r!r}")
        result = json.loads(r.tool_call_result)  # it returns the result as JSON text
        require(result == EXPECTED, f"mcs-driver-core result: {r.tool_call_result!r}")
        require(driver.executed == before + 1, "mcs-driver-core did not reach execute_tool once")
    else:
        require(not r.call_executed, f"mcs-driver-core executed a plain answer: {r!r}")
        require(not r.call_failed, f"mcs-driver-core saw a call in a plain answer: {r!r}")
        require(driver.executed == before, "mcs-driver-core ran execute_tool on a plain answer")


def check_validation(mcs_driver: Any | None) -> None:
    """hwbridge must reject an out-of-range argument; report what mcs-driver-core does."""
    hw = HwThermostat()
    r = hw.process_llm_response(OUT_OF_RANGE)
    require(r.call_failed, f"hwbridge did not reject celsius=99: {r!r}")
    require(not r.call_executed, f"hwbridge executed celsius=99: {r!r}")
    require(hw.executed == 0, "hwbridge passed celsius=99 to execute_tool")
    print(
        "validation: hwbridge rejects celsius=99 (maximum 30) before execute_tool "
        f"({r.call_detail})"
    )
    if mcs_driver is None:
        return
    theirs = mcs_driver.process_llm_response(OUT_OF_RANGE)
    if theirs.call_executed and mcs_driver.executed == 1:
        print(
            "validation: mcs-driver-core does not validate arguments: "
            "it passed celsius=99 to execute_tool"
        )
    else:
        print(f"validation: mcs-driver-core did not execute celsius=99 ({theirs.call_detail})")


# -- timing -----------------------------------------------------------------------------


def calibrate(timer: timeit.Timer) -> int:
    """Calls per repeat so that a repeat takes about TARGET_SECONDS (like Timer.autorange)."""
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= TARGET_SECONDS / 5:
            return max(number, round(number * TARGET_SECONDS / elapsed))
        number *= 10


@dataclass(frozen=True)
class Scenario:
    label: str
    output: Any
    call: bool
    goal: bool


SCENARIOS = [
    Scenario("text call", TEXT_CALL, call=True, goal=True),
    Scenario("plain answer", PLAIN_ANSWER, call=False, goal=True),
    Scenario("call in prose", PROSE_CALL, call=True, goal=False),
    Scenario("openai tool_calls", OPENAI_CALL, call=True, goal=False),
]


def timed(driver: Any, scenario: Scenario) -> float:
    """Best of REPEATS repeats, in us/call; then checks every timed call was executed."""
    timer = timeit.Timer(
        "fn(arg)", globals={"fn": driver.process_llm_response, "arg": scenario.output}
    )
    number = calibrate(timer)
    driver.executed = 0
    best = min(timer.repeat(repeat=REPEATS, number=number))
    expected = REPEATS * number if scenario.call else 0
    require(
        driver.executed == expected,
        f"{scenario.label}: {driver.executed} executions for {REPEATS} x {number} timed calls",
    )
    return best / number * 1e6


def verdict(ours: float, theirs: float, goal: bool) -> str:
    ratio = theirs / ours
    text = f"{ratio:.2f}x faster" if ratio >= 1 else f"{ratio:.2f}x, i.e. hwbridge is slower"
    if goal:
        met = "met" if ratio >= GOAL else "MISSED"
        return f"{text} (goal >= {GOAL:g}x {met}, validating arguments)"
    return f"{text} (no goal, validating arguments)"


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    mcs_probe = make_mcs_driver()
    print(
        f"python {platform.python_version()}, mcs-hwbridge {version('mcs-hwbridge')}, "
        f"mcs-driver-core {version('mcs-driver-core')}; best of {REPEATS} repeats of "
        f"~{TARGET_SECONDS:g} s; ratio = mcs-driver-core time / hwbridge time"
    )
    if mcs_probe is None:
        print(
            "mcs-driver-core is not installed: timing hwbridge only. Run `make bench` "
            "(or `.venv/bin/pip install mcs-driver-core`) for the comparison."
        )
    check_validation(mcs_probe)

    for scenario in SCENARIOS:
        ours = HwThermostat()
        check_hwbridge(ours, scenario.output, call=scenario.call)
        ours_us = timed(ours, scenario)
        theirs = make_mcs_driver()
        if theirs is None:
            print(f"{scenario.label}: hwbridge {ours_us:.1f} us/call")
            continue
        check_mcs(theirs, scenario.output, call=scenario.call)
        theirs_us = timed(theirs, scenario)
        print(
            f"{scenario.label}: hwbridge {ours_us:.1f} us/call, mcs-driver-core "
            f"{theirs_us:.1f} us/call -> {verdict(ours_us, theirs_us, scenario.goal)}"
        )
    if mcs_probe is not None:
        print(
            "hwbridge validates every call's arguments against the JSON Schemas; "
            "mcs-driver-core does not validate arguments."
        )


if __name__ == "__main__":
    main()
