"""Fixtures for the serial bridge: the simulated bench supply and GNSS receiver on ptys, each
reached through a stable symlink (as udev's /dev/serial/by-id names are), so a test can
unplug a device and plug it back under the same name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_sim.bench_psu import BenchPsu
from firmware_sim.gnss import GnssReceiver

ROOT = Path(__file__).resolve().parents[2]
PSU_SPEC = ROOT / "devices" / "bench_psu.toml"
GNSS_SPEC = ROOT / "devices" / "gnss_nmea.toml"


@pytest.fixture
def psu(tmp_path: Path) -> Iterator[BenchPsu]:
    device = BenchPsu(link=tmp_path / "psu")
    device.start()
    yield device
    device.stop()


@pytest.fixture
def gnss(tmp_path: Path) -> Iterator[GnssReceiver]:
    device = GnssReceiver(link=tmp_path / "gnss", rate_hz=10)
    device.start()
    yield device
    device.stop()
