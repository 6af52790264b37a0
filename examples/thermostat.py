"""An example driver: a thermostat with a read tool and a write tool that can refuse."""

from hwbridge import DriverBinding, DriverMeta, HybridDriver, Tool, ToolError, ToolParameter


class Thermostat(HybridDriver):
    meta = DriverMeta(
        id="6f0e1a52-8d3b-4c1e-9a57-2b1f0c3d4e5f",
        name="Thermostat",
        version="1.0.0",
        bindings=[DriverBinding(capability="thermostat", adapter="memory", spec_format="Custom")],
    )

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._setpoint = {"living_room": 21.0}

    def list_tools(self):
        room = ToolParameter(
            name="room", required=True, schema={"type": "string", "enum": ["living_room"]}
        )
        celsius = ToolParameter(
            name="celsius", required=True, schema={"type": "number", "minimum": 5, "maximum": 30}
        )
        return [
            Tool(name="get_temperature", description="Read a room's setpoint.", parameters=[room]),
            Tool(
                name="set_temperature",
                description="Change a room's setpoint.",
                parameters=[room, celsius],
            ),
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "get_temperature":
            return {"room": arguments["room"], "celsius": self._setpoint[arguments["room"]]}
        if arguments["celsius"] > 26 and arguments["room"] == "living_room":
            raise ToolError("TOO_WARM", "The living room is capped at 26 degC.")
        self._setpoint[arguments["room"]] = arguments["celsius"]
        return {"ok": True}


if __name__ == "__main__":
    driver = Thermostat()  # Thermostat(prompt_strategy="xml") picks another pack
    print(driver.get_driver_system_message())
    for output in [
        '{"tool": "get_temperature", "arguments": {"room": "living_room"}}',
        'Now: {"tool": "set_temperature", "arguments": {"room": "living_room", "celsius": 99}}',
        "It is 21 degrees in the living room.",
    ]:
        r = driver.process_llm_response(output)
        print(r.call_executed, r.call_failed, r.tool_call_result, r.retry_prompt)
