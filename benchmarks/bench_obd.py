"""A mode 01 read (010C, engine speed) against the simulated vehicle, each way against the
bare library making the same request in the same run:

- over ISO-TP: `IsoTpObdAdapter` (physical request to the engine ECU) against can-isotp's
  `NotifierBasedCanStack` on its own python-can bus, the same request and reply;
- over the ELM327 pty: `Elm327Adapter` against pyserial writing `010C1` and reading to the
  prompt.

Medians of many requests; the ratio is hwbridge's time over the bare library's.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import isotp
import serial

import can
from firmware_sim.elm327 import Elm327Device
from firmware_sim.model import VehicleModel
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.transport.adapter import PythonCanAdapter
from hwbridge.obd import Elm327Adapter, IsoTpObdAdapter

ROOT = Path(__file__).resolve().parents[1]
DBC = ROOT / "dbc" / "demo_vehicle.dbc"
ROUNDS = 200
WARMUP = 10


def _median_ms(request: Callable[[], bytes]) -> float:
    for _ in range(WARMUP):
        request()
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        answer = request()
        times.append(time.perf_counter() - started)
        assert answer[:2] == b"\x41\x0c", answer
    return statistics.median(times) * 1000


def bench_isotp(channel: str) -> tuple[float, float]:
    with IsoTpObdAdapter(PythonCanAdapter(f"virtual:{channel}"), own_adapter=True) as adapter:
        adapter.request(b"\x01\x00")
        engine = adapter.ecus()[0]
        ours = _median_ms(lambda: adapter.request(b"\x01\x0c", ecu=engine)[0].data)
    bus = can.Bus(interface="virtual", channel=channel)
    notifier = can.Notifier(bus, [], timeout=0.1)
    stack = isotp.NotifierBasedCanStack(
        bus,
        notifier,
        address=isotp.Address(isotp.AddressingMode.Normal_11bits, txid=0x7E0, rxid=0x7E8),
        params={"tx_padding": 0, "tx_data_min_length": 8, "blocksize": 0, "stmin": 0},
    )
    stack.start()

    def bare() -> bytes:
        stack.send(b"\x01\x0c")
        answer = stack.recv(block=True, timeout=1.0)
        assert answer is not None
        return bytes(answer)

    try:
        theirs = _median_ms(bare)
    finally:
        stack.stop()
        notifier.stop()
        bus.shutdown()
    return ours, theirs


def bench_elm327(channel: str) -> tuple[float, float]:
    with Elm327Device(channel) as elm:
        with Elm327Adapter.open(elm.port_name) as adapter:
            adapter.request(b"\x01\x00")
            engine = adapter.ecus()[0]
            ours = _median_ms(lambda: adapter.request(b"\x01\x0c", ecu=engine)[0].data)
        with serial.Serial(elm.port_name, timeout=2) as port:
            for command in (b"ATZ", b"ATE0", b"ATH0", b"ATS0", b"ATSP6", b"ATSH7E0"):
                port.write(command + b"\r")
                port.read_until(b">")

            def bare() -> bytes:
                port.write(b"010C1\r")
                text = port.read_until(b">")[:-1].decode().strip()
                return bytes.fromhex(text.splitlines()[-1] if "\n" in text else text.split("\r")[0])

            theirs = _median_ms(bare)
    return ours, theirs


def main() -> None:
    channel = f"bench-obd-{uuid.uuid4().hex[:8]}"
    model = VehicleModel(seed=1, driving=False, coolant_c=90.0)
    with VirtualVehicle(DBC, channel=channel, model=model):
        isotp_ours, isotp_bare = bench_isotp(channel)
        elm_ours, elm_bare = bench_elm327(channel)
    print(
        f"mode 01 read (010C) over ISO-TP: IsoTpObdAdapter {isotp_ours:.2f} ms, bare can-isotp "
        f"NotifierBasedCanStack {isotp_bare:.2f} ms: {isotp_ours / isotp_bare:.2f}x "
        f"(medians of {ROUNDS})"
    )
    print(
        f"mode 01 read (010C) over the ELM327 pty: Elm327Adapter {elm_ours:.2f} ms, bare "
        f"pyserial {elm_bare:.2f} ms: {elm_ours / elm_bare:.2f}x (medians of {ROUNDS})"
    )


if __name__ == "__main__":
    main()
