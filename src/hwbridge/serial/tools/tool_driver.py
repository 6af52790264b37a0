"""SerialToolDriver: the serial tools, from a device spec or for a bare port.

With a spec, every command is a typed tool named as the command (`measure_voltage`,
`set_voltage(volts)`); commands that change the device's state are offered only when the
policy allows them, and are the only tools that are not read-only. Without a spec, the
generic `serial_query` (when the policy allows raw lines) and `serial_read`. Both have
`port_status`. The tool driver knows nothing about LLMs (spec section 4).
"""

from __future__ import annotations

from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.policy import SendPolicy
from hwbridge.serial.spec.loader import LoadedSpec
from hwbridge.serial.spec.models import CommandSpec
from hwbridge.serial.tools.commands import CommandRunner
from hwbridge.serial.tools.port_tools import MAX_READ_MS, PortTools, require_monitor
from hwbridge.serial.tools.streaming import MAX_WAIT_MS, StreamReader
from hwbridge.serial.tools.texts import SerialTexts, serial_texts
from hwbridge.serial.transport.adapter import PySerialAdapter
from hwbridge.serial.transport.monitor import LineMonitor

__all__ = ["SerialToolDriver"]

_LINE_CHARS = 500
_TEXT_CHARS = 200
_MAX_DESCRIPTION = 1000


class SerialToolDriver(MCSToolDriver):
    """The tools of one port: a spec's commands, or the generic ones; immutable."""

    meta = DriverMeta(
        id="5a1f7c2e-93b4-4d0a-8e6f-1b2c3d4e5f60",
        name="hwbridge serial tools",
        version=__version__,
        bindings=[DriverBinding(capability="serial", adapter="pyserial", spec_format="TOML")],
        capabilities=["orchestratable"],
    )

    def __init__(
        self,
        spec: LoadedSpec | None,
        adapter: PySerialAdapter | None,
        monitor: LineMonitor | None,
        policy: SendPolicy,
        *,
        texts: SerialTexts | None = None,
    ) -> None:
        self.texts = texts or serial_texts()
        self.loaded = spec
        self.adapter = adapter
        self.monitor = monitor
        self.policy = policy
        self.runner: CommandRunner | None = None
        self.stream: StreamReader | None = None
        self.port_tools: PortTools | None = None
        if spec is not None and spec.spec.streaming:
            self.stream = StreamReader(spec.spec, monitor)
        elif spec is not None:
            self.runner = CommandRunner(spec, adapter, policy)
        elif monitor is not None:
            self.port_tools = PortTools(monitor, policy)
        self._tools = tuple(self._build_tools())
        self._names = frozenset(t.name for t in self._tools)

    # -- MCSToolDriver -------------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name not in self._names:
            raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver")
        if tool_name == "port_status":
            return self.port_status()
        if tool_name == "serial_query":
            tools = self._port_tools()
            return tools.query(
                arguments["line"], arguments.get("expect"), arguments.get("timeout_ms")
            )
        if tool_name == "serial_read":
            return self._port_tools().read(arguments.get("duration_ms"), arguments.get("until"))
        if self.stream is not None:
            return self.stream.read(tool_name, arguments)
        assert self.runner is not None
        return self.runner.run(tool_name, arguments)

    def _port_tools(self) -> PortTools:
        if self.port_tools is None:
            require_monitor(self.monitor)
        assert self.port_tools is not None
        return self.port_tools

    # -- tools ---------------------------------------------------------------------------------

    def _build_tools(self) -> list[Tool]:
        tools: list[Tool] = []
        if self.loaded is not None:
            for name, command in self.loaded.spec.commands.items():
                if command.changes_state and not self.policy.allows_command(name):
                    continue
                tools.append(self._command_tool(name, command))
        else:
            tools += self._generic_tools()
        tools.append(
            Tool(name="port_status", description=self.texts.tool("port_status"), read_only=True)
        )
        return tools

    def refused(self) -> dict[str, ToolError]:
        """Tools the policy keeps closed: a call fails with SEND_NOT_ALLOWED."""
        out: dict[str, ToolError] = {}
        if self.loaded is not None:
            allowed = ", ".join(self.policy.describe()["allow_commands"]) or "none (read-only)"
            for name, command in self.loaded.spec.commands.items():
                if command.changes_state and not self.policy.allows_command(name):
                    out[name] = ToolError(
                        "SEND_NOT_ALLOWED",
                        f"{name} changes the device's state and is not allowed by the send "
                        f"policy. Commands that may run: {allowed}.",
                    )
        elif not self.policy.allows_raw_lines:
            out["serial_query"] = ToolError(
                "SEND_NOT_ALLOWED",
                "Raw lines are not allowed by the send policy: nothing can be written to "
                "this port.",
            )
        return out

    def _command_tool(self, name: str, command: CommandSpec) -> Tool:
        typed = self.texts.typed
        params = []
        for param_name, param in command.params.items():
            parts = [param.description] if param.description else []
            if param.unit:
                parts.append(typed.unit.format(unit=param.unit))
            params.append(
                ToolParameter(
                    name=param_name,
                    description="; ".join(parts) or None,
                    required=param.required,
                    schema=param.json_schema(),
                )
            )
        description = command.description[:_MAX_DESCRIPTION]
        if command.read is not None:
            params += [
                ToolParameter(
                    name="max_age_ms",
                    description=typed.max_age_ms,
                    schema={"type": "integer", "minimum": 0, "maximum": 3_600_000},
                ),
                ToolParameter(
                    name="timeout_ms",
                    description=typed.timeout_ms,
                    schema={"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS},
                ),
            ]
        if command.changes_state:
            description = typed.changes_state.format(description=description)
            params.append(
                ToolParameter(name="dry_run", description=typed.dry_run, schema={"type": "boolean"})
            )
        return Tool(
            name=name,
            description=description,
            parameters=params,
            read_only=not command.changes_state,
        )

    def _generic_tools(self) -> list[Tool]:
        texts = self.texts
        tools = []
        if self.policy.allows_raw_lines:
            tools.append(
                Tool(
                    name="serial_query",
                    description=texts.tool("serial_query"),
                    read_only=False,  # a raw line can change anything
                    parameters=[
                        ToolParameter(
                            name="line",
                            description=texts.param("serial_query", "line"),
                            required=True,
                            schema={"type": "string", "minLength": 1, "maxLength": _LINE_CHARS},
                        ),
                        ToolParameter(
                            name="expect",
                            description=texts.param("serial_query", "expect"),
                            schema={"type": "string", "minLength": 1, "maxLength": _TEXT_CHARS},
                        ),
                        ToolParameter(
                            name="timeout_ms",
                            description=texts.param("serial_query", "timeout_ms"),
                            schema={"type": "integer", "minimum": 0, "maximum": MAX_READ_MS},
                        ),
                    ],
                )
            )
        tools.append(
            Tool(
                name="serial_read",
                description=texts.tool("serial_read"),
                read_only=True,
                parameters=[
                    ToolParameter(
                        name="duration_ms",
                        description=texts.param("serial_read", "duration_ms"),
                        schema={"type": "integer", "minimum": 0, "maximum": MAX_READ_MS},
                    ),
                    ToolParameter(
                        name="until",
                        description=texts.param("serial_read", "until"),
                        schema={"type": "string", "minLength": 1, "maxLength": _TEXT_CHARS},
                    ),
                ],
            )
        )
        return tools

    # -- status --------------------------------------------------------------------------------

    def port_status(self) -> dict[str, Any]:
        if self.adapter is None:
            raise ToolError("NO_PORT", "No serial port is attached to this driver.")
        status = self.adapter.status()
        out: dict[str, Any] = {
            "state": "connected" if status.connected else "down",
            "port": status.port,
            "reconnecting": status.reconnecting,
            "reconnects": status.reconnects,
            "bytes_in": status.bytes_in,
            "bytes_out": status.bytes_out,
            "lines_in": status.frames_in,
            "overlong_lines": status.overlong_frames,
        }
        if status.last_error:
            out["last_error"] = status.last_error
        if self.loaded is not None:
            out["device"] = self.loaded.spec.device.name
        if self.runner is not None and self.loaded and self.loaded.spec.identity:
            out["identity_confirmed"] = self.runner.identified_generation == status.generation
        if self.monitor is not None:
            out["stream"] = self.monitor.stats()
        out["send_policy"] = {
            k: v
            for k, v in self.policy.describe().items()
            if k
            in (
                "allow_commands",
                "command_limits",
                "allow_raw_lines",
                "deny_raw_lines",
                "max_commands_per_second",
                "require_consent",
                "dry_run",
            )
        }
        return out

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.close()
        if self.adapter is not None:
            self.adapter.close()
