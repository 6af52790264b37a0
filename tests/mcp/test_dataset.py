"""`hwbridge mcp --dataset DIR`: the capture tools over MCP, alone or beside a bus, driven by
the MCP SDK's own client over stdio as a desktop client would start it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import can
from hwbridge.can import CanDatabase
from hwbridge.captures.decode import decode_captures
from hwbridge.cli.mcp_server import OFFLINE_TOOLS
from tests.cli.conftest import DEMO, ENGINE, Run
from tests.mcp.conftest import Session, stdio_session, text_of

CAPTURE_TOOLS = {
    "describe_dataset",
    "query",
    "signal_stats",
    "find_events",
    "signal_timeseries",
    "plot_signals",
}


@pytest.fixture(scope="module")
def dataset(module_tmp: Path) -> Path:
    """30 EngineData frames of the demo vehicle, decoded into a dataset."""
    frame = CanDatabase.load(DEMO).encode("EngineData", ENGINE)
    log = module_tmp / "drive.log"
    with can.Logger(str(log)) as writer:
        for i in range(30):
            writer.on_message_received(
                can.Message(
                    timestamp=1_700_000_000 + i * 0.01,
                    arbitration_id=frame.arbitration_id,
                    data=frame.data,
                    is_extended_id=frame.is_extended,
                    channel="vcan0",
                )
            )
    root = module_tmp / "ds"
    decode_captures([log], [DEMO], root)
    return root


@pytest.fixture(scope="module")
def alone(dataset: Path, module_tmp: Path) -> Iterator[Session]:
    session = stdio_session("--dataset", str(dataset), stderr=module_tmp / "alone-err.txt")
    yield session
    session.close()


def test_the_dataset_alone_serves_the_capture_tools_read_only(alone: Session) -> None:
    tools = {t.name: t for t in alone.run(lambda c: c.list_tools()).tools}
    assert set(tools) == CAPTURE_TOOLS  # no CAN catalog of a database nobody named
    for tool in tools.values():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False


def test_a_query_answers_with_its_counts(alone: Session) -> None:
    sql = "SELECT EngineSpeed FROM EngineData ORDER BY timestamp LIMIT 5"
    result = alone.run(lambda c: c.call_tool("query", {"sql": sql}))
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    assert answer is not None
    assert answer["rows"] == [[1500.0]] * 5
    assert answer["row_count"] == answer["returned"] == 5
    assert answer["truncated"] is False
    assert json.loads(text_of(result))["columns"] == ["EngineSpeed"]
    refused = alone.run(lambda c: c.call_tool("query", {"sql": "SELECT * FROM pg_settings"}))
    assert refused.is_error and text_of(refused).startswith("QUERY_REFUSED")


def test_the_dataset_beside_a_bus_and_a_database(dataset: Path, module_tmp: Path) -> None:
    session = stdio_session(
        "--dataset", str(dataset), "--bus", "virtual:hwb-mcp-dataset", "--dbc", str(DEMO),
        stderr=module_tmp / "beside-err.txt",
    )  # fmt: skip
    try:
        names = {t.name for t in session.run(lambda c: c.list_tools()).tools}
        stats = session.run(lambda c: c.call_tool("signal_stats", {"signal": "EngineSpeed"}))
        live = session.run(lambda c: c.call_tool("bus_status", {}))
    finally:
        session.close()
    assert names >= CAPTURE_TOOLS and {"read_signals", "capture", "bus_status"} <= names
    assert not stats.is_error and stats.structured_content is not None
    assert stats.structured_content["count"] == 30
    assert not live.is_error


def test_the_dataset_beside_the_offline_catalog(dataset: Path, module_tmp: Path) -> None:
    session = stdio_session(
        "--dataset", str(dataset), "--dbc", str(DEMO), stderr=module_tmp / "catalog-err.txt"
    )
    try:
        names = {t.name for t in session.run(lambda c: c.list_tools()).tools}
    finally:
        session.close()
    assert names == CAPTURE_TOOLS | OFFLINE_TOOLS


def test_the_printed_config_names_the_dataset_absolutely(run: Run, dataset: Path) -> None:
    printed = run("mcp", "--print-config", "--dataset", str(dataset))
    assert printed.code == 0, printed.err
    entry = json.loads(printed.out)["mcpServers"]["hwbridge"]
    assert entry["args"] == ["mcp", "--dataset", str(dataset.resolve())]


@pytest.mark.parametrize("config", [False, True])
def test_a_folder_that_is_no_dataset_is_a_usage_error(
    run: Run, dataset: Path, tmp_path: Path, config: bool
) -> None:
    extra = ["--print-config"] if config else []
    missing = run("mcp", "--dataset", str(tmp_path / "nothing"), *extra)
    above = run("mcp", "--dataset", str(dataset.parent), *extra)
    for result in (missing, above):
        assert result.code == 2, result.err
        assert result.err.startswith("hwbridge: --dataset: ")
        assert len(result.err.strip().splitlines()) == 1
        assert result.out == ""
    assert f"at {dataset};" in above.err


def test_allow_names_nothing_a_dataset_can_send(run: Run, dataset: Path) -> None:
    result = run("mcp", "--dataset", str(dataset), "--allow", "ClimateCommand")
    assert result.code == 2
    assert "--allow ClimateCommand" in result.err
