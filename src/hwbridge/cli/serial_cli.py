"""The serial side of `hwbridge tools`, `prompt` and `inspect`: --spec FILE|NAME (a device
spec, or the name of one that ships with hwbridge) and --port PORT (a path or pyserial URL).

`--spec` alone is offline (tools and prompt); with `--port` the driver talks to the device;
`--port` alone gives the generic port tools. --allow names the spec's commands that may
change the device's state.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.cli.console import make_console, stdout_text
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError, one_line
from hwbridge.cli.repl import Inspector

if TYPE_CHECKING:
    from rich.console import Console

    from hwbridge.policy import SendPolicy
    from hwbridge.serial import SerialDriver

__all__ = [
    "add_serial_options",
    "open_serial_driver",
    "resolve_spec",
    "run_inspect",
    "run_prompt",
    "wanted",
]


def add_serial_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec",
        metavar="FILE|NAME",
        help="a serial device spec (TOML), or the name of a bundled one (bench_psu, "
        "gnss_nmea); instead of --dbc",
    )
    parser.add_argument(
        "--port",
        metavar="PORT",
        help="the serial port: a path (/dev/ttyUSB0, COM3) or a pyserial URL (socket://, "
        "rfc2217://, loop://); with --spec the device's tools, alone the generic port tools",
    )


def wanted(args: argparse.Namespace) -> bool:
    """Whether the options ask for the serial bridge."""
    spec, port = getattr(args, "spec", None), getattr(args, "port", None)
    if spec is None and port is None:
        return False
    if getattr(args, "dbc", None) is not None or getattr(args, "bus", None) is not None:
        raise CliError(
            "--spec/--port (a serial device) and --dbc/--bus (a CAN bus) exclude each other"
        )
    return True


def resolve_spec(text: str) -> Path:
    """A spec file, or a bundled spec by name (`bench_psu`)."""
    path = Path(text)
    if path.is_file():
        return path
    if "/" in text or "\\" in text or path.suffix not in ("", ".toml"):
        raise CliError(f"--spec {text}: no such file")
    from hwbridge.resources import bundled_spec

    try:
        return bundled_spec(text)
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(f"--spec {text}: no such file, and {one_line(str(exc))}") from exc


def _allowed(spec: Any, patterns: list[str]) -> list[str]:
    """--allow checked against the spec: a typo would otherwise allow nothing, silently."""
    commands = spec.commands
    changing = sorted(n for n, c in commands.items() if c.changes_state)
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in changing):
            listed = ", ".join(changing) or "none"
            raise CliError(
                f"--allow {pattern}: matches no command that changes state (these do: {listed})"
            )
    return list(patterns)


def open_serial_driver(args: argparse.Namespace, policy: SendPolicy | None = None) -> SerialDriver:
    """The SerialDriver the options describe; usage errors exit 2, a port that cannot be
    opened exits 1. `policy` (several bridges sharing one) replaces the one --allow gives."""
    from hwbridge.core.models import ToolError
    from hwbridge.core.prompts import PromptPackError, PromptStrategy
    from hwbridge.policy import SendPolicy
    from hwbridge.serial import SerialDriver, SpecError, load_spec

    try:
        strategy = PromptStrategy.load(str(getattr(args, "pack", "json")))
    except PromptPackError as exc:
        raise CliError(f"--pack: {one_line(str(exc))}") from exc
    port: str | None = args.port
    try:
        if args.spec is None:
            assert port is not None
            return SerialDriver.from_port(port, policy=policy, prompt_strategy=strategy)
        try:
            loaded = load_spec(resolve_spec(args.spec))
        except SpecError as exc:
            raise CliError(one_line(str(exc)), EXIT_USAGE) from exc
        args.spec = loaded.source
        if policy is None:
            policy = SendPolicy(allow_commands=_allowed(loaded.spec, list(args.allow)))
        return SerialDriver.from_spec(loaded, port=port, policy=policy, prompt_strategy=strategy)
    except ToolError as exc:
        raise CliError(f"{one_line(exc.message)} ({exc.code})", EXIT_RUNTIME) from exc
    except ValueError as exc:
        raise CliError(f"--port: {one_line(str(exc))}") from exc


def run_prompt(args: argparse.Namespace) -> int:
    with open_serial_driver(args) as driver:
        text = driver.get_driver_system_message(args.model)
    sys.stdout.write(stdout_text(text) + "\n")
    sys.stdout.flush()
    return EXIT_OK


def run_inspect(args: argparse.Namespace) -> int:
    if args.port is None:
        raise CliError("inspect needs --port PORT (the device's serial port) with --spec")
    console = make_console()
    with open_serial_driver(args) as driver:
        SerialInspector(driver, console, model=args.model, port=str(args.port)).run()
    return EXIT_OK


class SerialInspector(Inspector):
    """The inspector's loop and commands over a SerialDriver; `status` is port_status."""

    def __init__(
        self, driver: SerialDriver, console: Console, *, model: str | None = None, port: str = ""
    ) -> None:
        super().__init__(driver, console, model=model, bus=port)  # type: ignore[arg-type]
        self._commands["status"] = lambda _: self.call("port_status", {})

    def banner(self) -> None:
        driver: Any = self.driver
        spec = driver.spec
        what = f"{spec.source} ({spec.spec.device.name})" if spec else "generic port tools"
        from rich.text import Text

        self.console.print(
            Text.assemble(("hwbridge inspect", "bold"), f": {what} on {self.bus}"), soft_wrap=True
        )
        policy = driver.policy.describe()
        allowed = policy["allow_commands"] + policy["allow_raw_lines"]
        text = f"may run {', '.join(allowed)}" if allowed else "read-only"
        self.console.print(f"{len(self.tools)} tools; send policy {text}.", soft_wrap=True)
        self.console.print(
            "Type help for commands; anything else is run as LLM output.", style="dim"
        )
