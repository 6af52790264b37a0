"""`hwbridge tools`: the tools a database yields and what the system prompt costs, offline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hwbridge.cli.console import json_text, make_console
from hwbridge.cli.errors import EXIT_OK
from hwbridge.cli.options import add_driver_options, open_driver

if TYPE_CHECKING:
    from hwbridge.can import CanDriver

__all__ = ["register", "summary"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "tools",
        help="list the tools generated from a database and the system prompt's size",
        description="List the tools an LLM would see for a database (offline, no bus) "
        "and the size of the system prompt in tokens and characters.",
    )
    add_driver_options(parser, bus_required=False)
    from hwbridge.cli.serial_cli import add_serial_options

    add_serial_options(parser)  # --spec FILE|NAME, --port PORT: a serial device instead
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (tools, prompt size, policy) instead of a table",
    )
    parser.set_defaults(func=run)


def summary(driver: CanDriver, model: str | None) -> dict[str, Any]:
    """The facts both outputs show: pack, prompt size, budget, policy."""
    from hwbridge.core.prompts import estimate_tokens

    prompt = driver.get_driver_system_message(model)
    strategy = driver.prompt_strategy.for_model(model)
    return {
        "pack": strategy.name,
        "system_prompt_tokens": estimate_tokens(prompt),
        "system_prompt_chars": len(prompt),
        "token_budget": strategy.token_budget,
        "policy": driver.policy.describe(),
    }


def run(args: argparse.Namespace) -> int:
    from hwbridge.cli import serial_cli
    from hwbridge.cli.render import tools_table

    if serial_cli.wanted(args):
        return _run_serial(args)

    with open_driver(args) as driver:
        tools = driver.list_tools()
        facts = summary(driver, args.model)
        if args.json:
            document = {
                "dbc": str(args.dbc),
                "messages": len(driver.database.messages),
                "exposure": args.exposure,
                "model": args.model,
                **facts,
                "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools],
            }
            sys.stdout.write(json_text(json.dumps(document, indent=2, ensure_ascii=False)) + "\n")
            return EXIT_OK
        console = make_console()
        title = (
            f"{len(tools)} tools from {args.dbc} "
            f"({len(driver.database.messages)} messages, exposure {args.exposure})"
        )
        console.print(tools_table(tools, title))
        policy = facts["policy"]
        allowed = ", ".join(policy["allow_messages"])
        console.print(
            f"System prompt: {facts['system_prompt_tokens']:,} tokens "
            f"({facts['system_prompt_chars']:,} characters), pack {facts['pack']}, "
            f"budget {facts['token_budget']:,} tokens"
        )
        console.print("Send policy: " + (f"may send {allowed}" if allowed else "read-only"))
    return EXIT_OK


def _run_serial(args: argparse.Namespace) -> int:
    """`hwbridge tools --spec/--port`: the tools of a serial device."""
    from hwbridge.cli import serial_cli
    from hwbridge.cli.render import tools_table

    with serial_cli.open_serial_driver(args) as driver:
        tools = driver.list_tools()
        facts = summary(driver, args.model)  # type: ignore[arg-type]
        allowed = facts["policy"]["allow_commands"]
        device = driver.spec.spec.device.name if driver.spec else None
        if args.json:
            document = {
                "spec": args.spec,
                "device": device,
                "port": args.port,
                "model": args.model,
                **facts,
                "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools],
            }
            sys.stdout.write(json_text(json.dumps(document, indent=2, ensure_ascii=False)) + "\n")
            return EXIT_OK
        console = make_console()
        source = f"{args.spec} ({device})" if device else f"port {args.port}"
        console.print(tools_table(tools, f"{len(tools)} tools from {source}"))
        console.print(
            f"System prompt: {facts['system_prompt_tokens']:,} tokens "
            f"({facts['system_prompt_chars']:,} characters), pack {facts['pack']}, "
            f"budget {facts['token_budget']:,} tokens"
        )
        console.print(
            "Send policy: " + (f"may run {', '.join(allowed)}" if allowed else "read-only")
        )
    return EXIT_OK
