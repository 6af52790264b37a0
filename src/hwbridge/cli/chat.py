"""`hwbridge chat`: a terminal conversation with the vehicle through an LLM.

The CAN driver (and, once they exist, the serial and OBD drivers) behind one `Runner` with a
chat client from `hwbridge.llm`. Each tool call and its result are shown as they happen; the
model's words stream in, never a call's JSON. `--consent` asks y/n on the terminal before
anything that is not read-only runs (a `ConsentGate`). `--remote URL` adds remote benches
(`hwbridge.cli.remotes`), whose tools are asked consent for unless known to be read-only.
Ctrl-C stops the answer being given (a wait ends at once; a send in flight is finished and
shown), a second Ctrl-C or end of input (Ctrl-D) leaves.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hwbridge.cli.bridges import add_bridge_options, open_bridges
from hwbridge.cli.console import make_console
from hwbridge.cli.errors import EXIT_RUNTIME, EXIT_USAGE, CliError, one_line
from hwbridge.cli.options import add_bitrate_option, add_driver_options, discovery_references
from hwbridge.cli.remotes import add_remote_options, local_named, open_remotes

if TYPE_CHECKING:
    from hwbridge.core.contract import MCSToolDriver
    from hwbridge.core.hybrid import HybridDriver
    from hwbridge.core.runner import ChatClient

__all__ = ["PROVIDERS", "register"]

PROVIDERS = ("openai", "anthropic", "ollama", "openai-compatible")
_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
EXAMPLES = """\
examples:
  hwbridge chat --provider openai --model gpt-4o-mini --bus socketcand://127.0.0.1:29536/vcan0
  hwbridge chat --provider anthropic --model claude-opus-4-6 --bus socketcan:can0 \\
      --allow ClimateCommand --consent
  hwbridge chat --provider ollama --model llama3.1:8b --bus virtual:demo
  hwbridge chat --provider ollama --model llama3.1:8b --dbc car.dbc   offline: the catalog
  hwbridge chat --provider openai --model gpt-4o-mini --bus socketcan:can0 --discover
  hwbridge chat --provider openai --model gpt-4o-mini --bus socketcan:can0 --discover \\
      --reference obd          a bare car: the OBD-II answers are the reference
  hwbridge chat --provider openai-compatible --base-url http://127.0.0.1:8080/v1 --model local \\
      --mode text --bus socketcand://127.0.0.1:29536/vcan0
  HWBRIDGE_REMOTE_TOKEN=secret hwbridge chat --provider openai --model gpt-4o-mini \\
      --remote http://bench1:8000/mcp --remote http://bench2:8000/mcp --trust-remote

keys: OPENAI_API_KEY, ANTHROPIC_API_KEY (a local server needs none); OLLAMA_HOST for ollama
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "chat",
        help="chat with the vehicle through an LLM (OpenAI, Anthropic, Ollama, local servers)",
        description="A conversation with the vehicle: the model reads signals, waits for "
        "conditions and (with --allow) sends, through the same driver and send policy as "
        "every other command. Tool calls and results are shown as they happen. Without "
        "--bus, --port, --obd or --j1939 the chat is offline: the model browses the database's "
        "catalog and encodes and decodes frames, and reads or sends nothing.",
        epilog=EXAMPLES,
    )
    parser.add_argument("--provider", required=True, choices=PROVIDERS, help="the LLM API")
    add_driver_options(parser, bus_required=False)
    add_bitrate_option(parser)
    add_bridge_options(parser)
    parser._option_string_actions["--model"].help = (
        "the model to chat with (required): gpt-4o-mini, claude-opus-4-6, llama3.1:8b, ...; "
        "a prompt pack may also pick its variant by this name"
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the server: any OpenAI-compatible one (llama.cpp, vLLM, LM Studio: "
        "http://HOST:PORT/v1), an Ollama host, or a gateway for openai/anthropic",
    )
    parser.add_argument(
        "--mode",
        choices=("native", "text"),
        default="native",
        help="native: the provider's function calling (default); text: calls written as "
        "JSON in the text, for models or servers without function calling",
    )
    parser.add_argument(
        "--no-stream",
        action="store_true",
        help="ask for whole answers instead of streamed ones (for servers and proxies that "
        "do not stream; a whole JSON answer to a streamed request is read as well)",
    )
    parser.add_argument(
        "--consent",
        action="store_true",
        help="ask y/n on the terminal before anything that is not read-only runs",
    )
    add_remote_options(parser)
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=8,
        metavar="N",
        help="model requests per question before it stops (default 8)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.model:
        raise CliError("--model is required: the model to chat with, e.g. gpt-4o-mini")
    if args.max_rounds < 1:
        raise CliError("--max-rounds must be at least 1")
    from hwbridge.cli.chat_session import Chat

    client = make_client(args)
    console = make_console()
    with contextlib.ExitStack() as stack:
        remotes = open_remotes(args, stack)
        parts = open_bridges(args, stack, offline=True) if local_named(args) or not remotes else {}
        driver = drivers(parts, remotes)
        _check(client)
        # a remote tool not known to be read-only is asked for, --consent or not
        consent = args.consent or bool(remotes)
        chat = Chat(driver, client, console, max_rounds=args.max_rounds, consent=consent)
        chat.banner(bus=_setup_text(args, remotes), policy=_policy_text(parts))
        return chat.loop()


def make_client(args: argparse.Namespace) -> ChatClient:
    """The chat client the options name; a missing SDK or key is a usage error (exit 2)."""
    from hwbridge.core.runner import ProviderError
    from hwbridge.llm import MissingExtraError

    provider: str = args.provider
    base_url: str | None = args.base_url
    if provider == "openai-compatible" and not base_url:
        raise CliError(
            "--provider openai-compatible needs --base-url (e.g. http://127.0.0.1:8080/v1)"
        )
    key = _KEYS.get(provider)
    if key is not None and not os.environ.get(key) and (provider == "anthropic" or not base_url):
        raise CliError(
            f"--provider {provider} needs an API key: set {key} in the environment"
            + (" (or --base-url for a local OpenAI-compatible server)" if key[0] == "O" else "")
        )
    stream = not args.no_stream
    try:
        if provider in ("openai", "openai-compatible"):
            from hwbridge.llm import OpenAIClient

            return OpenAIClient(args.model, base_url=base_url, mode=args.mode, stream=stream)
        if provider == "anthropic":
            from hwbridge.llm import AnthropicClient

            return AnthropicClient(args.model, base_url=base_url, mode=args.mode, stream=stream)
        from hwbridge.llm import OllamaClient

        return OllamaClient(args.model, host=base_url, mode=args.mode, stream=stream)
    except (MissingExtraError, ProviderError) as exc:
        raise CliError(one_line(str(exc)), EXIT_USAGE) from exc


def _check(client: ChatClient) -> None:
    """One request before the first question: a refused key exits 2, no server exits 1."""
    from hwbridge.core.runner import ProviderError

    check: Callable[[], None] | None = getattr(client, "check", None)
    if check is None:
        return
    try:
        check()
    except ProviderError as exc:
        code = EXIT_USAGE if exc.kind in ("auth", "bad_request") else EXIT_RUNTIME
        raise CliError(str(exc), code) from exc


def drivers(
    parts: dict[str, MCSToolDriver], remotes: dict[str, MCSToolDriver] | None = None
) -> HybridDriver:
    """One driver for the Runner: the one bridge alone, or an Orchestrator over several;
    with remote benches, every tool is labelled (`bench1.read_signals`, `can.read_signals`)."""
    from hwbridge.core.hybrid import HybridDriver
    from hwbridge.core.orchestrator import Orchestrator

    if remotes:
        taken = sorted(parts.keys() & remotes.keys())
        if taken:  # a label taken twice: a usage error naming both that claim it
            label = taken[0]
            local = {
                "can": "the local CAN bridge (--bus, --dbc)",
                "serial": "the local serial bridge (--port)",
                "obd": "the local OBD-II bridge (--obd)",
                "j1939": "the local J1939 bridge (--j1939)",
                "dataset": "the capture dataset (--dataset)",
            }.get(label, f"the local driver {label}")
            bench = getattr(remotes[label], "where", label)
            raise CliError(
                f"--remote: the label {label} is taken twice: by {local} and by the remote "
                f"bench {bench}; give the bench another label (--remote LABEL=URL)"
            )
        try:
            return Orchestrator({**parts, **remotes}, names="dotted")
        except ValueError as exc:  # a local tool's name too long for its label
            raise CliError(f"--remote: {one_line(str(exc))}") from exc
    if len(parts) == 1:
        only = next(iter(parts.values()))
        if isinstance(only, HybridDriver):
            return only
    return Orchestrator(parts)


def _setup_text(args: argparse.Namespace, remotes: dict[str, MCSToolDriver] | None = None) -> str:
    online = args.bus or args.port or args.obd or args.j1939
    parts = (
        []
        if online or (remotes and not local_named(args))
        else ["no bus (offline: catalog and decoding)"]
    )
    if remotes:
        parts.append(f"remote {', '.join(remotes)}")
    if args.bus is not None:
        parts.append(str(args.bus) + (_discovery_text(args) if args.discover else ""))
    if args.port is not None or args.spec is not None:
        parts.append(f"{args.spec or 'port'} on {args.port or 'no port'}")
    if args.obd is not None:
        parts.append(f"OBD on {args.obd}")
    if args.j1939 is not None:
        parts.append(f"J1939 on {args.j1939}")
    return ", ".join(parts)


def _discovery_text(args: argparse.Namespace) -> str:
    """` (discovery)`, naming what the discovery tools correlate with when --reference does."""
    files, obd = discovery_references(args)
    named = [Path(f).name for f in files] + (["OBD-II"] if obd else [])
    return f" (discovery, reference {', '.join(named)})" if named else " (discovery)"


def _policy_text(parts: dict[str, MCSToolDriver]) -> str:
    policy = next((p for d in parts.values() if (p := getattr(d, "policy", None))), None)
    if policy is None:
        return "read-only"
    described = policy.describe()
    allowed = [
        *described["allow_messages"],
        *described["allow_commands"],
        *described["allow_services"],
    ]
    return f"may send {', '.join(allowed)}" if allowed else "read-only"
