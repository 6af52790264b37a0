"""What the documentation says about the install, the extras and the command matches the
project: the extras it names exist, the install page lists them all and shows no PyPI line
before a release, the command overview lists every command, the chat options and the MCP
client configuration it shows are real."""

from __future__ import annotations

import argparse
import json
import re
import tomllib

from hwbridge.cli.main import build_parser
from tests.docs_pages import ROOT, blocks, pages, section, text

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = set(PROJECT["optional-dependencies"])


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    return next(
        action.choices
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )


def test_every_extra_the_pages_name_exists() -> None:
    named: set[str] = set()
    for page in pages():
        for group in re.findall(r"""pip install ["']?[^"'\s]*\[([a-z0-9_,-]+)\]""", text(page)):
            named |= set(group.split(","))
    assert named, "no page shows an extra"
    assert named <= EXTRAS, named - EXTRAS


def test_the_install_page_lists_every_extra() -> None:
    table = section("docs/install.md", "Extras")
    listed = {name for cell in re.findall(r"^\| ([^|]+) \|", table, re.M)
              for name in re.findall(r"`([a-z0-9_-]+)`", cell)}  # fmt: skip
    assert listed == EXTRAS, listed ^ EXTRAS


def test_no_pypi_install_line_before_a_release() -> None:
    for page in pages():
        for block in blocks(page, "bash"):
            assert not re.search(r"pip install ['\"]?mcs-hwbridge", block.code), block.name


def test_the_install_page_builds_a_wheel_then_runs_it() -> None:
    [block] = blocks("docs/install.md", "bash")[2:3]
    code = block.code
    assert code.index("make wheel") < code.index("pip install dist/") < code.index("hwbridge demo")


def test_the_install_page_says_what_shared_is() -> None:
    text_ = section("docs/install.md", "The reference data in `../shared`")
    assert "../shared/data is not beside the checkout" in text_


def test_the_command_overview_lists_every_command() -> None:
    overview = text("docs/cli.md")
    for name in _subcommands():
        assert f"| `hwbridge {name}" in overview, name


def test_every_chat_option_shown_exists() -> None:
    chat = _subcommands()["chat"]
    known = {s for action in chat._actions for s in action.option_strings}
    shown = set()
    for page in pages():
        for line in re.findall(r"hwbridge chat[^\n`]*", text(page)):
            shown |= set(re.findall(r"(--[a-z][a-z0-9-]*)", line))
    shown |= set(re.findall(r"`(--[a-z][a-z0-9-]*)", text("docs/chat.md")))
    assert shown, "no page shows a chat option"
    assert shown <= known, shown - known


def test_the_client_config_block_names_real_options() -> None:
    [desktop] = blocks("docs/mcp.md", "json")
    entry = json.loads(desktop.code)["mcpServers"]["hwbridge"]
    args = build_parser().parse_args(entry["args"])
    assert args.command == "mcp" and args.allow == ["ClimateCommand"]
