"""The query tool under attack: model-written SQL reads the dataset and nothing else.

Every attack uses DuckDB's documented functions for files, globbing, settings, extensions and
databases; each must fail with QUERY_REFUSED (or fail without effect), and the tool must keep
answering afterwards. A runaway query is interrupted with QUERY_TIMEOUT.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from hwbridge.captures import CaptureDriver, decode_captures
from hwbridge.core.models import ToolError
from tests.conftest import BUSY_MARGIN_S

from .conftest import FLEET_DBC, drive, write_capture
from .conftest import ask_query as _query

TIMEOUT_S = 1.0
"""The `driver` fixture's query timeout."""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("safety")
    dbc = root / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    capture = write_capture(root / "drive.blf", drive(20.0))
    (root / "secret.txt").write_text("the secret is 42\n")
    (root / "other.csv").write_text("a,b\n1,2\n")
    decode_captures([capture], [dbc], root / "ds")
    return root


@pytest.fixture
def driver(dataset: Path) -> Iterator[CaptureDriver]:
    with CaptureDriver.from_dataset(dataset / "ds", timeout_s=TIMEOUT_S) as d:
        yield d


def _attacks(root: Path) -> list[str]:
    secret = root / "secret.txt"
    part = next((root / "ds" / "Engine").rglob("*.parquet"))
    return [
        # reading other files, by every reader DuckDB documents
        f"SELECT * FROM read_csv('{secret}')",
        f"SELECT * FROM read_csv_auto('{root / 'other.csv'}')",
        f"SELECT * FROM read_text('{secret}')",
        f"SELECT * FROM read_blob('{secret}')",
        f"SELECT * FROM read_json('{secret}')",
        f"SELECT * FROM read_json_auto('{secret}')",
        f"SELECT * FROM read_parquet('{part}')",
        f"SELECT * FROM parquet_scan('{part}')",
        f"SELECT * FROM parquet_metadata('{part}')",
        f"SELECT * FROM sniff_csv('{secret}')",
        f"SELECT * FROM '{secret}'",
        f"SELECT * FROM '{root / 'other.csv'}'",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT content FROM read_text('https://example.com/')",
        # listing directories
        f"SELECT * FROM glob('{root}/*')",
        "SELECT * FROM glob('/etc/*')",
        f"SELECT * FROM glob('{root / 'ds'}/**')",
        # writing, attaching, exporting, extensions
        f"COPY (SELECT 1) TO '{root / 'out.csv'}'",
        f"COPY Engine TO '{root / 'engine.parquet'}' (FORMAT parquet)",
        f"ATTACH '{root / 'x.duckdb'}' AS x",
        "DETACH memory",
        f"EXPORT DATABASE '{root / 'export'}'",
        f"IMPORT DATABASE '{root / 'export'}'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "FORCE INSTALL httpfs",
        # changing the engine or the catalog
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "RESET lock_configuration",
        "SET allowed_directories = ['/']",
        "PRAGMA enable_profiling",
        "PRAGMA threads = 1",
        "CALL enable_logging()",
        "SELECT * FROM enable_profiling()",
        "SELECT * FROM duckdb_settings()",
        "CREATE TABLE t AS SELECT 1",
        "CREATE VIEW v AS SELECT 1",
        "CREATE MACRO m() AS 1",
        "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
        "DROP VIEW Engine",
        "INSERT INTO Engine SELECT * FROM Engine",
        "UPDATE Engine SET Gear = 1",
        "DELETE FROM Engine",
        "ALTER VIEW Engine RENAME TO x",
        "SET VARIABLE x = 1",
        "PREPARE p AS SELECT 1",
        "BEGIN TRANSACTION",
        "CHECKPOINT",
        "VACUUM",
        "USE system",
        # a second statement behind the first, however it is hidden
        "SELECT 1; SELECT * FROM read_text('/etc/passwd')",
        "SELECT 1; DROP VIEW Engine",
        "SELECT 1 /* comment */; COPY (SELECT 1) TO '/tmp/x.csv'",
        "SELECT ';'; ATTACH 'x.db'",
        "SELECT 1 -- a comment\n; SET threads = 1",
        # nested SQL text
        "SELECT * FROM query('SELECT * FROM read_text(''/etc/passwd'')')",
        "SELECT * FROM query_table('Engine')",
        "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
        "SELECT * FROM (SELECT * FROM glob('/*'))",
        "WITH x AS (SELECT * FROM read_text('/etc/hostname')) SELECT * FROM x",
        "SELECT (SELECT content FROM read_text('/etc/hostname'))",
        "SUMMARIZE SELECT * FROM read_csv('/etc/passwd')",
        "DESCRIBE SELECT * FROM glob('/etc/*')",
    ]


def test_every_attack_is_refused_and_the_tool_keeps_serving(
    driver: CaptureDriver, dataset: Path
) -> None:
    before = sorted(p.name for p in dataset.iterdir())
    for sql in _attacks(dataset):
        code, detail = _query(driver, sql)
        assert code == "QUERY_REFUSED", (sql, code, detail)
        assert "the secret is 42" not in str(detail)
        # after every refusal the dataset still answers
        code, result = _query(driver, "SELECT count(*) AS n FROM Engine")
        assert code is None and result["rows"] == [[200]], (sql, result)
    assert sorted(p.name for p in dataset.iterdir()) == before  # nothing written


def test_settings_are_locked_and_unreadable(driver: CaptureDriver) -> None:
    # the model cannot read them (current_setting is not an analyst's function) ...
    code, detail = _query(driver, "SELECT current_setting('lock_configuration')")
    assert code == "QUERY_REFUSED" and "current_setting" in str(detail)
    # ... and the worker's connection has them locked
    from hwbridge.captures.sql.worker import Worker

    settings = {"max_rows": 10, "max_chars": 1000, "max_columns": 10}
    worker = Worker(
        list(driver.dataset.tables.values()), {**settings, "memory_limit": "256MB", "threads": 1}
    )
    rows = worker.con.sql(
        "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'), "
        "current_setting('autoload_known_extensions'), current_setting('allowed_directories')"
    ).fetchall()
    assert rows == [(False, True, False, [])]
    answer = orjson.loads(worker.answer({"kind": "run", "sql": "SET lock_configuration = false"}))
    assert answer["ok"] is False and answer["code"] == "QUERY_REFUSED"
    worker.con.close()


def test_getenv_is_refused(driver: CaptureDriver) -> None:
    code, detail = _query(driver, "SELECT getenv('HOME')")
    assert code == "QUERY_REFUSED" and "getenv" in str(detail)


@pytest.mark.slow
def test_a_runaway_query_is_interrupted_and_the_next_one_runs(driver: CaptureDriver) -> None:
    started = time.monotonic()
    code, detail = _query(driver, "SELECT count(*) FROM range(1000000000000) a")
    assert code == "QUERY_TIMEOUT", detail
    assert time.monotonic() - started < TIMEOUT_S + BUSY_MARGIN_S
    code, detail = _query(
        driver, "SELECT count(*) FROM Engine a, Engine b, Engine c, Engine d, Engine e"
    )
    assert code == "QUERY_TIMEOUT", detail
    code, result = _query(driver, "SELECT max(CoolantTemp) FROM Engine")
    assert code is None and result["rows"] == [[101]]


def test_results_are_bounded_in_rows_and_characters(dataset: Path) -> None:
    with CaptureDriver.from_dataset(dataset / "ds", max_rows=50, max_chars=2000) as driver:
        code, result = _query(driver, "SELECT * FROM Engine")
        assert code is None
        assert result["truncated"] is True
        assert result["row_count"] == len(result["rows"]) < 50
        assert len(json.dumps(result["rows"], separators=(",", ":"))) <= 2000
        code, result = _query(driver, "SELECT range FROM range(1000)")
        assert result["row_count"] == 50 and result["truncated"] is True
        code, result = _query(driver, "SELECT string_agg('x', '') AS big FROM range(100000)")
        assert result["rows"] == [] and result["truncated"] is True


def test_long_sql_and_empty_sql_are_refused(driver: CaptureDriver) -> None:
    with pytest.raises(ToolError) as caught:
        driver.engine.query("SELECT 1" + " " * 10_000)
    assert caught.value.code == "QUERY_REFUSED"
    with pytest.raises(ToolError) as caught:
        driver.engine.query("-- nothing")
    assert caught.value.code == "QUERY_REFUSED"


def test_ordinary_analytics_work(driver: CaptureDriver) -> None:
    code, result = _query(
        driver,
        "SELECT source, Gear_label, count(*) AS n, round(avg(EngineSpeed), 2) AS rpm "
        'FROM "Engine" GROUP BY ALL ORDER BY Gear_label',
    )
    assert code is None
    assert result["columns"] == ["source", "Gear_label", "n", "rpm"]
    assert [r[1] for r in result["rows"]] == ["D", "N", "P", "R"]
    code, result = _query(driver, "SELECT min(timestamp) AS t FROM Engine WHERE CoolantTemp > 100")
    assert result["rows"] == [["2023-11-14T22:13:25Z"]]
