"""The README's Runner, chat, async and health sections: examples run as written and print
what the README says; every chat option the README shows exists."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    return README.split(title, 1)[1].split("\n## ", 1)[0]


def run_block(text: str, index: int = 0) -> str:
    code = re.findall(r"```python\n(.*?)```", text, re.S)[index]
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    ).stdout


def printed(text: str) -> str:
    found = re.search(r"prints\n\n```\n(.*?)```", text, re.S)
    assert found is not None
    return found.group(1)


def test_the_recorded_runner_example_runs_as_written() -> None:
    text = section("## Talking to a model: Runner and the chat clients")
    assert run_block(text, 1) == printed(text)


def test_the_async_example_runs_as_written() -> None:
    text = section("## Async drivers")
    out = run_block(text)
    assert re.fullmatch(r"4 reads of 0\.5 s each took 0\.[5-9] s: \['NOT_RECEIVED'\]\n", out), out
    assert "prints `4 reads of 0.5 s each took 0.5 s: ['NOT_RECEIVED']`" in text


def test_the_health_example_runs_as_written() -> None:
    text = section("## Health and raw specs")
    assert run_block(text) == printed(text)


def test_every_chat_option_shown_exists() -> None:
    from hwbridge.cli.main import build_parser

    parser = build_parser()
    chat = next(
        action.choices["chat"]
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    known = {s for action in chat._actions for s in action.option_strings}
    shown = set(re.findall(r"hwbridge chat[^\n`]*", README))
    options = {o for line in shown for o in re.findall(r"(--[a-z-]+)", line)}
    options |= set(re.findall(r"`(--[a-z-]+)", section("## `hwbridge chat`")))
    assert options, "the README shows no chat option"
    assert options <= known, options - known
