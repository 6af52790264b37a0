"""`hwbridge mcp --bus BUS --discover`: the discovery tools served over stdio by a real server
(a generated drive replayed as its live bus, no database), and in the printed configuration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.drives import generate

from tests.cli.conftest import DEMO, Run, run  # noqa: F401  (the runner fixture)
from tests.mcp.conftest import Session, stdio_session, text_of

DISCOVERY = {"survey_bus", "snapshot_bus", "diff_snapshots", "correlate_signal", "define_signal",
             "draft_dbc"}  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("discover-mcp")
    capture = generate(DEMO, 20.0, seed=6).write(folder / "drive.blf")
    session = stdio_session(
        "--bus", f"replay:{capture}?loop=1", "--discover", stderr=folder / "stderr.txt"
    )
    yield session
    session.close()


def test_the_discovery_tools_are_served_read_only(server: Session) -> None:
    tools = {t.name: t for t in server.run(lambda c: c.list_tools()).tools}
    assert set(tools) >= DISCOVERY
    for name in DISCOVERY:
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is True, name
    survey = server.run(lambda c: c.call_tool("survey_bus", {"duration_ms": 800}))
    assert not survey.is_error, text_of(survey)
    ids = {m["id"] for m in survey.structured_content["messages"]}
    assert 0x100 in ids  # EngineData's frames, with no database to name them
    assert "known_messages" not in survey.structured_content
    if "match_known_databases" in tools:  # with the opendbc extra
        ranked = server.run(lambda c: c.call_tool("match_known_databases", {"duration_ms": 800}))
        assert not ranked.is_error, text_of(ranked)
        assert ranked.structured_content["returned"] == len(ranked.structured_content["matches"])


def test_discover_reaches_the_printed_config(run: Run) -> None:  # noqa: F811
    printed = run("mcp", "--print-config", "--bus", "virtual:x", "--discover")
    assert printed.code == 0, printed.err
    args = json.loads(printed.out)["mcpServers"]["hwbridge"]["args"]
    assert args == ["mcp", "--bus", "virtual:x", "--discover"]
    refused = run("mcp", "--discover")
    assert refused.code == 2
    assert "--discover needs --bus" in refused.err.splitlines()[-1]


def test_a_database_given_with_discover_is_the_known_part(run: Run, tmp_path: Path) -> None:  # noqa: F811
    import contextlib

    from hwbridge.cli.bridges import open_bridges
    from hwbridge.cli.main import build_parser

    args = build_parser().parse_args(
        ["mcp", "--bus", "virtual:discover-mcp", "--discover", "--dbc", str(DEMO)]
    )
    with contextlib.ExitStack() as stack:
        can = open_bridges(args, stack, offline=True)["can"]
        names = {t.name for t in can.list_tools()}
        assert names >= DISCOVERY and "read_signals" in names
        assert "EngineData" in can.database  # type: ignore[attr-defined]


PART = """VERSION ""

BU_: Gnss

BO_ 1952 GnssSpeed: 8 Gnss
 SG_ Speed : 0|16@1+ (0.01,0) [0|655.35] "km/h" Vector__XXX

BO_ 256 NotEngineData: 8 Gnss
 SG_ Other : 0|8@1+ (1,0) [0|255] "" Vector__XXX
"""


def test_reference_databases_join_the_known_part_the_first_describing_an_id_wins(
    tmp_path: Path,
) -> None:
    import contextlib

    from hwbridge.cli.bridges import open_bridges
    from hwbridge.cli.main import build_parser

    part = tmp_path / "gnss.dbc"
    part.write_text(PART)
    args = build_parser().parse_args(
        ["mcp", "--bus", "virtual:discover-mcp-ref", "--discover", "--dbc", str(DEMO),
         "--reference", str(part)]
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        db = open_bridges(args, stack, offline=True)["can"].database  # type: ignore[attr-defined]
        assert "EngineData" in db and "GnssSpeed" in db
        assert "NotEngineData" not in db  # 0x100 is EngineData's, from --dbc
