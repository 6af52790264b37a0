"""CaptureDriver: a decoded capture dataset as an MCS hybrid driver an LLM can question.

    with CaptureDriver.from_dataset("dataset/") as driver:
        driver.process_llm_response('{"tool": "describe_dataset", "arguments": {}}')

Six read-only tools: `describe_dataset`, `query` (one SQL SELECT, see `sql_engine` for what
keeps it inside the dataset), `signal_stats`, `find_events`, and the tools that show:
`signal_timeseries` (a series downsampled in SQL, keeping each bucket's extremes) and
`plot_signals` (a PNG of the signals, `hwbridge.plot`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.captures.dataset import Dataset
from hwbridge.captures.questions import Questions, _utc
from hwbridge.captures.series import SeriesReader
from hwbridge.captures.sql.engine import QueryLimits, SqlEngine
from hwbridge.captures.texts import CaptureTexts, capture_texts
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.core.prompts import PromptStrategy
from hwbridge.plot.series import MAX_POINTS, timeseries_result

__all__ = ["CaptureDriver"]

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
_TIME = {"type": "string", "minLength": 1, "maxLength": 64}
_DAY_MS = 86_400_000
MAX_PLOTTED = 8  # signals in one picture
DEFAULT_POINTS = 200


class CaptureDriver(HybridDriver, Closing):
    """An LLM-ready driver over a Parquet dataset of decoded captures; read-only."""

    meta = DriverMeta(
        id="5d1f8e2a-7b3c-4e9d-a6f0-2c8b1e4d7a93",
        name="hwbridge captures",
        version=__version__,
        bindings=[
            DriverBinding(capability="can-captures", adapter="duckdb", spec_format="Parquet")
        ],
    )

    def __init__(
        self,
        dataset: Dataset,
        *,
        limits: QueryLimits | None = None,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
        texts: CaptureTexts | None = None,
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        self.dataset = dataset
        self.texts = texts or capture_texts()
        self.engine = SqlEngine(dataset, limits)
        self.questions = Questions(dataset, self.engine)
        self._tools = tuple(self._build_tools())
        # the tools that show read through an engine of their own, whose results have room
        # for a series; started on their first call
        self._series: SeriesReader | None = None
        self._series_lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_dataset(
        cls,
        path: str | Path,
        *,
        timeout_s: float = 10.0,
        max_rows: int = 200,
        max_chars: int = 10_000,
        memory_limit: str = "2GB",
        max_columns: int = 100,
        prompt_strategy: str | Path | PromptStrategy = "json",
    ) -> CaptureDriver:
        """A driver over the dataset `decode_captures` wrote to `path` (or any Hive-style
        Parquet folder with one sub-folder per table). `timeout_s` bounds each query
        (QUERY_TIMEOUT: its worker process is killed), `memory_limit` its memory (the worker is
        killed a margin past it), `max_rows`, `max_columns` and `max_chars` each result."""
        limits = QueryLimits(
            timeout_s=timeout_s,
            max_rows=max_rows,
            max_chars=max_chars,
            memory_limit=memory_limit,
            max_columns=max_columns,
        )
        return cls(Dataset.open(path), limits=limits, prompt_strategy=prompt_strategy)

    # -- tools -----------------------------------------------------------------------------

    def _tool(self, name: str, *params: ToolParameter) -> Tool:
        return self.texts.read_tool(name, *params)

    def _build_tools(self) -> list[Tool]:
        p = self.texts.parameter
        sql = {"type": "string", "minLength": 1, "maxLength": self.engine.limits.max_sql_chars}
        condition = {"type": "string", "minLength": 3, "maxLength": 300}
        duration = {"type": "number", "minimum": 0, "maximum": 30 * _DAY_MS}
        names = {"type": "array", "items": _NAME, "minItems": 1, "maxItems": MAX_PLOTTED}
        return [
            self._tool("describe_dataset"),
            self._tool("query", p("query", "sql", sql, True)),
            self._tool(
                "signal_stats",
                p("signal_stats", "signal", _NAME, True),
                p("signal_stats", "source", _NAME),
                p("signal_stats", "start", _TIME),
                p("signal_stats", "end", _TIME),
            ),
            self._tool(
                "find_events",
                p("find_events", "condition", condition, True),
                p("find_events", "min_duration_ms", duration, True),
                p("find_events", "source", _NAME),
            ),
            self._tool(
                "signal_timeseries",
                p("signal_timeseries", "signal", _NAME, True),
                p("signal_timeseries", "start", _TIME),
                p("signal_timeseries", "end", _TIME),
                p(
                    "signal_timeseries",
                    "max_points",
                    {"type": "integer", "minimum": 2, "maximum": MAX_POINTS},
                ),
            ),
            self._tool(
                "plot_signals",
                p("plot_signals", "signals", names, True),
                p("plot_signals", "start", _TIME),
                p("plot_signals", "end", _TIME),
            ),
        ]

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        q = self.questions
        if tool_name == "describe_dataset":
            return q.describe()
        if tool_name == "query":
            return self.engine.query(arguments["sql"]).to_dict()
        if tool_name == "signal_stats":
            return q.signal_stats(
                arguments["signal"],
                arguments.get("source"),
                arguments.get("start"),
                arguments.get("end"),
            )
        if tool_name == "find_events":
            return q.find_events(
                arguments["condition"], arguments["min_duration_ms"], arguments.get("source")
            )
        if tool_name == "signal_timeseries":
            return self._timeseries(arguments)
        if tool_name == "plot_signals":
            return self._plot(arguments)
        raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver")

    def series_reader(self) -> SeriesReader:
        """The reader of `signal_timeseries` and `plot_signals` (through the query tool's
        engine)."""
        with self._series_lock:
            if self._closed:
                raise ToolError("CLOSED", "the driver is closed")
            if self._series is None:
                self._series = SeriesReader(self.dataset, self.engine)
            return self._series

    def _timeseries(self, arguments: dict[str, Any]) -> dict[str, Any]:
        since = _utc(arguments.get("start"), "start")
        until = _utc(arguments.get("end"), "end")
        reader = self.series_reader()
        ref = reader.resolve([arguments["signal"]], limit=1)[0]
        points = int(arguments.get("max_points") or DEFAULT_POINTS)
        series = reader.series(ref, points // 2, since=since, until=until, extremes_only=True)
        return timeseries_result(series)

    def _plot(self, arguments: dict[str, Any]) -> dict[str, Any]:
        from hwbridge.plot.results import PLOT_WIDTH_PX, picture_result

        since = _utc(arguments.get("start"), "start")
        until = _utc(arguments.get("end"), "end")
        reader = self.series_reader()
        refs = reader.resolve(list(arguments["signals"]), limit=MAX_PLOTTED)
        series = [reader.series(r, PLOT_WIDTH_PX, since=since, until=until) for r in refs]
        return picture_result(series)

    def driver_guidance(self, model_name: str | None = None) -> str:
        return self.texts.guidance.dataset.strip()

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        with self._series_lock:
            self._closed = True
            self._series = None
        self.engine.close()
