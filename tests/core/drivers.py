"""Real HybridDriver subclasses used by the core tests (no mocks of our own code)."""

from __future__ import annotations

import threading
from typing import Any

from hwbridge import DriverBinding, DriverMeta, HybridDriver, Tool, ToolError, ToolParameter

ROOM = ToolParameter(
    name="room",
    description="which room",
    required=True,
    schema={"type": "string", "enum": ["living_room", "kitchen"]},
)
CELSIUS = ToolParameter(
    name="celsius",
    description="target temperature",
    required=True,
    schema={"type": "number", "minimum": 5, "maximum": 30},
)


class Thermostat(HybridDriver):
    """A small driver whose executions are recorded so tests can prove what ran."""

    meta = DriverMeta(
        id="6f0e1a52-8d3b-4c1e-9a57-2b1f0c3d4e5f",
        name="Thermostat",
        version="1.0.0",
        bindings=[DriverBinding(capability="thermostat", adapter="memory", spec_format="Custom")],
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.executed: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name="get_temperature", description="Read a room's temperature.", parameters=[ROOM]
            ),
            Tool(
                name="set_temperature",
                description="Change a room's setpoint.",
                parameters=[
                    ROOM,
                    CELSIUS,
                    ToolParameter(
                        name="mode", schema={"type": "string", "enum": ["eco", "comfort"]}
                    ),
                ],
            ),
            Tool(
                name="fail",
                title="Fails on purpose",
                parameters=[
                    ToolParameter(
                        name="kind",
                        required=True,
                        schema={"type": "string", "enum": ["tool_error", "retryable", "crash"]},
                    )
                ],
            ),
            Tool(
                name="echo",
                description="Returns what it is given.",
                parameters=[
                    ToolParameter(name="text", schema={"type": "string"}),
                    ToolParameter(name="count", schema={"type": "integer", "minimum": 0}),
                    ToolParameter(
                        name="tags", schema={"type": "array", "items": {"type": "string"}}
                    ),
                ],
            ),
            Tool(
                name="big",
                description="Returns a large result.",
                parameters=[ToolParameter(name="size", required=True, schema={"type": "integer"})],
            ),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        with self._lock:
            self.executed.append((tool_name, arguments))
        if tool_name == "get_temperature":
            return {"room": arguments["room"], "celsius": 21.5}
        if tool_name == "set_temperature":
            return {"room": arguments["room"], "setpoint": arguments["celsius"]}
        if tool_name == "fail":
            if arguments["kind"] == "tool_error":
                raise ToolError("HEATER_OFFLINE", "The heater does not answer.")
            if arguments["kind"] == "retryable":
                raise ToolError("BUSY", "The heater is busy.", retryable=True)
            raise RuntimeError("secret internal detail /etc/passwd")
        if tool_name == "echo":
            return dict(arguments)
        if tool_name == "big":
            return {"data": "x" * arguments["size"]}
        raise AssertionError(f"unexpected tool {tool_name}")
