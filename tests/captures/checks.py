"""What a decoded dataset must hold (per table, exactly cantools' values for every frame),
and what a reader promises on any input (`assert_bounded`)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads  # type: ignore[import-untyped]

import can
from hwbridge.can.database import CanDatabase
from hwbridge.can.io.frame_checks import MAX_DATA, chunk_faults
from hwbridge.can.io.frames import FrameChunk

FRAME_BYTES = 8
"""The readers' bound: at most one frame per this many bytes of text (after gzip)."""


def assert_bounded(frames: FrameChunk, text: bytes) -> None:
    """At most one frame per FRAME_BYTES of `text` (its last line may lack its line break),
    every frame passes the frame checks, and no chunk is wider than a frame may be."""
    assert FRAME_BYTES * len(frames) <= len(text) + 1, (len(frames), len(text))
    assert not chunk_faults(frames).any()
    assert frames.data.shape[1] <= MAX_DATA


def read_table(out: Path, table: str, source: str | None = None) -> list[dict[str, Any]]:
    """A table's rows in file order (one capture's rows when `source` is given)."""
    data = pads.dataset(out / table, format="parquet", partitioning="hive")
    rows: list[dict[str, Any]] = data.to_table().to_pylist()
    if source is not None:
        rows = [r for r in rows if r["source"] == source]
    return rows


def cantools_rows(messages: list[can.Message], dbcs: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Per message name, per frame: cantools' physical values and labels (allow_truncated)."""
    dbs = [CanDatabase.load(p) for p in dbcs]
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for msg in messages:
        if msg.is_error_frame or msg.is_remote_frame:
            continue
        for db in dbs:
            message = db.message_for_frame(msg.arbitration_id, msg.is_extended_id)
            if message is not None:
                break
        else:
            continue
        data = bytes(msg.data)
        values = message.decode(data, decode_choices=False, allow_truncated=True)
        named = message.decode(data, decode_choices=True, allow_truncated=True)
        row: dict[str, Any] = {"timestamp_us": round(msg.timestamp * 1e6)}
        for name, value in values.items():
            row[name] = value
            if named[name] is not value and not isinstance(named[name], int | float):
                row[f"{name}_label"] = str(named[name])
        out[message.name].append(row)
    return out


def assert_same_as_cantools(
    out: Path, messages: list[can.Message], dbcs: list[Path], source: str
) -> dict[str, int]:
    """Every table of `source` equals cantools frame by frame; returns rows per table."""
    expected = cantools_rows(messages, dbcs)
    counts: dict[str, int] = {}
    for table, want in expected.items():
        got = read_table(out, table, source)
        assert len(got) == len(want), (table, len(got), len(want))
        counts[table] = len(got)
        for g, w in zip(got, want, strict=True):
            stamp = round(g["timestamp"].timestamp() * 1e6)
            assert abs(stamp - w["timestamp_us"]) <= 1, (table, g, w)
            for column, value in g.items():
                if column in ("timestamp", "source"):
                    continue
                want_value = w.get(column)
                if isinstance(want_value, float) and math.isnan(want_value):
                    assert math.isnan(value), (table, column)
                else:
                    assert value == want_value, (table, column, value, want_value, w)
    return counts
