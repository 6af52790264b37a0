"""The query tool bounded under attack: time, memory, scope and honesty of the answer.

Each reproduction from the review is here as it was found: a function DuckDB does not
interrupt, a result whose conversion ran outside the timer, memory DuckDB does not account, a
CTE declared in a subquery that opened a system view, settings that revealed folders, and the
answers that came back wrong or as internal errors. The sandbox layer (the worker process) is
also tested alone, with the checks bypassed through `SqlEngine.run`, so that it holds even for
SQL the allow-lists would let through.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwbridge.captures import CaptureDriver, decode_captures
from hwbridge.captures.sql.sandbox import _Killed
from hwbridge.core.models import ToolError
from tests.conftest import BUSY_MARGIN_S, wait_until

from .conftest import FLEET_DBC, drive, write_capture
from .conftest import ask_query as _query

TIMEOUT_S = 1.0
MEMORY_LIMIT = "256MB"
SLACK_S = 1.0  # what the issue allows past the timeout (plus a busy machine's BUSY_MARGIN_S)
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sandbox")
    dbc = root / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    decode_captures([write_capture(root / "drive.blf", drive(20.0))], [dbc], root / "ds")
    return root / "ds"


@pytest.fixture(scope="module")
def driver(dataset: Path) -> Iterator[CaptureDriver]:
    with CaptureDriver.from_dataset(dataset, timeout_s=TIMEOUT_S, memory_limit=MEMORY_LIMIT) as d:
        d.engine.query("SELECT 1")  # the first query waits for the worker to start
        yield d


def _rss(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE


class PeakRss:
    """The highest resident size this process reaches while the block runs."""

    def __enter__(self) -> PeakRss:
        self.base = _rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.base


def _answers_normally(driver: CaptureDriver) -> None:
    """The next query answers as if nothing happened (how fast, with a spare worker ready, is
    measured by `make bench`: a test on a loaded machine may wait for the spare to start)."""
    started = time.monotonic()
    code, result = _query(driver, "SELECT count(*) AS n FROM Engine")
    assert code is None and result["rows"] == [[200]], result
    assert time.monotonic() - started < 10.0


def _bounded(
    driver: CaptureDriver, sql: str, *, via_tool: bool = True, timeout_s: float = TIMEOUT_S
) -> str:
    """The error code of `sql`, which must answer within timeout + 1 s (and a busy machine's
    margin) without growing this process; the next ordinary query must answer normally."""
    started = time.monotonic()
    with PeakRss() as rss:
        if via_tool:
            code, detail = _query(driver, sql)
        else:
            try:
                driver.engine.run(sql)
                code, detail = None, None
            except ToolError as exc:
                code, detail = exc.code, str(exc)
    elapsed = time.monotonic() - started
    assert elapsed < timeout_s + SLACK_S + BUSY_MARGIN_S, (sql, elapsed, code, detail)
    assert rss.growth < 100 * 1000**2, (sql, rss.growth)
    _answers_normally(driver)
    assert code is not None, sql
    return code


# -- the reproductions ---------------------------------------------------------------------


def test_a_function_duckdb_does_not_interrupt_is_stopped_at_the_timeout(
    driver: CaptureDriver,
) -> None:
    # allowed functions only: the allow-list lets it through, the worker's kill stops it
    sql = "SELECT length(regexp_replace(string_agg('a', ''), 'a', 'bb', 'g')) FROM range(50000000)"
    assert _bounded(driver, sql) == "QUERY_TIMEOUT"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT length(regexp_replace(repeat('a', 50000000), 'a', 'bb', 'g'))",
        "SELECT lpad('x', 1500000000, 'y')",
        "SELECT list_sort(range(150000000))",
        "SELECT list_distinct(range(100000000))",
    ],
)
def test_the_worker_alone_bounds_the_bombs_of_the_review(driver: CaptureDriver, sql: str) -> None:
    assert _bounded(driver, sql, via_tool=False) in ("QUERY_TIMEOUT", "QUERY_FAILED")


def test_a_huge_result_is_cut_before_it_becomes_python(dataset: Path) -> None:
    # DuckDB builds the 4-million-element list first: 5 s for that on a loaded machine (a
    # 1 s timeout stopped it there on a stress run, before the cut this test is about)
    timeout_s = 5.0
    with CaptureDriver.from_dataset(
        dataset, timeout_s=timeout_s, memory_limit=MEMORY_LIMIT
    ) as driver:
        started = time.monotonic()
        code, result = _query(driver, "SELECT list({'a': true}) AS l FROM range(4000000)")
        assert time.monotonic() - started < timeout_s + SLACK_S + BUSY_MARGIN_S
        assert code is None, result
        assert result["rows"] == [] and result["truncated"] is True
        _answers_normally(driver)


def test_memory_duckdb_does_not_account_is_bounded(dataset: Path) -> None:
    sql = "SELECT damerau_levenshtein(repeat('ab', 6000), repeat('ba', 6000))"
    # a timeout the memory reaches first even on a loaded machine (at 1 s, three test
    # workers on two cores once let the timeout stop it before its memory had grown)
    with CaptureDriver.from_dataset(dataset, timeout_s=10.0, memory_limit=MEMORY_LIMIT) as driver:
        code, _ = _query(driver, sql)
        assert code == "QUERY_REFUSED"  # not an analyst's function
        # and the worker holds it even when it runs: killed at memory_limit + margin
        worker = driver.engine.sandbox
        kills = worker.kills
        assert _bounded(driver, sql, via_tool=False, timeout_s=10.0) == "QUERY_FAILED"
        assert worker.kills == kills + 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM (WITH pg_settings AS (SELECT 1) SELECT 2) AS a, pg_settings",
        "SELECT * FROM (WITH duckdb_settings AS (SELECT 1) SELECT 2) AS a, pg_settings",
        "WITH pg_settings AS (SELECT * FROM pg_settings) SELECT * FROM pg_settings",
        "WITH x AS (SELECT 1), y AS (SELECT * FROM z), z AS (SELECT 2) SELECT * FROM y",
        "SELECT (SELECT count(*) FROM (WITH s AS (SELECT 1) SELECT * FROM s)), "
        "(SELECT count(*) FROM s) FROM Engine",
        "SELECT * FROM information_schema.tables",
        "SELECT * FROM pg_catalog.pg_settings",
        "WITH pg_settings AS (SELECT 1) SELECT * FROM main.pg_settings",
        "SELECT * FROM duckdb_tables",
        "SELECT * FROM sqlite_master",
    ],
)
def test_a_name_reaches_the_dataset_or_a_cte_in_scope_and_nothing_else(
    driver: CaptureDriver, sql: str
) -> None:
    code, detail = _query(driver, sql)
    assert code == "QUERY_REFUSED", (sql, detail)
    assert "enable_external_access" not in str(detail)


def test_ctes_in_scope_work(driver: CaptureDriver) -> None:
    code, result = _query(
        driver,
        "WITH fast AS (SELECT EngineSpeed FROM Engine WHERE EngineSpeed > 1000), "
        "n AS (SELECT count(*) AS c FROM fast) "
        "SELECT c, (WITH one AS (SELECT 1 AS v) SELECT v FROM one) AS v FROM n",
    )
    assert code is None, result
    assert result["rows"][0][1] == 1
    code, result = _query(
        driver,
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) "
        "SELECT sum(i) FROM r",
    )
    assert code is None and result["rows"] == [[15]], result


@pytest.mark.parametrize(
    "setting", ["allowed_paths", "secret_directory", "home_directory", "temp_directory"]
)
def test_settings_that_reveal_folders_are_not_readable(driver: CaptureDriver, setting: str) -> None:
    code, detail = _query(driver, f"SELECT current_setting('{setting}')")
    assert code == "QUERY_REFUSED"
    assert "current_setting" in str(detail)
    assert os.getcwd() not in str(detail) and str(Path.home()) not in str(detail)


@pytest.mark.parametrize(
    "function",
    ["version()", "getvariable('x')", "current_database()", "current_query()", "nextval('s')"],
)
def test_functions_outside_the_allow_list_are_refused_by_name(
    driver: CaptureDriver, function: str
) -> None:
    code, detail = _query(driver, f"SELECT {function}")
    assert code == "QUERY_REFUSED"
    assert function.split("(", maxsplit=1)[0] in str(detail)


def test_an_analysts_functions_are_allowed(driver: CaptureDriver) -> None:
    code, result = _query(
        driver,
        "SELECT source, date_trunc('second', timestamp) AS s, count(*) AS n, "
        "round(avg(EngineSpeed), 1) AS rpm, max(CoolantTemp) - min(CoolantTemp) AS span, "
        "quantile_cont(EngineSpeed, 0.9) AS p90, stddev_samp(Torque) AS sd, "
        "upper(min(Gear_label)) AS g, list(DISTINCT Gear_label ORDER BY Gear_label)[1] AS first_gear, "
        "epoch_ms(min(timestamp)) AS t0, "
        "lag(count(*)) OVER (PARTITION BY source ORDER BY date_trunc('second', timestamp)) AS prev, "
        "CASE WHEN max(EngineSpeed) > 3000 THEN 'high' ELSE 'low' END AS band, "
        "coalesce(nullif(max(Gear), 0), -1) AS gear, strftime(min(timestamp), '%H:%M') AS hm "
        "FROM Engine WHERE Gear_label LIKE '%' AND EngineSpeed BETWEEN 0 AND 20000 "
        "GROUP BY source, s ORDER BY s LIMIT 3",
    )
    assert code is None, result
    assert result["row_count"] == 3


# -- honest answers ------------------------------------------------------------------------


def test_the_largest_integers_come_back_exact(driver: CaptureDriver) -> None:
    code, result = _query(
        driver,
        "SELECT 340282366920938463463374607431768211455::UHUGEINT AS u, "
        "-170141183460469231731687303715884105727::HUGEINT AS h, 12::HUGEINT AS small, "
        "18446744073709551615::UBIGINT AS ub",
    )
    assert code is None, result
    assert result["rows"] == [
        [
            "340282366920938463463374607431768211455",
            "-170141183460469231731687303715884105727",
            12,
            18446744073709551615,
        ]
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'infinity'::TIMESTAMP AS t",
        "SELECT '-infinity'::DATE AS d",
        "SELECT 170141183460469231731687303715884105727::HUGEINT + 1 AS h",
        "SELECT 1 FROM " + ", ".join(f"(SELECT 1) AS t{i}" for i in range(400)),
        "SELECT " + "(" * 900 + "1" + ")" * 900,
    ],
)
def test_values_python_cannot_hold_and_deep_queries_fail_cleanly(
    driver: CaptureDriver, sql: str
) -> None:
    code, detail = _query(driver, sql)
    assert code in ("QUERY_FAILED", "QUERY_TIMEOUT", None), (sql, detail)
    assert "INTERNAL_ERROR" not in str(detail)
    _answers_normally(driver)


def test_columns_are_capped_like_rows(driver: CaptureDriver) -> None:
    code, result = _query(driver, "SELECT " + ", ".join(f"{i} AS c{i}" for i in range(150)))
    assert code is None, result
    assert len(result["columns"]) == 100 == len(result["rows"][0])
    assert result["column_count"] == 150 and result["truncated"] is True


def test_a_killed_worker_is_replaced_and_waiting_callers_get_an_answer(
    driver: CaptureDriver,
) -> None:
    sandbox = driver.engine.sandbox
    _answers_normally(driver)
    before = sandbox.worker_pid
    codes: list[str | None] = []

    def bomb() -> None:
        codes.append(_query(driver, "SELECT count(*) FROM range(1000000000000)")[0])

    thread = threading.Thread(target=bomb)
    thread.start()
    time.sleep(0.2)  # the scenario: the bomb first (either order passes the checks below)
    code, detail = _query(driver, "SELECT count(*) AS n FROM Engine")  # waits for the bomb
    thread.join()
    assert codes == ["QUERY_TIMEOUT"]
    assert code in (None, "QUERY_TIMEOUT"), detail
    assert code is not None or detail["rows"] == [[200]]
    assert sandbox.worker_pid != before
    _answers_normally(driver)


def test_an_answer_in_the_pipe_at_the_deadline_is_taken_not_killed(
    driver: CaptureDriver,
) -> None:
    """A caller that runs late (a busy machine, another thread holding the interpreter)
    reaches its deadline after the worker answered: the answer is the outcome and the worker
    lives on. It was reported as QUERY_TIMEOUT, the worker killed, for a query that had
    answered in time (a full suite with one core kept busy showed it)."""
    sandbox = driver.engine.sandbox
    kills = sandbox.kills
    worker = sandbox._pool.take()
    assert worker.proc.stdout is not None
    request = {"kind": "run", "sql": "SELECT count(*) AS n FROM Engine", "params": []}
    worker._send(pickle.dumps(request))
    answered = lambda: bool(select.select([worker.proc.stdout], [], [], 0)[0])  # noqa: E731
    assert wait_until(answered, BUSY_MARGIN_S)
    answer = worker._receive(time.monotonic() - 1.0)  # the deadline passed meanwhile
    assert answer["ok"] and answer["rows"] == [[200]]
    assert sandbox.kills == kills and worker.proc.poll() is None
    _answers_normally(driver)
    # and a worker with nothing to say at the deadline is still stopped there
    worker._send(pickle.dumps({**request, "sql": "SELECT count(*) FROM range(1000000000000)"}))
    started = time.monotonic()
    with pytest.raises(_Killed, match="timeout"):
        worker._receive(started + 0.2)
    assert time.monotonic() - started < 0.2 + BUSY_MARGIN_S
    sandbox._pool.drop()  # as a call does when its worker is stopped
    _answers_normally(driver)


def test_closing_ends_the_workers(dataset: Path) -> None:
    driver = CaptureDriver.from_dataset(dataset, timeout_s=TIMEOUT_S)
    assert driver.engine.query("SELECT 1").rows == [[1]]
    pid = driver.engine.sandbox.worker_pid
    assert pid is not None
    driver.close()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
    with pytest.raises(ToolError) as caught:
        driver.engine.query("SELECT 1")
    assert caught.value.code == "QUERY_FAILED"


# -- found by the adversarial review of the sandbox ----------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM (SHOW secret_directory)",
        "SELECT * FROM (SHOW allowed_paths)",
        "SHOW duckdb_api",
        "SELECT e.CoolantTemp, p.* FROM Engine e, (SHOW secret_directory) p LIMIT 1",
        "SELECT * FROM (SHOW TABLES)",
        "DESCRIBE pg_settings",
        "SELECT * FROM (SUMMARIZE SELECT * FROM duckdb_settings())",
    ],
)
def test_show_reads_no_setting_and_describe_only_the_dataset(
    driver: CaptureDriver, sql: str
) -> None:
    code, detail = _query(driver, sql)
    assert code == "QUERY_REFUSED", (sql, detail)
    assert "/root" not in str(detail) and os.getcwd() not in str(detail)


def test_describe_of_a_dataset_table_answers(driver: CaptureDriver) -> None:
    code, result = _query(driver, "DESCRIBE Engine")
    assert code is None, result
    assert "CoolantTemp" in [row[0] for row in result["rows"]]


def test_an_aggregate_named_by_a_string_must_be_allowed_too(driver: CaptureDriver) -> None:
    code, detail = _query(driver, "SELECT list_aggr(['a', 'b', 'a'], 'approx_top_k', 1)")
    assert code == "QUERY_REFUSED" and "approx_top_k" in str(detail)
    code, result = _query(driver, "SELECT list_aggr([1, 2, 3], 'sum') AS s")
    assert code is None and result["rows"] == [[6]], result


def test_values_json_cannot_carry_come_as_duckdbs_text(driver: CaptureDriver) -> None:
    code, result = _query(
        driver,
        "SELECT 12345678901234567890.125::DECIMAL(38,3) AS wide, 1.25::DECIMAL(9,2) AS narrow, "
        "INTERVAL 90 MINUTE AS i, '12:00:00+05'::TIMETZ AS tz, '101'::BIT AS b, "
        "1::UNION(a INT, b VARCHAR) AS u, [18446744073709551616::HUGEINT] AS nested",
    )
    assert code is None, result
    assert result["rows"] == [
        [
            "12345678901234567890.125",
            1.25,
            "01:30:00",
            "12:00:00+05",
            "101",
            "1",
            "[18446744073709551616]",
        ]
    ]


def test_column_names_count_against_the_budget(dataset: Path) -> None:
    with CaptureDriver.from_dataset(dataset, timeout_s=5.0, max_chars=10_000) as driver:
        name = "n" * 7400
        stars = ", ".join(["*"] * 100)
        code, result = _query(driver, f'WITH t AS (SELECT 1 AS "{name}") SELECT {stars} FROM t')
        assert code is None, result
        assert len(json.dumps(result)) < 12_000
        assert all(len(c) <= 200 for c in result["columns"])
        assert result["truncated"] is True and result["column_count"] == 100


def test_find_events_takes_every_operator_it_documents(driver: CaptureDriver) -> None:
    for op in ("<>", "!=", "==", "=", ">=", "<="):
        r = driver.process_llm_response(
            json.dumps(
                {
                    "tool": "find_events",
                    "arguments": {"condition": f"Torque {op} 0", "min_duration_ms": 0},
                }
            )
        )
        assert not r.call_failed, (op, r.call_detail)


def test_our_own_sql_may_ask_for_more_room_within_a_cap(driver: CaptureDriver) -> None:
    engine = driver.engine
    small = engine.run("SELECT range FROM range(5000)")
    assert len(small.rows) == 200 and small.truncated  # the tool's bounds by default
    big = engine.run("SELECT range FROM range(5000)", max_rows=5000, max_chars=100_000)
    assert len(big.rows) == 5000 and not big.truncated
    assert big.rows[-1] == [4999]
    capped = engine.run("SELECT range FROM range(200000)", max_rows=10**9, max_chars=10**12)
    assert len(capped.rows) == 100_000 and capped.truncated
