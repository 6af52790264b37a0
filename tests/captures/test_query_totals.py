"""The query tool's counts: `returned` (the rows in the answer, also `row_count`), `total`
(the rows the query produces, counted by DuckDB without fetching them) and, when counting
cannot end in time, `total: null` with `total_at_least`. A count never costs the rows."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hwbridge.captures.dataset import Dataset
from hwbridge.captures.decode import decode_captures
from hwbridge.captures.driver import CaptureDriver
from hwbridge.captures.sql.engine import QueryLimits, SqlEngine
from tests.captures.conftest import FLEET_DBC, drive, write_capture
from tests.conftest import BUSY_MARGIN_S

COUNT_TIMEOUT_S = 0.5
"""The `engine` fixture's count_timeout_s (its query timeout_s is 5 s)."""

# 1e10 rows: the first rows come at once, counting them all takes minutes
ENDLESS = "SELECT a.range AS x FROM range(100000) a, range(100000) b"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("totals")
    dbc = root / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    decode_captures([write_capture(root / "drive.blf", drive(20.0))], [dbc], root / "ds")
    return root / "ds"


@pytest.fixture(scope="module")
def engine(dataset: Path) -> Iterator[SqlEngine]:
    limits = QueryLimits(
        max_rows=50, max_chars=2000, timeout_s=5.0, count_timeout_s=COUNT_TIMEOUT_S
    )
    engine = SqlEngine(Dataset.open(dataset), limits)
    yield engine
    engine.close()


def _answer(engine: SqlEngine, sql: str) -> dict[str, Any]:
    return engine.query(sql).to_dict()


def test_a_whole_answer_says_so(engine: SqlEngine) -> None:
    answer = _answer(engine, "SELECT range FROM range(7)")
    assert answer["rows"] == [[i] for i in range(7)]
    assert answer["returned"] == answer["row_count"] == answer["total"] == 7
    assert answer["truncated"] is False
    assert "total_at_least" not in answer
    empty = _answer(engine, "SELECT range FROM range(0)")
    assert (empty["returned"], empty["total"], empty["truncated"]) == (0, 0, False)


def test_rows_past_max_rows_are_counted_not_fetched(engine: SqlEngine) -> None:
    answer = _answer(engine, "SELECT range FROM range(1000) ORDER BY range DESC")
    assert answer["returned"] == answer["row_count"] == len(answer["rows"]) == 50
    assert answer["total"] == 1000 and answer["truncated"] is True
    assert answer["rows"][0] == [999]
    engine_rows = _answer(engine, "SELECT EngineSpeed FROM Engine WHERE EngineSpeed > 0")
    counted = _answer(engine, "SELECT count(*) FROM Engine WHERE EngineSpeed > 0")
    assert engine_rows["total"] == counted["rows"][0][0] > 50


def test_rows_cut_by_characters_keep_the_exact_total(engine: SqlEngine) -> None:
    sql = "SELECT 'abcdefghijklmnopqrstuvwxyz' || 'abcdefghijklmnopqrstuvwxyz' || range AS s "
    answer = _answer(engine, sql + "FROM range(45)")  # 45 rows of ~60 characters
    assert answer["total"] == 45  # all fetched (fewer than max_rows): known without counting
    assert 0 < answer["returned"] < 45 and answer["truncated"] is True


def test_a_count_that_cannot_end_in_time_says_what_is_known(engine: SqlEngine) -> None:
    engine.query("SELECT 1")  # the worker started (starting it is not timed)
    started = time.monotonic()
    answer = _answer(engine, ENDLESS)
    took = time.monotonic() - started
    assert answer["returned"] == 50 and answer["truncated"] is True
    assert answer["total"] is None and answer["total_at_least"] == 51
    # the count was interrupted at count_timeout_s (not the query's 5 s), the rows kept
    assert took < COUNT_TIMEOUT_S + BUSY_MARGIN_S
    after = _answer(engine, "SELECT 41 + 1 AS x")  # the worker answers normally after it
    assert after["rows"] == [[42]] and after["total"] == 1


def test_no_count_when_counting_is_switched_off(dataset: Path) -> None:
    limits = QueryLimits(max_rows=10, count_timeout_s=0.0)
    engine = SqlEngine(Dataset.open(dataset), limits)
    try:
        answer = engine.query("SELECT range FROM range(100)").to_dict()
    finally:
        engine.close()
    assert answer["returned"] == 10
    assert answer["total"] is None and answer["total_at_least"] == 11


def test_the_tool_result_carries_the_counts(dataset: Path) -> None:
    with CaptureDriver.from_dataset(dataset, max_rows=5) as driver:
        call = {"tool": "query", "arguments": {"sql": "SELECT range FROM range(12)"}}
        response = driver.process_llm_response(json.dumps(call))
    result = response.tool_call_result
    assert isinstance(result, dict)
    assert {k: result[k] for k in ("row_count", "returned", "total", "truncated")} == {
        "row_count": 5,
        "returned": 5,
        "total": 12,
        "truncated": True,
    }


@pytest.mark.slow
def test_a_count_never_turns_rows_into_a_timeout(dataset: Path) -> None:
    """count_timeout_s longer than the query's timeout: the count stops at 80% of it, and
    the rows come back instead of QUERY_TIMEOUT."""
    timeout_s = 1.5
    limits = QueryLimits(max_rows=10, timeout_s=timeout_s, count_timeout_s=30.0)
    engine = SqlEngine(Dataset.open(dataset), limits)
    try:
        engine.query("SELECT 1")  # the worker started (starting it is not timed)
        started = time.monotonic()
        answer = engine.query(ENDLESS).to_dict()
        took = time.monotonic() - started
    finally:
        engine.close()
    assert answer["returned"] == 10 and answer["total"] is None
    assert answer["total_at_least"] == 11
    assert took < timeout_s + BUSY_MARGIN_S  # within the query's timeout, not the count's 30 s


def test_find_events_says_how_many_it_returned(dataset: Path) -> None:
    with CaptureDriver.from_dataset(dataset) as driver:
        found = driver.questions.find_events("EngineSpeed > 0", 0, None)
    assert found["returned"] == len(found["events"]) >= 1
    assert found["total"] >= found["returned"]
    assert found["truncated"] is (found["total"] > found["returned"])
