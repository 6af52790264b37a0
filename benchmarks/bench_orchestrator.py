"""The Orchestrator's overhead per call: the same call through an Orchestrator holding the
driver (and two others) against the driver's own `process_llm_response`, in one run.

Goal (issue 11): at most 1.2x the direct call. Both paths validate the arguments once and
run the same `execute_tool`; the count of executions is checked after timing.
"""

from __future__ import annotations

import timeit
from typing import Any

from benchmarks.bench_core import TEXT_CALL, HwThermostat
from hwbridge import DriverBinding, DriverMeta, HybridDriver, Orchestrator, Tool, ToolParameter

REPEATS = 7
NUMBER = 20_000
GOAL = 1.2

OPENAI_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {
                "name": "set_temperature",
                "arguments": '{"room": "living_room", "celsius": 21.5}',
            },
        }
    ],
}


class _Other(HybridDriver):
    """A bystander driver with a few tools, so the orchestrator really routes."""

    meta = DriverMeta(
        id="5e7a1c3b-2d4f-4a6e-8b0c-9d1e3f5a7b2c",
        name="Other",
        version="1.0.0",
        bindings=[DriverBinding(capability="other", adapter="memory", spec_format="Custom")],
    )

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def list_tools(self) -> list[Tool]:
        p = ToolParameter(name="x", schema={"type": "integer"})
        return [
            Tool(name=f"{self.prefix}_{i}", description="Another tool.", parameters=[p])
            for i in range(5)
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return {}


def _time(fn: Any) -> float:
    return min(timeit.repeat(fn, number=NUMBER, repeat=REPEATS)) / NUMBER


def main() -> None:
    direct = HwThermostat()
    inner = HwThermostat()
    orch = Orchestrator({"a": _Other("a"), "thermo": inner, "b": _Other("b")})
    for name, output in (("text call", TEXT_CALL), ("openai tool_calls", OPENAI_CALL)):
        assert direct.process_llm_response(output).call_executed
        assert orch.process_llm_response(output).call_executed
        before_direct, before_orch = direct.executed, inner.executed
        t_direct = _time(lambda output=output: direct.process_llm_response(output))
        t_orch = _time(lambda output=output: orch.process_llm_response(output))
        runs = REPEATS * NUMBER
        assert direct.executed - before_direct == runs
        assert inner.executed - before_orch == runs
        ratio = t_orch / t_direct
        verdict = "goal met" if ratio <= GOAL else "GOAL MISSED"
        print(
            f"{name}: direct {t_direct * 1e6:.2f} us/call, through the Orchestrator "
            f"{t_orch * 1e6:.2f} us/call -> {ratio:.2f}x (goal <= {GOAL}x: {verdict})"
        )


if __name__ == "__main__":
    main()
