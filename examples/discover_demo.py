"""A bus without a DBC: a recorded LLM session finds the vehicle's speed and brake pedal.

    python examples/discover_demo.py

The simulated demo vehicle drives on a python-can virtual channel with a GNSS module beside
it (`dbc/gnss_module.dbc`). The client knows nothing of the vehicle's database: it opens
`CanDriver.from_bus(bus, reference=<the GNSS module's DBC>)`, and the recorded LLM outputs
below are played through `process_llm_response`, as a live model's would be:

1. `survey_bus` while the car pulls away: every frame id split into fields; the field that
   moves with the GNSS speed comes back with its unit, scale and offset;
2. `snapshot_bus` before and after the driver presses the brake, then `diff_snapshots`:
   the bit that changed comes first;
3. `define_signal` for both, then `read_signals` reads them at once, beside the GNSS speed;
4. `draft_dbc`: what was defined, as DBC text.

The outputs were recorded from a session like this one, not produced now by a live model;
each step checks that the answer the bus gives now is the one the recorded model relied on
(the field's place, the scale within 2%), and the script exits 1 naming the step if not.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from firmware_sim import VirtualVehicle
from hwbridge import CanDriver
from hwbridge.resources import bundled_dbc

Check = Callable[[dict[str, Any]], str | None]


def speed_field(result: dict[str, Any]) -> str | None:
    """The survey found 0x110's field at bit 0 moving with the GNSS speed, ~0.01 km/h."""
    for message in result["messages"]:
        if message["id"] != 0x110:
            continue
        for field in message["signals"]:
            ref = field["reference"]
            if field["start_bit"] == 0 and ref and ref["signal"] == "GnssSpeedKmh":
                if abs(field["scale"] / 0.01 - 1) <= 0.02 and field["unit"] == "km/h":
                    return None
                return f"0x110 bit 0 matched the GNSS speed with scale {field['scale']}"
    return "no field of 0x110 moved with the GNSS speed"


def brake_first(result: dict[str, Any]) -> str | None:
    """The bit that changed when the brake was pressed ranks first: 0x110 bit 56, 0 -> 1
    (the brake light's bit, 0x2A1 bit 5, ranks beside it)."""
    changes = result["changes"]
    best = [c for c in changes if c["score"] == changes[0]["score"]] if changes else []
    if any((c["id"], c["start_bit"], c["before"], c["after"]) == (0x110, 56, 0, 1) for c in best):
        return None
    return f"the first changes are {best}"


def read_both(result: dict[str, Any]) -> str | None:
    values = result["values"]
    speed, gnss = values["VehicleSpeed"]["value"], values["GnssSpeedKmh"]["value"]
    if values["BrakePressed"]["value"] != 1:
        return "BrakePressed is not 1 while the brake is pressed"
    if abs(speed - gnss) > 5.0:  # the GNSS speed comes every 100 ms, the car is braking
        return f"VehicleSpeed {speed} and GnssSpeedKmh {gnss} differ by more than 5 km/h"
    return None


# (what the user does first, the LLM's output as recorded, the check of the answer)
SESSION: list[tuple[str | None, str, Check | None]] = [
    (
        "pull away (D, 30% throttle)",
        '{"tool": "survey_bus", "arguments": {"duration_ms": 4000}}',
        speed_field,
    ),
    (
        None,
        '{"tool": "snapshot_bus", "arguments": {"name": "released", "duration_ms": 1000}}',
        None,
    ),
    (
        "press the brake",
        '{"tool": "snapshot_bus", "arguments": {"name": "pressed", "duration_ms": 1000}}',
        None,
    ),
    (
        None,
        '{"tool": "diff_snapshots", "arguments": {"a": "released", "b": "pressed"}}',
        brake_first,
    ),
    (
        None,
        "SIG_110_0 moves with GnssSpeedKmh at 0.01 km/h a step, and the bits above it never"
        " changed, so the speed is the whole 16-bit word:\n"
        '{"tool": "define_signal", "arguments": {"name": "VehicleSpeed", "id": "0x110",'
        ' "start_bit": 0, "length": 16, "byte_order": "little_endian", "scale": 0.01,'
        ' "unit": "km/h"}}',
        None,
    ),
    (
        None,
        '{"tool": "define_signal", "arguments": {"name": "BrakePressed", "id": "0x110",'
        ' "start_bit": 56, "length": 1, "byte_order": "little_endian"}}',
        None,
    ),
    (
        None,
        '{"tool": "read_signals", "arguments": {"signals": ["VehicleSpeed", "BrakePressed",'
        ' "GnssSpeedKmh"]}}',
        read_both,
    ),
    (None, '{"tool": "draft_dbc", "arguments": {}}', None),
]


def act(car: VirtualVehicle, action: str) -> None:
    """What the user does before a step (the simulator stands in for the driver)."""
    if action.startswith("pull away"):
        car.set_gear("D")
        car.set_throttle(30)
    elif action == "press the brake":
        car.set_brake(True)
        time.sleep(0.2)  # the pedal is down before the next recording starts


def shown(result: Any, limit: int = 700) -> str:
    text = json.dumps(result)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text)} characters)"


def main() -> int:
    channel = f"discover-{uuid.uuid4().hex[:8]}"
    gnss = bundled_dbc("gnss_module.dbc")
    print("recorded, not produced by a live model; the client has no DBC of the vehicle")
    with (
        VirtualVehicle([bundled_dbc(), gnss], channel=channel, drive=False) as car,
        CanDriver.from_bus(f"virtual:{channel}", reference=gnss) as driver,
    ):
        for number, (action, output, check) in enumerate(SESSION, 1):
            if action:
                print(f"\n[user] {action}")
                act(car, action)
            print(f"\n[llm {number}] {output}")
            response = driver.process_llm_response(output)
            if response.call_failed or not response.call_executed:
                print(f"step {number} did not run: {response.call_detail}")
                return 1
            result = response.tool_call_result
            print(f"[bus] {shown(result)}")
            problem = check(result) if check else None
            if problem:
                print(f"step {number}: the bus answered differently from the recording: {problem}")
                return 1
        dbc = result["dbc"]
    print("\n" + "\n".join(line for line in dbc.splitlines() if line.startswith((" SG_", "BO_"))))
    print("\ndiscovery demo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
