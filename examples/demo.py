"""`make demo`: an LLM session against the simulated vehicle, over a real transport.

Starts `python -m firmware_sim` in its own process (a socketcand server on loopback), connects
a CanDriver to it with python-can's socketcand interface, and plays a short session of
recorded LLM outputs (recorded, not produced by a live model). HWBRIDGE_INSPECT=1 opens the
interactive inspector on the same bus instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel

from hwbridge import CanDriver, DriverResponse, SendPolicy, counter_and_checksum, estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
DBC = ROOT / "dbc" / "demo_vehicle.dbc"
console = Console(width=110)


@contextmanager
def simulator() -> Iterator[str]:
    """Run the simulated vehicle in its own process; yield its socketcand bus string."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", "--dbc", str(DBC), "--socketcand", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("socketcand: "):
            raise RuntimeError(f"the simulator did not start: {line!r}")
        yield line.removeprefix("socketcand: ")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def show(label: str, output: str | dict[str, Any], r: DriverResponse) -> None:
    said = output if isinstance(output, str) else json.dumps(output)
    if r.call_executed:
        status = "[green]executed[/]"
    elif r.call_failed:
        status = "[red]failed[/]"
    else:
        status = "[blue]no call: final answer[/]"
    lines = [f"[dim]recorded LLM output:[/] {said}", f"status: {status}"]
    if r.call_executed:
        lines.append("result: " + json.dumps(r.tool_call_result, ensure_ascii=False)[:900])
    if r.call_failed:
        lines.append(f"detail: {r.call_detail}")
        lines.append(f"retry prompt: {r.retry_prompt}")
    if r.messages:
        roles = ", ".join(str(m.get("role", m.get("type"))) for m in r.messages)
        lines.append(f"messages to append: {roles}")
    console.print(Panel("\n".join(lines), title=label, title_align="left"))


def session(bus: str) -> None:
    with CanDriver.from_dbc(DBC, bus=bus, bitrate=500_000) as driver:
        prompt = driver.get_driver_system_message()
        console.print(
            f"[bold]hwbridge demo[/]: {driver.meta.name} on {bus}, "
            f"{len(driver.list_tools())} tools, system prompt {len(prompt):,} characters "
            f"(~{estimate_tokens(prompt):,} tokens), send policy: read-only"
        )
        console.print("[dim]Every LLM output below is recorded, not produced by a live model.[/]")
        recorded: list[tuple[str, str | dict[str, Any]]] = [
            (
                "read live values",
                call(
                    "read_signals",
                    signals=["EngineSpeed", "VehicleSpeed", "GearLever", "CoolantTemp"],
                    timeout_ms=1000,
                ),
            ),
            (
                "wait for a condition (native OpenAI tool call)",
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "wait_for_signal",
                                "arguments": json.dumps(
                                    {
                                        "signal": "VehicleSpeed",
                                        "op": ">",
                                        "value": 20,
                                        "timeout_ms": 15000,
                                    }
                                ),
                            },
                        }
                    ],
                },
            ),
            (
                "a send under the read-only policy is refused",
                call("send_message", message="ClimateCommand", signals={"CabinSetpoint": 22}),
            ),
            (
                "summarise the bus",
                call("capture", duration_ms=500, messages=["EngineData", "VehicleDynamics"]),
            ),
        ]
        for label, output in recorded:
            show(label, output, driver.process_llm_response(output))

    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)},
        max_frames_per_second=10,
    )
    hooks = {"ClimateCommand": counter_and_checksum("RollingCounter", "Checksum")}
    with CanDriver.from_dbc(DBC, bus=bus, policy=policy, hooks=hooks) as driver:
        console.print("[bold]Same bus, send policy: allow ClimateCommand, setpoint 18..26 degC[/]")
        recorded = [
            (
                "outside the policy's limits",
                call("send_message", message="ClimateCommand", signals={"CabinSetpoint": 29}),
            ),
            (
                "a send the allow-list permits (typed tool)",
                call("send_ClimateCommand", CabinSetpoint=22.5, FanLevel=3, AcRequest="On"),
            ),
            (
                "the vehicle reacts",
                call(
                    "wait_for_signal", signal="ActiveSetpoint", op="==", value=22.5, timeout_ms=3000
                ),
            ),
            ("final answer", "The climate is set to 22.5 degC; the vehicle confirmed it."),
        ]
        for label, output in recorded:
            show(label, output, driver.process_llm_response(output))


def main() -> int:
    started = time.monotonic()
    with simulator() as bus:
        if os.environ.get("HWBRIDGE_INSPECT") == "1":
            from hwbridge.cli.main import main as cli

            return cli(["inspect", "--dbc", str(DBC), "--bus", bus, "--allow", "ClimateCommand"])
        session(bus)
    console.print(f"[dim]demo finished in {time.monotonic() - started:.1f} s[/]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
