"""Hostile LLM output: `process_llm_response` time as the input grows, on the shapes that
were quadratic before (issue 7, item 8).

For each shape the same driver answers inputs of 64 KB, 256 KB and 1 MB. Reported: the
milliseconds at each size, the growth exponent between 64 KB and 1 MB (time ~ size**k: 1.0
is linear, 2.0 quadratic; goal k <= 1.25), and whether 1 MB answers in under a second. The
yardstick is `json.loads` of a valid 1 MB JSON document in the same run: how many of those
one hostile megabyte costs.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable

from hwbridge import DriverBinding, DriverMeta, HybridDriver, Tool, ToolParameter

SIZES = (64_000, 256_000, 1_000_000)
REPEATS = 3
GOAL_EXPONENT = 1.25
GOAL_MB_SECONDS = 1.0

CALL_OPEN = '{"tool": "get_status", "arguments": {"name": "x"'

SHAPES: dict[str, Callable[[int], str]] = {
    "truncated call + spaces": lambda n: CALL_OPEN + " " * n,
    "truncated call + newlines": lambda n: CALL_OPEN + "\n" * n,
    "open fence + spaces": lambda n: '```json\n{"tool": "get_status", "arguments": {' + " " * n,
    '"<tool_call " repeated': lambda n: "<tool_call " * (n // 11),
    "tool names under 64 open braces": lambda n: ("{" * 64 + '"tool": "get_status", ') * (n // 85),
    "a tool name per open brace": lambda n: '{"tool": "get_status" ' * (n // 22),
    "unterminated array, 300 objects deep": lambda n: '{"a":' * 300 + "[" + "1," * (n // 2),
    "open braces": lambda n: "{" * n,
    "closed objects, then a broken call": lambda n: '{"x": 1} ' * (n // 9) + CALL_OPEN,
    "valid calls, one after another": lambda n: (
        '{"tool": "get_status", "arguments": {"name": "a"}}\n' * (n // 51)
    ),
}


class _Status(HybridDriver):
    meta = DriverMeta(
        id="1d3c2a10-5b7e-4f61-9a0c-8e2f4b6d1a33",
        name="Status",
        version="1.0.0",
        bindings=[DriverBinding(capability="status", adapter="memory", spec_format="Custom")],
    )

    def list_tools(self) -> list[Tool]:
        name = ToolParameter(name="name", required=True, schema={"type": "string"})
        return [Tool(name="get_status", description="Status of a unit.", parameters=[name])]

    def execute_tool(self, tool_name: str, arguments: dict[str, object]) -> object:
        return {"ok": True}


def _best(fn: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    driver = _Status()
    valid = json.dumps({"items": [{"name": "x" * 20, "value": i} for i in range(25_000)]})
    loads_mb = _best(lambda: json.loads(valid)) * 1_000_000 / len(valid)
    print(f"yardstick: json.loads of valid JSON, {loads_mb * 1000:.1f} ms per MB")
    header = f"{'shape':40s}" + "".join(f"{n // 1000:>8d} KB" for n in SIZES)
    print(header + "   exponent   1 MB / json.loads")
    worst_exponent = 0.0
    worst_mb = 0.0
    for name, make in SHAPES.items():
        times = []
        for n in SIZES:
            text = make(n)
            times.append(_best(lambda text=text: driver.process_llm_response(text)))  # type: ignore[misc]
        exponent = math.log(times[-1] / times[0]) / math.log(SIZES[-1] / SIZES[0])
        worst_exponent = max(worst_exponent, exponent)
        worst_mb = max(worst_mb, times[-1])
        cells = "".join(f"{t * 1000:>8.1f} ms" for t in times)
        print(f"{name:40s}{cells}   {exponent:8.2f}   {times[-1] / loads_mb:8.1f}x")
    ok = worst_exponent <= GOAL_EXPONENT and worst_mb < GOAL_MB_SECONDS
    print(
        f"worst growth exponent {worst_exponent:.2f} (goal <= {GOAL_EXPONENT}), "
        f"slowest megabyte {worst_mb * 1000:.0f} ms (goal < {GOAL_MB_SECONDS * 1000:.0f} ms): "
        + ("goal met" if ok else "GOAL MISSED")
    )


if __name__ == "__main__":
    main()
