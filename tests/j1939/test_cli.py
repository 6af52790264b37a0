"""`--j1939 BUS` on `hwbridge mcp` and `hwbridge chat`: options, the printed configuration,
and the tools listed and called through a real `hwbridge mcp --j1939` over stdio."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run, run  # noqa: F401  (the runner fixture)
from tests.mcp.conftest import Session, stdio_session, text_of
from tests.shared_data import DATA, require_shared

LOG = DATA / "css" / "truck_j1939_gps.MF4"
DBC = DATA / "css" / "CSS-Electronics-SAE-J1939-DEMO.dbc"
TOOLS = {"j1939_dm1", "j1939_dm2", "j1939_request", "j1939_nodes"}


def test_both_commands_take_the_option() -> None:
    from hwbridge.cli.main import build_parser

    parser = build_parser()
    for command in ("mcp", "chat"):
        choices: Any = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert "--j1939" in choices[command]._option_string_actions


def test_the_j1939_options_reach_the_printed_config(run: Run, tmp_path: Path) -> None:  # noqa: F811
    capture = tmp_path / "truck.asc"
    capture.write_text("")
    printed = run(
        "mcp", "--print-config", "--j1939", f"replay:{capture}?speed=max",
        "--allow", "j1939_dm11", "--allow-service", "j1939_DM3",
    )  # fmt: skip
    assert printed.code == 0, printed.err
    args = json.loads(printed.out)["mcpServers"]["hwbridge"]["args"]
    assert args == [
        "mcp", "--j1939", f"replay:{capture.resolve()}?speed=max",
        "--allow-service", "j1939_dm3", "j1939_dm11",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--allow-service", "j1939_dm11"], "--allow-service needs --obd BUS_OR_PORT or --j1939"),
        (["--j1939", "no bus here"], "--j1939 no bus here: invalid CAN bus"),
        (["--j1939", "virtual:x", "--allow", "j1939_dm12"], "'j1939_dm12' names no diagnostic"),
        (["--obd", "virtual:x", "--allow", "j1939_dm11"], "--allow j1939_dm11: no CAN message"),
    ],
)
def test_bad_options_are_one_line(run: Run, argv: list[str], words: str) -> None:  # noqa: F811
    result = run("mcp", *argv)
    assert result.code == 2, result.err
    assert words in result.err.splitlines()[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    require_shared()
    stderr = tmp_path_factory.mktemp("j1939-mcp") / "stderr.txt"
    session = stdio_session("--j1939", f"replay:{LOG}?loop=1", stderr=stderr)
    yield session
    session.close()


def test_the_tools_are_listed_and_callable_over_mcp(server: Session) -> None:
    tools = {t.name: t for t in server.run(lambda c: c.list_tools()).tools}
    assert set(tools) == TOOLS  # clearing is not allowed: not offered
    for name in TOOLS:
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is True
    schema = tools["j1939_request"].input_schema
    assert schema["properties"]["pgn"]["maximum"] == 262143
    assert schema["properties"]["address"]["maximum"] == 253
    dm1 = server.run(lambda c: c.call_tool("j1939_dm1", {}))
    assert not dm1.is_error, text_of(dm1)
    [engine] = dm1.structured_content["sources"]
    assert engine["lamps"]["mil"] == "on"
    assert [d["spn"] for d in engine["dtcs"]] == [980, 3216, 609, 609]
    cleared = server.run(lambda c: c.call_tool("j1939_clear_dtcs", {"which": "active"}))
    assert cleared.is_error and text_of(cleared).startswith("SEND_NOT_ALLOWED: ")
    nodes = server.run(lambda c: c.call_tool("j1939_nodes", {}))
    assert [n["address"] for n in nodes.structured_content["nodes"]] == [0, 85]


def test_the_same_bus_as_bus_shares_its_connection_and_database() -> None:
    import contextlib

    from hwbridge.cli.bridges import open_bridges
    from hwbridge.cli.main import build_parser

    bus = "virtual:j1939-cli"
    args = build_parser().parse_args(["mcp", "--bus", bus, "--j1939", bus, "--allow", "j1939_dm3"])
    with contextlib.ExitStack() as stack:
        parts = open_bridges(args, stack, offline=True)
        can, j1939 = parts["can"], parts["j1939"]
        assert j1939.link.adapter is can.networks["can"].adapter  # type: ignore[attr-defined]
        assert j1939.database.db is can.database  # type: ignore[attr-defined]
        assert j1939.policy is can.policy  # type: ignore[attr-defined]
        assert "j1939_clear_dtcs" in {t.name for t in j1939.list_tools()}
    args = build_parser().parse_args(["mcp", "--j1939", "virtual:j1939-cli", "--dbc", str(DBC)])
    if DBC.exists():
        with contextlib.ExitStack() as stack:
            parts = open_bridges(args, stack, offline=True)
            assert parts["j1939"].database.db.path == str(DBC)  # type: ignore[attr-defined]
