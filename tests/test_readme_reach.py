"""The README's sections on the MCP server, the reference SDK and driver trust: their
examples run as written and print what the README says; their config blocks name options
`hwbridge mcp` has."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from hwbridge.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    body = README.split(f"\n## {title}", 1)[1]
    return body.split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def run_python(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    ).stdout


def printed(text: str) -> str:
    match = re.search(r"prints\n\n```\n(.*?)```", text, re.S)
    assert match is not None
    return match.group(1)


def test_the_mcp_example_runs_as_written() -> None:
    text = section("MCP server")
    [code] = blocks(text, "python")
    assert run_python(code) == printed(text)


def test_the_client_config_blocks_name_real_options() -> None:
    text = section("MCP server")
    [desktop] = blocks(text, "json")
    entry = json.loads(desktop)["mcpServers"]["hwbridge"]
    args = build_parser().parse_args(entry["args"])
    assert args.command == "mcp" and args.allow == ["ClimateCommand"]
    for block in blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.split("#")[0]) if "hwbridge mcp" in line else []
            if words and words[0] == "claude":
                words = words[words.index("--") + 2 :]  # after the executable
            elif words:
                words = words[words.index("mcp") :]
            if words:
                parsed = build_parser().parse_args(words)
                assert parsed.command == "mcp"


def test_the_interop_example_runs_as_written() -> None:
    text = section("Interop with the MCS reference SDK")
    [code] = blocks(text, "python")
    assert run_python(code) == printed(text)


def test_the_trust_example_runs_as_written() -> None:
    text = section("Driver trust")
    code = blocks(text, "python")[-1]
    out = run_python(code).splitlines()
    assert "'can', 'captures', 'obd'" in out[0]
    assert out[1] == "intact 64"
    assert "prints `['can', 'captures', 'obd']`" in text and "`intact 64`" in text
