"""What the CLI writes to a terminal never holds a control character from what it shows: a
bench's, a device's or a file's text has each one shown as `\\xNN`, in the consoles'
output and in the log lines (issue 33, review 2 finding 4)."""

from __future__ import annotations

import io
import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from hwbridge.cli import main as cli_main
from hwbridge.cli.console import make_console, terminal_text
from hwbridge.cli.render import describe_tool, response_panel, tools_table
from hwbridge.core.models import DriverResponse, Tool, ToolParameter

FORGED = "\x1b]52;c;cHduZWQ=\x1b\\\x1b]0;TITLE\x07\x1b[2K\x1b[1A\x1b[32m ok\x1b[0m\x9b2J\x7f\r"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@given(st.text())
def test_terminal_text_leaves_no_control_character_but_line_breaks_and_tabs(text: str) -> None:
    shown = terminal_text(text)
    assert not CONTROL.search(shown)
    assert terminal_text(shown) == shown
    if not CONTROL.search(text):
        assert shown == text  # ordinary text is untouched
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")


def test_each_control_character_is_shown_as_an_escape() -> None:
    assert terminal_text("a\x1b[2Kb\x9bc\x7fd\re\x00") == "a\\x1b[2Kb\\x9bc\\x7fd\\x0de\\x00"


def test_nothing_a_console_prints_holds_a_control_character_of_its_text() -> None:
    out = io.StringIO()
    console = make_console(out)  # not a terminal: rich writes no escape code of its own
    tool = Tool(
        name="boom",
        description=f"Reads. {FORGED}",
        parameters=[ToolParameter(name="x", description=FORGED, schema={"enum": [FORGED]})],
    )
    console.print(Text.assemble(("  ✗ ", "red"), f"bench1.boom BUS_DOWN: {FORGED}"))
    console.print(f"plain {FORGED}", soft_wrap=True)
    console.print(tools_table([tool]))
    console.print(describe_tool(tool))
    console.print(response_panel(DriverResponse(call_failed=True, call_detail=FORGED)))
    printed = out.getvalue()
    assert not CONTROL.search(printed), repr(printed)
    assert "\\x1b]52;c;cHduZWQ=" in printed


def test_a_log_line_holds_no_control_character_of_its_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hwbridge mcp --remote` logs the detail of each call that changes state."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    for debug in (False, True):
        cli_main._configure_logging(debug)
        logging.getLogger("hwbridge.mcp.calls").warning("bench1.boom failed: %s", FORGED)
        root.handlers.clear()
    err = capsys.readouterr().err
    assert err.count("bench1.boom failed") == 2
    assert not CONTROL.search(err.replace("\n", "")), repr(err)
