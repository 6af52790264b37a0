"""The live `match_known_databases` tool: a recorded window matched against known databases.

The ranking is `match.match_databases`' (the same as `discover --match-known`), bounded for
an LLM: the best `MAX_LISTED` databases, each with its shares and checks. With `adopt`, the
best match that fits (by the rule `discover` decodes with) joins the session's database:
its messages of ids the database did not describe yet are read by `read_signals`,
`wait_for_signal` and `capture` under their own names, and `survey_bus` lists them under
`known_messages` instead of searching them again. Nothing is sent: only the session's
database grows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hwbridge.core.models import ToolError
from hwbridge.discovery.analysis.known import candidates
from hwbridge.discovery.analysis.match import match_databases
from hwbridge.discovery.frames import FrameKey, FrameSet
from hwbridge.discovery.live.session import DiscoverySession

__all__ = ["MATCH_TOOL_BUDGET_S", "MAX_LISTED", "match_tool"]

MAX_LISTED = 5
MATCH_TOOL_BUDGET_S = 10.0
MAX_NAMES = 40  # adopted message names listed


def match_tool(
    framesets: Mapping[FrameKey, FrameSet],
    frames: int,
    duration_ms: int,
    session: DiscoverySession,
    known: Sequence[str | Path],
    *,
    adopt: bool,
) -> dict[str, Any]:
    """The tool's result for one recorded window (see the module's docstring)."""
    try:
        found, notes = candidates(known)
    except (ValueError, FileNotFoundError) as exc:
        raise ToolError("NO_DATABASES", str(exc)) from None
    result = match_databases(
        framesets,
        found,
        total_frames=frames,
        deadline=time.monotonic() + MATCH_TOOL_BUDGET_S,
    )
    listed = result.matches[:MAX_LISTED]
    out: dict[str, Any] = {
        "duration_ms": duration_ms,
        "frames": frames,
        "ids": len(framesets),
        "matches": [m.model_dump(mode="json") for m in listed],
        "total": len(result.matches),
        "returned": len(listed),
        "truncated": len(listed) < len(result.matches),
        "best_fit": result.decoded_with[0] if result.decoded_with else None,
    }
    if adopt and result.adopted:
        added = session.adopt(result.adopted[0])
        out["adopted"] = result.decoded_with[0]
        out["messages_added"] = added[:MAX_NAMES]
        if len(added) > MAX_NAMES:
            out["more_messages_added"] = len(added) - MAX_NAMES
    elif adopt:
        out["adopted"] = None
    said = notes + result.notes
    if said:
        out["notes"] = said[:8]
    return out
