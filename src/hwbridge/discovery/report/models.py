"""What discovery found, as data: the report a user reads and the draft DBC it writes.

The JSON document (`DiscoveryReport.to_json()`) is the issue's contract:

    {"messages": [{"id": 416, "extended": false, "dlc": 8, "frames": 6000, "period_ms": 20.0,
      "signals": [{"name": ..., "start_bit": 7, "length": 16, "byte_order": "big_endian",
                   "signed": false, "kind": "value", "scale": 0.01, "offset": 0.0,
                   "unit": "km/h", "reference": {"message": ..., "signal": ..., "r": 0.998,
                   "r2": 0.996, "verdict": "confirmed", "fitted_scale": 0.0100002},
                   "is_float": false, "is_multiplexer": false, "multiplexer_ids": null}]}]}

`is_float`, `is_multiplexer` and `multiplexer_ids` are cantools' names: a float field is an
IEEE 754 float32 (or float64, `length` 64) read as a number, not an integer (`kind` stays
`value`); in a multiplexed message one field `is_multiplexer` (the draft's `M`: its value
selects the layout) and each field of one layout has `multiplexer_ids`, the multiplexer
values whose frames carry it (the draft's `m0`, `m1`...); fields of every frame (counters,
checksums) have `null`. Documents written before these keys existed read as all-default.

`start_bit` and `byte_order` are as cantools writes them, and the names are the names in the
draft DBC (`to_dbc()`). Beside `messages` the document says what it covered (`frames`,
`captures`), which messages the reference decoded instead (`reference_messages`), what was
dropped to stay within bounds (`dropped`) and what could not be told (`notes`). Matched
against known databases (`discover(..., match_known=True)`), it also ranks them (`matches`,
best first) and names those it decoded with (`decoded_with`); with marked moments, per event
the fields that changed at its marks, best first (`events`: [{"name", "marks", "candidates":
[{"id", "extended", "start_bit", "length", "score", ...}]}]).
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from hwbridge.discovery.report.draft import draft_dbc

__all__ = [
    "DatabaseMatch",
    "DiscoveryReport",
    "EventCandidate",
    "EventReport",
    "FieldReport",
    "Kind",
    "MatchChecks",
    "MessageReport",
    "Note",
    "ReferenceMatch",
    "Verdict",
]

Kind = Literal["value", "flag", "counter", "checksum", "constant"]
ByteOrderName = Literal["little_endian", "big_endian"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


Verdict = Literal["confirmed", "unconfirmed"]


class ReferenceMatch(_Model):
    """The reference signal a field moves with, how closely (Pearson's r), and how well
    the field's scale and offset explain it over the capture: `r2` (the share of the
    reference's variance explained), `verdict` (`confirmed` when r2 >= 0.95, `unconfirmed`
    otherwise), `fitted_scale`, the least-squares slope, which the field's `scale` rounds
    when a round scale explains the reference as well, and `lag_s`, how long the reference
    came after the field (negative: before) where the two agree best, at which both were
    fitted."""

    message: str
    signal: str
    r: float
    r2: float
    verdict: Verdict
    fitted_scale: float
    lag_s: float = 0.0


class FieldReport(_Model):
    """One field: where it is, what kind, and what it means when a reference said so."""

    name: str
    start_bit: int
    length: int
    byte_order: ByteOrderName
    signed: bool
    kind: Kind
    scale: float = 1.0
    offset: float = 0.0
    unit: str | None = None
    reference: ReferenceMatch | None = None
    is_float: bool = False
    is_multiplexer: bool = False
    multiplexer_ids: list[int] | None = None


class MessageReport(_Model):
    """One frame id: how often it came, how long it is, and the fields found in it."""

    id: int
    extended: bool
    dlc: int = Field(description="payload length in bytes")
    frames: int
    period_ms: float | None
    signals: list[FieldReport]


class EventCandidate(_Model):
    """Bits that may be a marked event's signal: where they are (`start_bit` as cantools
    writes it for `byte_order`), how well they changed at the marks and not elsewhere
    (`score`, 0 to 1), the field's name in the report (None: a single bit no field
    holds alone), the event's marks with a change near them, and its changes elsewhere."""

    id: int
    extended: bool
    start_bit: int
    length: int
    score: float
    byte_order: ByteOrderName = "little_endian"
    field: str | None = None
    marks_hit: int = 0
    changes_elsewhere: int = 0


class EventReport(_Model):
    """One marked event (the marks of one name) and its candidates, best first."""

    name: str
    marks: int
    candidates: list[EventCandidate] = Field(default_factory=list)


class Note(_Model):
    """Something the data could not tell, or did not say, in a sentence."""

    message: str
    signal: str | None = None
    text: str


class MatchChecks(_Model):
    """How a known database's messages fit the capture's frames, each a share (null: nothing
    to check). `length_ok`: of the capture's ids the database has a message for, those whose
    frames have its length; `rate_ok`: of those with a cycle time in the database, those
    sent within 0.7x to 1.5x of it; the rest only for the best few databases, checked in
    depth (`DatabaseMatch.checked`): `bits_covered`, of the bits that moved in those frames,
    the bits inside one of its signals; `counters_ok`, of its counters (signals named
    COUNTER, CNT, ALIVE, ...), those stepping by one amount on at least 90% of consecutive
    frames; `checksums_ok`, of its 4- or 8-bit checksums (CHECKSUM, CRC, CHKSUM, ...) that
    moved, those one of the checksum families cars use computes; `values_in_range`, of its
    signals with a range, those whose values stayed in it on at least 99% of frames."""

    length_ok: float | None = None
    rate_ok: float | None = None
    bits_covered: float | None = None
    counters_ok: float | None = None
    checksums_ok: float | None = None
    values_in_range: float | None = None


class DatabaseMatch(_Model):
    """One known database against the capture: `ids_explained`, the share of the capture's
    ids it has a message of the right length for (`ids` of them); `frames_explained`, the
    share of the frames those ids carry; `score`, the share of ids explained, each weighted
    by the share of its checks that pass (what the ranking is by); `chance`, how likely a
    database whose messages lie as densely around the capture's ids would explain and fit
    as many by coincidence; `checked`, whether the checks beyond length and rate ran (for
    the best few; the others' `score` is their `ids_explained`, an upper bound);
    `tied_with`, the databases the capture cannot tell from this one (the same ids
    explained, each fitting as well)."""

    database: str
    source: str
    ids_explained: float
    frames_explained: float
    ids: int
    score: float
    chance: float
    checked: bool
    checks: MatchChecks
    tied_with: list[str] = Field(default_factory=list)


class DiscoveryReport(_Model):
    """The result of `discover` (and of the `survey_bus` tool)."""

    messages: list[MessageReport]
    frames: int = 0
    captures: list[str] = Field(default_factory=list)
    reference_messages: list[str] = Field(default_factory=list)
    matches: list[DatabaseMatch] = Field(default_factory=list)
    decoded_with: list[str] = Field(default_factory=list)
    dropped: dict[str, int] = Field(default_factory=dict)
    notes: list[Note] = Field(default_factory=list)
    events: list[EventReport] = Field(default_factory=list)
    _comments: dict[tuple[str, str | None], str] = PrivateAttr(default_factory=dict)
    _evidence: Any = PrivateAttr(default=None)

    @property
    def evidence(self) -> Any:
        """The `Evidence` (flip rates, plots) behind the report when `discover` was asked
        for it (`evidence=True`); None otherwise. Not part of the JSON document."""
        return self._evidence

    def comment(self, message: str, signal: str | None, text: str) -> None:
        """Keep a sentence for the draft DBC's comment of a message or signal."""
        self._comments[message, signal] = text

    def comment_of(self, message: str, signal: str | None) -> str | None:
        """The sentence kept for the draft DBC's comment (how a field was found)."""
        return self._comments.get((message, signal))

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def to_json(self, *, indent: bool = False) -> str:
        """The report as JSON text (the document of the module's docstring)."""
        option = orjson.OPT_INDENT_2 if indent else 0
        return orjson.dumps(self.to_dict(), option=option).decode()

    def to_dbc(self) -> str:
        """The draft DBC: every message and field of the report, with comments saying how
        each was found. Plain cantools loads it strictly (no overlapping signals)."""
        return draft_dbc(self.messages, self._comments)
