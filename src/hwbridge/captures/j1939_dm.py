"""The `j1939_dm` table: J1939 diagnostic messages DM1 and DM2 as rows, parsed with numpy.

One row per (message, trouble code): the time, the sending ECU's source address, `DM1`
(active) or `DM2` (previously active), the four lamps and how they flash, then the code's SPN,
FMI, occurrence count and conversion method, with the SPN's name and the FMI's meaning where
they are known. A message without a fault (SPN 0 and FMI 0, or padding only) is one row whose
SPN is NULL, so "when was the engine fault-free" has an answer too. Single-frame messages and
the multi-packet ones `J1939TpAssembler` reassembles are parsed alike, as
`hwbridge.j1939.database.dm.parse_dm` parses one (tested equal on random payloads), but a
batch of messages at a time: the lamp bytes with shifts, the trouble codes as a
(messages, codes, 4) view of the payloads.

An SPN is named first by the databases (a signal whose `SPN` attribute is that number), then by
the SAE table that ships with hwbridge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

from hwbridge.can.io.frames import FrameChunk
from hwbridge.captures.arrow_columns import column, strings
from hwbridge.captures.texts import capture_texts
from hwbridge.j1939.database.dm import LAMPS, MAX_DTCS, NOT_AVAILABLE_SPN, code_fields
from hwbridge.j1939.database.ids import DM1_PGN, DM2_PGN
from hwbridge.j1939.database.tables import fmi_text, spn_name

__all__ = ["DM_TABLE", "DmTable", "dm_mask"]

DM_TABLE: Final = "j1939_dm"
_MESSAGES: Final = {DM1_PGN: "DM1", DM2_PGN: "DM2"}
_STATES: Final = ("off", "on", "not_available")
_STATE_INDEX: Final = np.array([0, 1, 2, 2], np.int32)  # 2 bits -> _STATES (10 and 11: n/a)
_FLASHES: Final = ("slow", "fast")
_MIN_BYTES: Final = 6


def dm_mask(chunk: FrameChunk) -> npt.NDArray[np.bool_]:
    """The chunk's DM1 and DM2 messages: 29-bit ids of PGN 65226 or 65227 (any priority and
    source), at least 6 bytes (the lamps and one trouble code)."""
    pgn = (chunk.arbitration_id >> np.uint32(8)) & np.uint32(0x3FFFF)
    dm = (pgn == DM1_PGN) | (pgn == DM2_PGN)
    mask: npt.NDArray[np.bool_] = chunk.extended & dm & (chunk.length >= _MIN_BYTES)
    return mask


def _dictionary(indices: npt.NDArray[Any], values: list[str], valid: Any = None) -> pa.Array:
    mask = None if valid is None else ~np.asarray(valid, np.bool_)
    return pa.DictionaryArray.from_arrays(column(indices, pa.int32(), mask=mask), strings(values))


class DmTable:
    """The table's schema and the rows of a batch of DM messages (a plan for the writer)."""

    table = DM_TABLE

    def __init__(self, spn_names: Mapping[int, str] | None = None) -> None:
        self.spn_names = dict(spn_names or {})
        texts = capture_texts().tables[DM_TABLE]
        text = texts.columns
        strings = pa.dictionary(pa.int32(), pa.string())
        columns: list[tuple[str, pa.DataType]] = [
            ("source_address", pa.int64()),
            ("message", strings),
        ]
        for lamp in LAMPS:
            columns.append((lamp, strings))
        for lamp in LAMPS:
            columns.append((f"{lamp}_flash", strings))
        columns += [
            ("spn", pa.int64()),
            ("fmi", pa.int64()),
            ("occurrence_count", pa.int64()),
            ("conversion_method", pa.int64()),
            ("spn_name", strings),
            ("fmi_text", strings),
        ]
        fields = [pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False)]
        for name, kind in columns:
            meta = {"comment": text[name]} if name in text else {}
            fields.append(pa.field(name, kind, nullable=True, metadata=meta))
        self.schema = pa.schema(
            fields,
            metadata={
                "hwbridge.table": DM_TABLE,
                "hwbridge.message": "DM1, DM2",
                "hwbridge.j1939_pgn": f"{DM1_PGN}, {DM2_PGN}",
                "hwbridge.about": texts.about.strip(),
            },
        )
        self._fmi = [fmi_text(f) for f in range(32)]

    def _spn_name(self, spn: int) -> str | None:
        return self.spn_names.get(spn) or spn_name(spn)

    def batch(self, messages: FrameChunk) -> pa.RecordBatch:
        """The rows of these DM messages (frames or reassembled payloads, in time order)."""
        n = len(messages)
        data = messages.data
        length = np.minimum(messages.length.astype(np.int64), 2 + 4 * MAX_DTCS)
        slots = np.maximum((length - 2) // 4, 0)
        width = max(int(slots.max()) if n else 0, 1)
        payload = np.zeros((n, 2 + 4 * width), np.uint8)
        payload[:, : min(data.shape[1], payload.shape[1])] = data[:, : payload.shape[1]]
        codes = payload[:, 2:].reshape(n, width, 4).astype(np.int64)
        spn, fmi, method, counts = code_fields(
            codes[..., 0], codes[..., 1], codes[..., 2], codes[..., 3]
        )  # as parse_dtc reads one code
        present = np.arange(width)[None, :] < slots[:, None]
        present &= ~((spn == 0) & (fmi == 0)) & (spn != NOT_AVAILABLE_SPN)
        # rows: each code in message order, and one row for a message without any
        with_code, slot = np.nonzero(present)
        bare = np.flatnonzero(~present.any(axis=1))
        row_message = np.concatenate([with_code, bare])
        row_slot = np.concatenate([slot, np.full(len(bare), -1, np.int64)])
        order = np.lexsort((row_slot, row_message))
        row_message, row_slot = row_message[order], row_slot[order]
        has = row_slot >= 0
        at = np.maximum(row_slot, 0)
        row_spn = spn[row_message, at]
        row_fmi = fmi[row_message, at]
        row_count = counts[row_message, at]
        row_method = method[row_message, at]
        ids = messages.arbitration_id[row_message].astype(np.int64)
        pgn = (ids >> 8) & 0x3FFFF
        arrays: list[pa.Array] = [
            column(messages.timestamp_us[row_message], pa.timestamp("us", tz="UTC")),
            column(ids & 0xFF, pa.int64()),
            _dictionary((pgn == DM2_PGN).astype(np.int32), ["DM1", "DM2"]),
        ]
        state_byte = payload[row_message, 0].astype(np.int64)
        flash_byte = payload[row_message, 1].astype(np.int64)
        states = []
        for i in range(len(LAMPS)):
            states.append(_STATE_INDEX[(state_byte >> (6 - 2 * i)) & 3])
            arrays.append(_dictionary(states[i], list(_STATES)))
        for i in range(len(LAMPS)):
            flash = (flash_byte >> (6 - 2 * i)) & 3
            arrays.append(_dictionary(flash, list(_FLASHES), (flash < 2) & (states[i] == 1)))
        arrays += [
            column(row_spn, pa.int64(), mask=~has),
            column(row_fmi, pa.int64(), mask=~has),
            column(row_count, pa.int64(), mask=~has | (row_count == 0x7F)),
            column(row_method, pa.int64(), mask=~has),
            self._names(row_spn, has),
            self._fmi_texts(row_fmi, has),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _names(self, spn: npt.NDArray[np.int64], has: npt.NDArray[np.bool_]) -> pa.Array:
        unique, index = np.unique(np.where(has, spn, -1), return_inverse=True)
        names = [self._spn_name(int(s)) if s >= 0 else None for s in unique.tolist()]
        known = np.array([name is not None for name in names], np.bool_)
        values = [name or "" for name in names]
        return _dictionary(index.reshape(-1), values, known[index.reshape(-1)] & has)

    def _fmi_texts(self, fmi: npt.NDArray[np.int64], has: npt.NDArray[np.bool_]) -> pa.Array:
        known = np.array([t is not None for t in self._fmi], np.bool_)
        values = [t or "" for t in self._fmi]
        index = np.where(has, fmi, 0)
        return _dictionary(index, values, known[index] & has)
