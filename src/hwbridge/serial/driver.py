"""SerialDriver: the serial bridge as an MCS hybrid driver, from a device spec or a bare port.

    with SerialDriver.from_spec("devices/bench_psu.toml", port="/dev/ttyUSB0") as psu:
        psu.process_llm_response('{"tool": "measure_voltage", "arguments": {}}')

Read-only unless a SendPolicy says otherwise: commands that change the device's state, and
raw lines, run only when the policy allows them. Closing the driver closes the port it
opened (a PySerialAdapter passed in stays open).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.core.health import Health, HealthStatus, RawSpec
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError
from hwbridge.core.prompts import PromptStrategy
from hwbridge.policy import SendPolicy
from hwbridge.serial.spec.loader import LoadedSpec, load_spec
from hwbridge.serial.tools.streaming import kind_function
from hwbridge.serial.tools.texts import serial_texts
from hwbridge.serial.tools.tool_driver import SerialToolDriver
from hwbridge.serial.transport.adapter import PySerialAdapter
from hwbridge.serial.transport.monitor import LineMonitor

__all__ = ["SPEC_FORMAT", "SerialDriver"]

SPEC_FORMAT = "hwbridge device spec (TOML)"
_PORT_ONLY = "port"  # the part name of a driver without a spec


class SerialDriver(HybridDriver, Closing):
    """An LLM-ready driver for one serial device, gated by a SendPolicy."""

    meta = DriverMeta(
        id="8d2e4b6a-1c3f-4e5d-9a7b-0f1e2d3c4b5a",
        name="hwbridge serial",
        version=__version__,
        bindings=[DriverBinding(capability="serial", adapter="pyserial", spec_format="TOML")],
        capabilities=["healthcheck", "raw_spec"],
    )

    def __init__(
        self,
        tool_driver: SerialToolDriver,
        *,
        owns_port: bool = True,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        self.tool_driver = tool_driver
        self.policy = tool_driver.policy
        self._owns_port = owns_port

    @classmethod
    def from_spec(
        cls,
        path: str | Path | LoadedSpec,
        port: str | PySerialAdapter | None = None,
        policy: SendPolicy | None = None,
        *,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
        adapter_options: Mapping[str, Any] | None = None,
    ) -> SerialDriver:
        """A driver whose tools are the spec's commands; `port` None: offline (tools and
        prompt only). `path` is a spec file, or the name of a bundled one (`"bench_psu"`).
        `port` is a path or pyserial URL (opened with the spec's settings) or an open
        PySerialAdapter. `adapter_options` go to PySerialAdapter."""
        loaded = path if isinstance(path, LoadedSpec) else load_spec(_spec_path(path))
        policy = policy or SendPolicy()
        _check_policy_names(loaded, policy)
        spec = loaded.spec
        adapter, owned = _adapter(port, loaded, adapter_options)
        monitor = None
        try:
            if adapter is not None and spec.streaming:
                assert spec.stream is not None
                monitor = LineMonitor(
                    adapter,
                    kind_function(spec),
                    history=spec.stream.history,
                    max_chars=spec.port.max_line,
                ).start()
            tools = SerialToolDriver(loaded, adapter, monitor, policy)
        except BaseException:
            if monitor is not None:
                monitor.close()
            if adapter is not None and owned:
                adapter.close()
            raise
        return cls(
            tools,
            owns_port=owned,
            prompt_strategy=prompt_strategy,
            prompt_overrides=prompt_overrides,
        )

    @classmethod
    def from_port(
        cls,
        port: str | PySerialAdapter,
        policy: SendPolicy | None = None,
        *,
        baudrate: int = 115200,
        terminator: str = "\n",
        encoding: str = "ascii",
        history: int = 1000,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> SerialDriver:
        """Generic tools for a port without a spec: `serial_read`, and `serial_query` when
        the policy allows raw lines. One background reader keeps what the device says."""
        policy = policy or SendPolicy()
        if isinstance(port, PySerialAdapter):
            adapter, owned = port, False
        else:
            adapter = PySerialAdapter(
                port, baudrate=baudrate, terminator=terminator, encoding=encoding
            )
            owned = True
        monitor = LineMonitor(adapter, history=history).start()
        try:
            tools = SerialToolDriver(None, adapter, monitor, policy)
        except BaseException:
            monitor.close()
            if owned:
                adapter.close()
            raise
        return cls(
            tools,
            owns_port=owned,
            prompt_strategy=prompt_strategy,
            prompt_overrides=prompt_overrides,
        )

    # -- what it holds -----------------------------------------------------------------------

    @property
    def spec(self) -> LoadedSpec | None:
        return self.tool_driver.loaded

    @property
    def adapter(self) -> PySerialAdapter | None:
        return self.tool_driver.adapter

    @property
    def monitor(self) -> LineMonitor | None:
        return self.tool_driver.monitor

    # -- MCSToolDriver (delegated) -----------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return self.tool_driver.list_tools()

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return self.tool_driver.execute_tool(tool_name, arguments)

    def refused_tools(self) -> Mapping[str, ToolError]:
        """Commands and raw lines the policy keeps closed: a call fails with
        SEND_NOT_ALLOWED (it never passes through as if it were a final answer)."""
        return self.tool_driver.refused()

    # -- health and source (spec section 14) -------------------------------------------------

    def healthcheck(self) -> Health:
        """The port's connection, counters and, for a stream, the age of the last line;
        writes nothing, waits for nothing."""
        name = self.spec.spec.device.name if self.spec else _PORT_ONLY
        return Health.combine({name: self._port_health()})

    def _port_health(self) -> Health:
        adapter = self.adapter
        if adapter is None:
            return Health(status="offline", details={"port": None})
        details = self.tool_driver.port_status()
        details.pop("send_policy", None)
        problems: list[str] = []
        status: HealthStatus = "ok"
        if details["state"] != "connected":
            status = "down"
            note = "; reconnecting" if details["reconnecting"] else ""
            problems.append(f"not connected ({details.get('last_error') or 'closed'}){note}")
        else:
            stream = details.get("stream")
            stale_ms = (
                self.spec.spec.stream.stale_ms
                if self.spec is not None and self.spec.spec.stream is not None
                else None
            )
            if stream is not None and stale_ms is not None:
                age = stream["last_line_age_ms"]
                if age is None:
                    problems.append("no line received yet")
                elif age > stale_ms:
                    problems.append(f"no line for {age / 1000:.1f} s")
            if problems:
                status = "degraded"
        return Health(status=status, details=details, problems=problems)

    def raw_spec(self) -> dict[str, RawSpec]:
        """The device spec as it was loaded (none for a bare port)."""
        loaded = self.spec
        if loaded is None:
            return {}
        return {
            loaded.spec.device.name: RawSpec(
                format=SPEC_FORMAT, source=loaded.source, text=loaded.text, sha256=loaded.sha256
            )
        }

    # -- prompt ------------------------------------------------------------------------------

    def driver_guidance(self, model_name: str | None = None) -> str:
        guidance = serial_texts().guidance
        loaded = self.spec
        if loaded is None:
            port = self.adapter.description if self.adapter else ""
            allowed = self.policy.describe()["allow_raw_lines"]
            if not allowed:
                return guidance.port_read_only.format(port=port).strip()
            return guidance.port.format(port=port, allowed=", ".join(allowed)).strip()
        device = loaded.spec.device.name
        if self.adapter is None:
            return guidance.offline.format(device=device).strip()
        if loaded.spec.streaming:
            return guidance.stream.format(device=device).strip()
        changing = [
            name
            for name, command in loaded.spec.commands.items()
            if command.changes_state and self.policy.allows_command(name)
        ]
        if not changing:
            return guidance.query.format(device=device).strip()
        return guidance.query_can_change.format(device=device, allowed=", ".join(changing)).strip()

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the line reader and close the port this driver opened; idempotent."""
        if self.monitor is not None:
            self.monitor.close()
        if self._owns_port and self.adapter is not None:
            self.adapter.close()


def _adapter(
    port: str | PySerialAdapter | None,
    loaded: LoadedSpec,
    options: Mapping[str, Any] | None,
) -> tuple[PySerialAdapter | None, bool]:
    if port is None or isinstance(port, PySerialAdapter):
        return port, False
    settings = loaded.spec.port
    kwargs: dict[str, Any] = {
        "baudrate": settings.baudrate,
        "terminator": settings.terminator,
        "write_terminator": settings.write_terminator,
        "encoding": settings.encoding,
        "max_frame": settings.max_line,
        "timeout_s": settings.timeout_ms / 1000,
        "serial_options": settings.serial_options(),
    }
    kwargs.update(options or {})
    return PySerialAdapter(port, **kwargs), True


def _check_policy_names(loaded: LoadedSpec, policy: SendPolicy) -> None:
    """A misspelt command_limits key would silently remove a limit: refuse it instead."""
    commands = loaded.spec.commands
    problems = []
    for key in policy.describe()["command_limits"]:
        name, _, param = key.partition(".")
        command = commands.get(name)
        if command is None or param not in command.params:
            problems.append(repr(key))
    if problems:
        raise ValueError(
            f"command_limits name parameters {loaded.spec.device.name} does not have: "
            + ", ".join(problems)
        )


def _spec_path(path: str | Path) -> Path:
    """The file, or a bundled spec when `path` is a bare name that is no file here."""
    file = Path(path)
    if file.exists() or isinstance(path, Path) or "/" in str(path) or "\\" in str(path):
        return file
    from hwbridge.resources import bundled_spec

    try:
        return bundled_spec(str(path))
    except (FileNotFoundError, ValueError):
        return file  # load_spec says it cannot be read
