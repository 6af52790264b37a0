"""`make demo`: a scripted session with recorded LLM outputs against an example driver.

The outputs below were written to show each path a client meets; no live model is called.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from thermostat import Thermostat

from hwbridge import DriverResponse, estimate_tokens

console = Console(width=100)

RECORDED: list[tuple[str, str | dict[str, Any]]] = [
    ("plain text call", '{"tool": "get_temperature", "arguments": {"room": "living_room"}}'),
    (
        "call inside prose and a code fence",
        'Let me set that.\n```json\n{"tool": "set_temperature", '
        '"arguments": {"room": "living_room", "celsius": 22.5}}\n```',
    ),
    (
        "out-of-range value: refused before execution",
        '{"tool": "set_temperature", "arguments": {"room": "living_room", "celsius": 99}}',
    ),
    (
        "near-JSON healed (single quotes, missing brace)",
        "{'tool': 'get_temperature', 'arguments': {'room': 'living_room'}",
    ),
    (
        "OpenAI tool_calls (native)",
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_temperature", "arguments": '{"room": "living_room"}'},
                }
            ],
        },
    ),
    (
        "Anthropic tool_use (native), refused by the device",
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "set_temperature",
                    "input": {"room": "living_room", "celsius": 28},
                }
            ],
        },
    ),
    ("final answer: no call", "The living room is set to 22.5 degC."),
]


def show(label: str, output: str | dict[str, Any], r: DriverResponse) -> None:
    said = output if isinstance(output, str) else json.dumps(output)
    status = (
        "[green]executed[/]"
        if r.call_executed
        else "[red]failed[/]"
        if r.call_failed
        else "[blue]no call: final answer[/]"
    )
    lines = [f"[dim]recorded LLM output:[/] {said}", f"status: {status}"]
    if r.call_executed:
        lines.append(f"result: {json.dumps(r.tool_call_result)}")
    if r.call_failed:
        lines.append(f"detail: {r.call_detail}")
        lines.append(f"retry prompt: {r.retry_prompt}")
    if r.messages:
        roles = ", ".join(str(m.get("role", m.get("type"))) for m in r.messages)
        lines.append(f"messages to append: {roles}")
    console.print(Panel("\n".join(lines), title=label, title_align="left"))


def main() -> None:
    driver = Thermostat()
    prompt = driver.get_driver_system_message()
    console.print(
        f"[bold]hwbridge demo[/]: driver {driver.meta.name} {driver.meta.version}, "
        f"system prompt {len(prompt)} characters (~{estimate_tokens(prompt)} tokens)"
    )
    console.print("[dim]Every LLM output below is recorded, not produced by a live model.[/]")
    for label, output in RECORDED:
        show(label, output, driver.process_llm_response(output))


if __name__ == "__main__":
    main()
