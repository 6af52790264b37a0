"""Recorded frames: one reader per capture format, by file suffix (`READERS`), as python-can's
`can.io` keeps its log formats; replay, discovery, `hwbridge decode` and plot read through it.

    from hwbridge.can.io import open_capture
    for chunk in open_capture("drive.blf").chunks():   # FrameChunk: frames as numpy columns
        ...

Every frame of every format passes one set of checks (`frame_checks`), and every reader
holds stated bounds on frames per byte, memory and line length (docs/captures.md). Needs
numpy (the `captures` or `discovery` extra); MF4 files that are not sorted and finalized
need asammdf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_package

if TYPE_CHECKING:
    from hwbridge.can.io.frames import CaptureError, FrameChunk, ReaderCounts
    from hwbridge.can.io.readers import (
        READERS,
        CaptureReader,
        CheckedReader,
        capture_formats,
        check_capture,
        open_capture,
    )

# the public names are the imports above (written once): loaded on first use
__getattr__, __dir__ = lazy_package(globals())
