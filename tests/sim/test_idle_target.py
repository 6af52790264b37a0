"""The idle speed is a setting of the vehicle model (the engine ECU's DID 0x0101 writes it)."""

from __future__ import annotations

import pytest

from firmware_sim.model import VehicleModel


def test_the_idle_speed_is_a_setting_the_engine_settles_at() -> None:
    default = VehicleModel(seed=4, driving=False)
    assert default.advance(3.0).engine_speed_rpm == pytest.approx(800, abs=15)
    model = VehicleModel(seed=4, driving=False, idle_rpm=650)
    assert model.advance(3.0).engine_speed_rpm == pytest.approx(650, abs=15)
    model.set_idle_rpm(950)
    state = model.advance(3.0)
    assert state.engine_speed_rpm == pytest.approx(950, abs=15)
    assert state.idle_target_rpm == 950.0
    model.set_gear("D")
    model.set_brake(True)  # in gear at a standstill the converter slips: idle still
    assert model.advance(3.0).engine_speed_rpm == pytest.approx(950, abs=15)


def test_an_unwritten_idle_target_leaves_the_model_as_it_was() -> None:
    one, other = VehicleModel(seed=9), VehicleModel(seed=9, idle_rpm=800.0)
    for _ in range(30):
        assert one.advance(1.0) == other.advance(1.0)
