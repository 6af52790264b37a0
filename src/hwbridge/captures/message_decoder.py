"""Decoding one message's frames at once: bits to physical values over numpy arrays.

Each signal is compiled once into where its bits are (a byte window read as one 64-bit word,
shifted and masked), how its raw value becomes physical (exactly cantools' conversion:
identity, integer or float arithmetic, so every value equals `cantools` on the same frame),
its labels, and which multiplexer value makes it present. Decoding a message's rows is then
a handful of numpy operations per signal, whatever the number of frames.

Presence follows cantools with `allow_truncated=True`: a signal whose bytes a short frame
does not carry is null in that row, as is a multiplexed signal whose multiplexer selects
another branch. Unlike cantools, a multiplexer value the database does not know does not
lose the frame: its other signals are still decoded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from hwbridge.captures.arrow_columns import column, strings
from hwbridge.captures.bridge import SignalSpec
from hwbridge.captures.names import ColumnNames

__all__ = ["MessagePlan", "SignalPlan"]

U64 = npt.NDArray[np.uint64]
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_MAX_LABELS_META = 256  # labels kept in the Parquet metadata of one signal
_MAX_COMMENT_META = 500


def _conversion(signal: Any) -> Any:
    """cantools' own numeric conversion of `signal` (choices left aside)."""
    from cantools.database.conversion import BaseConversion

    c = signal.conversion
    return BaseConversion.factory(scale=c.scale, offset=c.offset, choices=None, is_float=c.is_float)


class _Windows:
    """The payload of one message's rows as aligned 64-bit words, little and big endian.

    The payload is padded to whole words plus one zero word, so a signal of up to 64 bits is
    at most two neighbouring words; a classic frame is one word, read without any copy.
    """

    def __init__(self, data: npt.NDArray[np.uint8], length: int) -> None:
        n = data.shape[0]
        width = min(data.shape[1], length)
        words = (length + 7) // 8 + 1
        buf = np.zeros((n, words * 8), np.uint8)
        buf[:, :width] = data[:, :width]
        self._le_words = buf.view("<u8")
        self._be_words = buf.view(">u8")
        self._be: dict[int, U64] = {}

    def little(self, word: int) -> U64:
        return self._le_words[:, word]

    def big(self, word: int) -> U64:
        found = self._be.get(word)
        if found is None:
            found = self._be_words[:, word].astype(np.uint64)
            self._be[word] = found
        return found


@dataclass(frozen=True, slots=True)
class SignalPlan:
    """Where one signal's bits are and how they become a value; built once per signal."""

    name: str  # the signal's name in the database
    column: str  # its column (the name, unless that collides)
    label_column: str | None
    spec: SignalSpec
    little: bool
    position: int  # little endian: the start bit; big endian: the MSB counted from byte 0's MSB
    length: int
    signed: bool
    float_bits: int  # 0 for integers
    needed: int  # bytes a frame must carry for this signal
    conversion: Any
    out_type: pa.DataType
    label_keys: npt.NDArray[np.int64]
    label_values: pa.Array
    parent: str | None  # the multiplexer this signal depends on
    mux_ids: npt.NDArray[np.float64]

    @classmethod
    def build(cls, spec: SignalSpec, column: str, label_column: str | None) -> SignalPlan:
        signal = spec.signal
        little = signal.byte_order == "little_endian"
        start = int(signal.start)
        length = int(signal.length)
        position = start if little else 8 * (start // 8) + 7 - start % 8
        needed = (position + length - 1) // 8 + 1
        float_bits = length if spec.is_float and length in (16, 32, 64) else 0
        conversion = _conversion(signal)
        keys = np.array(sorted(spec.choices), np.int64)
        values = strings([str(spec.choices[int(k)]) for k in keys])
        return cls(
            name=spec.name,
            column=column,
            label_column=label_column,
            spec=spec,
            little=little,
            position=position,
            length=length,
            signed=bool(signal.is_signed),
            float_bits=float_bits,
            needed=needed,
            conversion=conversion,
            out_type=_out_type(spec, conversion, float_bits),
            label_keys=keys,
            label_values=values,
            parent=spec.multiplexer_signal,
            mux_ids=np.array(sorted(spec.multiplexer_ids), np.float64),
        )

    # -- bits ----------------------------------------------------------------------------

    def raw_bits(self, windows: _Windows) -> U64:
        """The signal's bits as unsigned integers, one per row."""
        n = self.length
        word, shift = divmod(self.position, 64)
        if self.little:
            value = windows.little(word) >> np.uint64(shift)
            if shift + n > 64:
                value |= windows.little(word + 1) << np.uint64(64 - shift)
        else:
            end = shift + n  # in bits from the start of the word, MSB first
            if end <= 64:
                value = windows.big(word) >> np.uint64(64 - end)
            else:
                rest = end - 64
                value = (windows.big(word) << np.uint64(rest)) | (
                    windows.big(word + 1) >> np.uint64(64 - rest)
                )
        if n < 64:
            value = value & np.uint64((1 << n) - 1)
        return value

    def raw(self, windows: _Windows) -> npt.NDArray[Any]:
        """Raw values as cantools sees them: signed or unsigned integers, or floats."""
        bits = self.raw_bits(windows)
        if self.float_bits == 64:
            return bits.view(np.float64)
        if self.float_bits == 32:
            return bits.astype(np.uint32).view(np.float32).astype(np.float64)
        if self.float_bits == 16:
            return bits.astype(np.uint16).view(np.float16).astype(np.float64)
        if not self.signed:
            return bits if self.length == 64 else bits.astype(np.int64)
        if self.length == 64:
            return bits.view(np.int64)
        sign = np.int64(1 << (self.length - 1))
        return (bits.astype(np.int64) ^ sign) - sign

    # -- values --------------------------------------------------------------------------

    def physical(self, raw: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """raw * scale + offset, computed as cantools computes it in Python."""
        conv = self.conversion
        kind = type(conv).__name__
        if kind == "IdentityConversion":
            return raw
        scale, offset = conv.scale, conv.offset
        if raw.dtype.kind == "f":
            return raw * float(scale) + float(offset)
        if kind == "LinearIntegerConversion":
            if self.out_type == pa.int64():
                return raw.astype(np.int64) * np.int64(scale) + np.int64(offset)
            if self.out_type == pa.uint64():
                return raw.astype(np.uint64) * np.uint64(scale) + np.uint64(offset)
            return _exact_float(raw, int(scale), int(offset))
        if isinstance(scale, int) and not isinstance(scale, bool):
            lo, hi = _raw_bounds(self.spec)
            if _fits(min(lo * scale, hi * scale), max(lo * scale, hi * scale), _INT64):
                product = raw.astype(np.int64) * np.int64(scale)
                return product.astype(np.float64) + float(offset)
            return _exact_float(raw, scale, offset)
        return raw.astype(np.float64) * float(scale) + float(offset)

    def labels(self, raw: npt.NDArray[Any]) -> npt.NDArray[np.bool_] | None:
        """Which rows' raw values have a label (cantools looks them up by int(raw))."""
        if not len(self.label_keys):
            return None
        return self._label_index(raw)[1]

    def _label_index(
        self, raw: npt.NDArray[Any]
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        if raw.dtype.kind == "f":
            finite = np.isfinite(raw)
            keys = np.where(finite, np.trunc(np.where(finite, raw, 0)), 0)
            keys = np.clip(keys, -(2.0**63), 2.0**63 - 1024).astype(np.int64)
        elif raw.dtype == np.uint64:
            finite = raw <= np.uint64(2**63 - 1)
            keys = np.where(finite, raw, 0).astype(np.int64)
        else:
            finite = None
            keys = raw
        index = np.searchsorted(self.label_keys, keys)
        index = np.minimum(index, len(self.label_keys) - 1)
        hit = self.label_keys[index] == keys
        if finite is not None:
            hit &= finite
        return index.astype(np.int32), hit

    def label_array(self, raw: npt.NDArray[Any], present: npt.NDArray[np.bool_] | None) -> pa.Array:
        index, hit = self._label_index(raw)
        valid = hit if present is None else hit & present
        indices = column(index, pa.int32(), mask=~valid)
        return pa.DictionaryArray.from_arrays(indices, self.label_values)

    # -- schema --------------------------------------------------------------------------

    def fields(self) -> list[pa.Field]:
        spec = self.spec
        meta: dict[str, str] = {"signal": spec.name}
        if spec.unit:
            meta["unit"] = spec.unit
        if spec.minimum is not None and spec.maximum is not None:
            meta["minimum"] = repr(float(spec.minimum))
            meta["maximum"] = repr(float(spec.maximum))
        meta["scale"] = repr(float(spec.scale))
        meta["offset"] = repr(float(spec.offset))
        if spec.comment:
            meta["comment"] = spec.comment[:_MAX_COMMENT_META]
        if spec.multiplexer_signal is not None:
            meta["multiplexer"] = spec.multiplexer_signal
            meta["multiplexer_ids"] = json.dumps(list(spec.multiplexer_ids))
        if spec.is_multiplexer:
            meta["is_multiplexer"] = "true"
        if spec.choices:
            shown = dict(list(spec.choices.items())[:_MAX_LABELS_META])
            meta["labels"] = json.dumps({str(k): v for k, v in shown.items()})
        out = [pa.field(self.column, self.out_type, nullable=True, metadata=meta)]
        if self.label_column is not None:
            out.append(
                pa.field(
                    self.label_column,
                    pa.dictionary(pa.int32(), pa.string()),
                    nullable=True,
                    metadata={"labels_of": self.column, "signal": spec.name},
                )
            )
        return out


def _raw_bounds(spec: SignalSpec) -> tuple[int, int]:
    return int(spec.raw_min), int(spec.raw_max)


def _fits(lo: int, hi: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= lo and hi <= bounds[1]


def _exact_float(raw: npt.NDArray[Any], scale: int, offset: float) -> npt.NDArray[np.float64]:
    """Products too large for 64 bits: Python integers, as cantools computes them (rare)."""
    return np.array([float(int(r) * scale + offset) for r in raw.tolist()], np.float64)


def _out_type(spec: SignalSpec, conversion: Any, float_bits: int) -> pa.DataType:
    kind = type(conversion).__name__
    if float_bits or kind == "LinearConversion":
        return pa.float64()
    lo, hi = _raw_bounds(spec)
    if kind == "LinearIntegerConversion":
        scale, offset = int(conversion.scale), int(conversion.offset)
        ends = (lo * scale + offset, hi * scale + offset)
        lo, hi = min(ends), max(ends)
    if _fits(lo, hi, _INT64):
        return pa.int64()
    if _fits(lo, hi, _UINT64):
        return pa.uint64()
    return pa.float64()


def _dependency_order(plans: Sequence[SignalPlan]) -> list[SignalPlan]:
    """Multiplexers before the signals they select (extended multiplexing nests)."""
    by_name = {p.name: p for p in plans}
    depth: dict[str, int] = {}

    def level(plan: SignalPlan, seen: frozenset[str] = frozenset()) -> int:
        if plan.name in depth:
            return depth[plan.name]
        parent = by_name.get(plan.parent) if plan.parent else None
        value = (
            0 if parent is None or parent.name in seen else level(parent, seen | {plan.name}) + 1
        )
        depth[plan.name] = value
        return value

    return sorted(plans, key=level)


class MessagePlan:
    """How to turn a message's frames into one Arrow record batch (table schema included)."""

    def __init__(
        self,
        table: str,
        message: Any,
        specs: Sequence[SignalSpec],
        *,
        database: str = "",
    ) -> None:
        self.table = table
        self.message = message
        self.length = int(message.length)
        names = ColumnNames()
        plans: list[SignalPlan] = []
        for spec in specs:
            column = names.claim(spec.name)
            label = names.claim(f"{column}_label") if spec.choices else None
            plans.append(SignalPlan.build(spec, column, label))
        self.signals = plans
        self._ordered = _dependency_order(plans)
        self.renamed = {p.name: p.column for p in plans if p.column != p.name}
        fields = [pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False)]
        for plan in plans:
            fields.extend(plan.fields())
        frame_id = int(message.frame_id)
        extended = bool(message.is_extended_frame)
        meta = {
            "hwbridge.message": message.name,
            "hwbridge.table": table,
            "hwbridge.frame_id": f"0x{frame_id:08X}" if extended else f"0x{frame_id:03X}",
            "hwbridge.extended": "true" if extended else "false",
            "hwbridge.length": str(self.length),
            "hwbridge.database": database,
        }
        if message.protocol == "j1939" and extended:
            meta["hwbridge.j1939_pgn"] = str((frame_id >> 8) & 0x3FFFF)
        if message.comment and isinstance(message.comment, str):
            meta["hwbridge.comment"] = message.comment[:_MAX_COMMENT_META]
        self.schema = pa.schema(fields, metadata=meta)

    def decode(
        self,
        timestamp_us: npt.NDArray[np.int64],
        data: npt.NDArray[np.uint8],
        length: npt.NDArray[np.uint8],
    ) -> pa.RecordBatch:
        """One row per frame: the timestamp and every signal (null where absent)."""
        n = len(timestamp_us)
        windows = _Windows(data, self.length)
        carried = np.minimum(length.astype(np.int64), self.length)
        short = bool(np.any(carried < self.length))
        present: dict[str, npt.NDArray[np.bool_] | None] = {}
        mux_numbers: dict[str, npt.NDArray[Any]] = {}
        columns: dict[str, pa.Array] = {}
        for plan in self._ordered:
            ok: npt.NDArray[np.bool_] | None = None
            if plan.needed > self.length:
                ok = np.zeros(n, np.bool_)  # beyond the message in the database
            elif short:
                ok = carried >= plan.needed
            if plan.parent is not None and plan.parent in mux_numbers:
                selected = np.isin(mux_numbers[plan.parent], plan.mux_ids)
                parent_ok = present[plan.parent]
                selected = selected if parent_ok is None else selected & parent_ok
                ok = selected if ok is None else ok & selected
            elif plan.parent is not None:
                ok = np.zeros(n, np.bool_)  # its multiplexer is not a signal of the message
            raw = plan.raw(windows)
            value = plan.physical(raw)
            present[plan.name] = ok
            if plan.spec.is_multiplexer:
                # cantools looks the branch up by the label's raw value, else the value
                labelled = plan.labels(raw)
                number = value.astype(np.float64)
                if labelled is not None:
                    number = np.where(labelled, raw.astype(np.float64), number)
                mux_numbers[plan.name] = number
            mask = None if ok is None else ~ok
            columns[plan.column] = column(value, plan.out_type, mask=mask)
            if plan.label_column is not None:
                columns[plan.label_column] = plan.label_array(raw, ok)
        arrays = [column(timestamp_us, pa.timestamp("us", tz="UTC"))]
        arrays += [columns[f.name] for f in list(self.schema)[1:]]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
