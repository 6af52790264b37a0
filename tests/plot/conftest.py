"""Datasets and helpers for the plot tests: a dataset written with pyarrow (a long signal and
a labelled one), PNG headers read by hand."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

T0_US = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def write_dataset(root: Path, rows: int = 100_000) -> Path:
    """`Drive`: Speed (km/h, a sawtooth with one spike) and Gear (labelled P/R/N/D), one
    sample per millisecond from T0_US."""
    np = pytest.importorskip("numpy")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = root / "Drive" / "source=drive.blf"
    folder.mkdir(parents=True)
    t = T0_US + np.arange(rows, dtype=np.int64) * 1000
    speed = (np.arange(rows) % 1000) / 10.0
    speed[rows // 3] = 999.0  # one sample a picture must not lose
    gear = (np.arange(rows) * 4 // rows).astype(np.int64)
    fields = [
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("Speed", pa.float64(), metadata={"unit": "km/h", "signal": "Speed"}),
        pa.field(
            "Gear",
            pa.int64(),
            metadata={
                "signal": "Gear",
                "labels": json.dumps({"0": "P", "1": "R", "2": "N", "3": "D"}),
                "label_column": "Gear_label",
            },
        ),
    ]
    table = pa.table(
        [pa.array(t, type=fields[0].type), pa.array(speed), pa.array(gear)],
        schema=pa.schema(fields),
    )
    pq.write_table(table, folder / "part-0.parquet", row_group_size=50_000)
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("plot") / "ds")


@pytest.fixture
def channel() -> str:
    """A virtual channel no other test uses."""
    import uuid

    return f"hwb-plot-{uuid.uuid4().hex[:12]}"
