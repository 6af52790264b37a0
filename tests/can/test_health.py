"""CanDriver.healthcheck() and raw_spec() on real transports, and their aggregation."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import can
from firmware_sim import VirtualVehicle
from firmware_sim.socketcand import SocketcandServer
from hwbridge import AuditLog, CanDriver, Capability, ConsentGate, Orchestrator, RateLimit
from hwbridge.can import DatabaseRepairWarning
from hwbridge.core.health import Health, health_of, raw_spec_of, worst_status
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.core.drivers import Thermostat

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("no_thread_leaks")]

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"


def part(health: Health) -> Health:
    assert list(health.parts) == ["can"]
    return health.parts["can"]


def test_live_bus_is_ok_with_counters_and_last_frame_age(channel: str) -> None:
    with (
        VirtualVehicle(DEMO, channel=channel),
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as driver,
    ):
        assert wait_until(lambda: part(driver.healthcheck()).details["frames_total"] > 20)
        health = driver.healthcheck()
        net = part(health)
        assert health.status == net.status == "ok" and health.ok
        assert net.problems == []
        assert net.details["adapter_answering"] is True
        assert net.details["bus_state"] == "active"
        assert net.details["error_frames"] == 0
        # EngineData goes out every 10 ms (its GenMsgCycleTime in the demo database)
        assert 0 <= net.details["last_frame_age_s"] < 0.01 + BUSY_MARGIN_S
        assert net.details["bus"] == f"virtual:{channel}"
        Health.model_validate_json(health.model_dump_json())  # JSON-safe, round-trips


def test_quiet_bus_is_degraded_and_says_why(channel: str, peer: can.BusABC) -> None:
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as driver:
        never = part(driver.healthcheck())
        assert never.status == "degraded" and not driver.healthcheck().ok
        assert never.problems == ["no frame received yet"]
        assert never.details["last_frame_age_s"] is None
        peer.send(can.Message(arbitration_id=0x100, data=bytes(8), is_extended_id=False))
        assert wait_until(lambda: part(driver.healthcheck()).details["frames_total"] == 1)
        assert part(driver.healthcheck()).status == "ok"
        assert wait_until(
            lambda: part(driver.healthcheck(silent_after_s=0.05)).status == "degraded"
        )
        silent = part(driver.healthcheck(silent_after_s=0.05))
        assert silent.problems[0].startswith("no frame for ")


def test_lost_connection_is_down(channel: str) -> None:
    server = SocketcandServer({"vcan0": channel}).start()
    try:
        driver = CanDriver.from_dbc(DEMO, bus=f"socketcand://127.0.0.1:{server.port}/vcan0")
    except BaseException:
        server.stop()
        raise
    with driver:
        assert part(driver.healthcheck()).details["adapter_answering"] is True
        server.stop()
        assert wait_until(lambda: driver.healthcheck().status == "down")
        net = part(driver.healthcheck())
        assert net.details["adapter_answering"] is False
        assert net.problems[0].startswith("not connected (")


def test_offline_driver_and_raw_spec_as_loaded(tmp_path: Path) -> None:
    copy = tmp_path / "car.dbc"
    data = DEMO.read_bytes()
    copy.write_bytes(data)
    with CanDriver.from_dbc(copy) as driver:
        copy.write_text("changed on disk after loading")
        assert driver.healthcheck().status == "offline" and driver.healthcheck().ok
        assert part(driver.healthcheck()).details["bus"] is None
        spec = driver.raw_spec()["can"]
        assert spec.format == "DBC" and spec.source == str(copy)
        assert spec.text == data.decode() and spec.sha256 == hashlib.sha256(data).hexdigest()
        assert spec.repaired is False
        assert {"healthcheck", "raw_spec"} <= set(driver.meta.capabilities)


def test_repaired_database_gives_the_original_text(tmp_path: Path) -> None:
    text = DEMO.read_text().replace("BO_ 256 EngineData:", "BO_ 256 1EngineData:", 1)
    assert text != DEMO.read_text()
    path = tmp_path / "digit.dbc"
    path.write_text(text)
    with pytest.warns(DatabaseRepairWarning), CanDriver.from_dbc(path) as driver:
        spec = driver.raw_spec()["can"]
    assert spec.repaired is True and spec.text == text


def test_several_networks_report_each(channel: str) -> None:
    with CanDriver.from_networks(
        {"pt": {"dbc": DEMO, "bus": f"virtual:{channel}"}, "body": {"dbc": DEMO}}
    ) as driver:
        health = driver.healthcheck()
        assert set(health.parts) == {"pt", "body"}
        assert health.parts["body"].status == "offline"
        assert health.status == health.parts["pt"].status == "degraded"  # nothing on pt yet
        assert set(driver.raw_spec()) == {"pt", "body"}


def test_orchestrator_aggregates_by_label_and_decorators_delegate(channel: str) -> None:
    with (
        VirtualVehicle(DEMO, channel=channel),
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as car,
        CanDriver.from_dbc(DEMO) as catalog,
    ):
        gated = ConsentGate(RateLimit(car, 10), lambda tool, args: False)
        assert {"healthcheck", "raw_spec"} <= set(gated.meta.capabilities)
        assert wait_until(lambda: gated.healthcheck().status == "ok")
        assert gated.raw_spec() == car.raw_spec()
        bench = Orchestrator({"car": gated, "catalog": catalog})
        assert Capability.HEALTHCHECK in bench.meta.capabilities
        health = bench.healthcheck()
        assert {k: v.status for k, v in health.parts.items()} == {"car": "ok", "catalog": "offline"}
        assert health.status == "ok"
        assert set(bench.raw_spec()) == {"car/can", "catalog/can"}
        assert health_of(bench).status == "ok"  # advertised, so asked

        # a driver without a health check: the part is unknown, the flag is not advertised
        bench.add_driver(Thermostat(), label="room")
        assert "healthcheck" not in bench.meta.capabilities
        mixed = bench.healthcheck()
        assert mixed.parts["room"].status == "unknown" and mixed.status == "ok"
        assert set(bench.raw_spec()) == {"car/can", "catalog/can"}
        assert health_of(bench).status == "unknown" and raw_spec_of(bench) == {}
        audited = AuditLog(Thermostat(), "/dev/null")
        assert "healthcheck" not in audited.meta.capabilities
        assert audited.healthcheck().status == "unknown" and audited.raw_spec() == {}


def test_worst_status_ranks() -> None:
    assert worst_status([]) == "unknown"
    assert worst_status(["offline", "offline"]) == "offline"
    assert worst_status(["offline", "unknown"]) == "unknown"
    assert worst_status(["ok", "offline", "unknown"]) == "ok"
    assert worst_status(["ok", "degraded"]) == "degraded"
    assert worst_status(["degraded", "down", "ok"]) == "down"


def test_a_failing_health_check_is_reported_not_raised() -> None:
    class Broken(Thermostat):
        meta = Thermostat.meta.model_copy(update={"capabilities": ["healthcheck"]})

        def healthcheck(self) -> Health:
            raise RuntimeError("sensor bus exploded")

    health = health_of(Broken())
    assert health.status == "unknown" and "sensor bus exploded" in health.problems[0]
