"""The simulator dies in the middle of a call: BUS_DOWN within the timeout, then recovery.

A real separate process, a real socketcand connection: the driver must neither hang nor
report stale values as live, and it must work again once the simulator is back.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from typing import Any

from hwbridge import CanDriver, DriverResponse
from tests.conftest import wait_until
from tests.sim.conftest import DEMO
from tests.sim.test_cli import launch


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


WAIT_S = 20.0
"""The wait under way when the simulator is killed."""


def test_killed_simulator_gives_bus_down_then_the_driver_recovers() -> None:
    first = launch("--socketcand", "127.0.0.1:0", "--no-drive")
    port = first.port
    driver = CanDriver.from_dbc(DEMO, bus=f"socketcand://127.0.0.1:{port}/vcan0")
    second = None
    try:
        read = call(driver, "read_signals", signals=["EngineSpeed"], timeout_ms=2000)
        assert read.call_executed, read.retry_prompt

        # a long wait is under way when the simulator is killed
        results: list[DriverResponse] = []
        waiting = threading.Thread(
            target=lambda: results.append(
                call(
                    driver,
                    "wait_for_signal",
                    signal="VehicleSpeed",
                    op=">",
                    value=200,
                    timeout_ms=int(WAIT_S * 1000),
                )
            )
        )
        waiting.start()
        time.sleep(0.3)  # the wait is under way (nothing to see of it from here)
        killed_at = time.monotonic()
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(5)
        waiting.join(WAIT_S / 2)
        assert not waiting.is_alive()
        assert time.monotonic() - killed_at < WAIT_S / 2  # long before the 20 s timeout
        [down] = results
        assert down.call_failed
        assert (down.call_detail or "").startswith("BUS_DOWN")

        stale = call(driver, "read_signals", signals=["EngineSpeed"])
        assert (stale.call_detail or "").startswith("BUS_DOWN")  # never stale values as live

        second = launch("--socketcand", f"127.0.0.1:{port}", "--no-drive")
        assert wait_until(
            lambda: call(driver, "read_signals", signals=["EngineSpeed"]).call_executed,
            timeout_s=15.0,
        )
        again = call(driver, "read_signals", signals=["EngineSpeed"], timeout_ms=2000)
        assert 600 < again.tool_call_result["values"]["EngineSpeed"]["value"] < 1000
    finally:
        driver.close()
        for sim in (first, second):
            if sim is not None and sim.process.poll() is None:
                sim.stop()
