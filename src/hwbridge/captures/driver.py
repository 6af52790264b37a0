"""CaptureDriver: a decoded capture dataset as an MCS hybrid driver an LLM can question.

    with CaptureDriver.from_dataset("dataset/") as driver:
        driver.process_llm_response('{"tool": "describe_dataset", "arguments": {}}')

Four read-only tools: `describe_dataset`, `query` (one SQL SELECT, see `sql_engine` for what
keeps it inside the dataset), `signal_stats` and `find_events`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.captures.dataset import Dataset
from hwbridge.captures.questions import OPS, Questions
from hwbridge.captures.sql_engine import QueryLimits, SqlEngine
from hwbridge.captures.texts import CaptureTexts, capture_texts
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.core.prompts import PromptStrategy

__all__ = ["CaptureDriver"]

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
_TIME = {"type": "string", "minLength": 1, "maxLength": 64}
_DAY_MS = 86_400_000


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
        raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver")

    def driver_guidance(self, model_name: str | None = None) -> str:
        return self.texts.guidance.dataset.strip()

    @property
    def operators(self) -> tuple[str, ...]:
        return OPS

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        self.engine.close()
