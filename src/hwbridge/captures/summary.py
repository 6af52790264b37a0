"""What a decoding run did, per capture and in total: the summary `decode_captures` returns.

Plain pydantic models, so a summary crosses a process or a Dask worker as it is, prints as
JSON, and says honestly what failed: a capture that could not be read to its end is listed
with the error and the position, and what was decoded before that position is counted.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from hwbridge.can.io.frames import MAX_MALFORMED

__all__ = ["MAX_MALFORMED", "DecodeSummary", "FileSummary"]

MAX_UNKNOWN_IDS = 20


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileSummary(_Model):
    """One capture: how many frames were read and decoded, and what went wrong, if anything."""

    path: str
    source: str
    ok: bool = True
    error: str | None = None
    position: str | None = Field(
        default=None, description="where the capture could not be read on (byte, record)"
    )
    frames_read: int = 0
    frames_decoded: int = 0
    unknown_frames: int = 0
    unknown_ids: dict[str, int] = Field(
        default_factory=dict, description=f"the {MAX_UNKNOWN_IDS} most frequent unknown ids"
    )
    error_frames: int = 0
    remote_frames: int = 0
    malformed_lines: int = Field(
        default=0, description="lines of a text capture that could not be read, skipped"
    )
    malformed: list[str] = Field(
        default_factory=list,
        description=f"the first {MAX_MALFORMED} malformed lines ('line 12: why') and the first "
        f"{MAX_MALFORMED} malformed frames ('frame 1234: why')",
    )
    malformed_frames: int = Field(
        default=0,
        description="frames no column holds (a timestamp that is nan, inf or beyond 9e9 s, "
        "an id outside 32 bits, more than 64 data bytes), dropped",
    )
    isotp_frames: int = 0
    isotp_transfers: int = 0
    j1939_tp_frames: int = Field(default=0, description="J1939 TP.CM and TP.DT frames read")
    j1939_tp_completed: int = Field(
        default=0, description="J1939 transport-protocol sessions reassembled into messages"
    )
    j1939_tp_aborted: int = Field(
        default=0,
        description="sessions that ended without their message: aborted, timed out, out of "
        "sequence, refused, replaced, or open at the end of the capture",
    )
    j1939_dm_messages: int = Field(
        default=0, description="DM1 and DM2 messages written to the j1939_dm table"
    )
    rows: dict[str, int] = Field(default_factory=dict, description="rows written per table")
    seconds: float = 0.0
    skipped: bool = Field(
        default=False,
        description="already in the dataset, decoded by an earlier run from the same capture "
        "with the same databases and options: not decoded again (its figures are that run's)",
    )


class DecodeSummary(_Model):
    """A whole run: the totals, the rows per table, and every capture's own summary."""

    out: str
    files: list[FileSummary]
    frames_read: int
    frames_decoded: int
    unknown_frames: int
    unknown_ids: dict[str, int]
    error_frames: int
    remote_frames: int
    malformed_lines: int
    malformed_frames: int = Field(default=0, description="malformed frames of every capture")
    rows: dict[str, int]
    failed: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.failed

    @classmethod
    def of(cls, out: Path, files: list[FileSummary], seconds: float) -> DecodeSummary:
        rows: Counter[str] = Counter()
        unknown: Counter[str] = Counter()
        for f in files:
            rows.update(f.rows)
            unknown.update(f.unknown_ids)
        return cls(
            out=str(out),
            files=files,
            frames_read=sum(f.frames_read for f in files),
            frames_decoded=sum(f.frames_decoded for f in files),
            unknown_frames=sum(f.unknown_frames for f in files),
            unknown_ids=dict(unknown.most_common(MAX_UNKNOWN_IDS)),
            error_frames=sum(f.error_frames for f in files),
            remote_frames=sum(f.remote_frames for f in files),
            malformed_lines=sum(f.malformed_lines for f in files),
            malformed_frames=sum(f.malformed_frames for f in files),
            rows=dict(sorted(rows.items())),
            failed=[f.path for f in files if not f.ok],
            seconds=round(seconds, 3),
        )
