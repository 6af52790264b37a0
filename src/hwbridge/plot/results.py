"""The results of the tools that show: a bounded series, or a picture with its summary."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from hwbridge.core.images import MAX_IMAGE_BYTES, ImageResult
from hwbridge.core.models import ToolError
from hwbridge.plot.render import EXTRA_HINT, PlotUnavailable, png_within
from hwbridge.plot.series import Series, series_summary

__all__ = ["PLOT_WIDTH_PX", "picture_result", "png_size"]

PLOT_WIDTH_PX = 1000
"""The width of a tool's picture: its series are downsampled to this many time buckets."""


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header; ValueError when `data` is not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def picture_result(series: Sequence[Series], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """`plot_signals`' result: a PNG of `series` (at most MAX_IMAGE_BYTES) and its summary."""
    try:
        png = png_within(series, MAX_IMAGE_BYTES, width_px=PLOT_WIDTH_PX)
    except PlotUnavailable:
        raise ToolError(
            "UNSUPPORTED",
            f"drawing needs matplotlib, which is not installed here ({EXTRA_HINT}); "
            "signal_timeseries gives the numbers",
        ) from None
    except ValueError as exc:
        raise ToolError("INVALID_VALUE", str(exc)) from None
    width, height = png_size(png)
    summary: dict[str, Any] = dict(extra or {})
    summary["signals"] = [series_summary(s) for s in series]
    summary["picture"] = {"width": width, "height": height, "bytes": len(png)}
    return ImageResult.of_bytes(png, summary).to_result()
