"""The simulated supply answers the client people use for bench instruments: pyvisa with
the pure-Python pyvisa-py backend, over ASRL on the pty."""

from __future__ import annotations

import pytest

from firmware_sim.bench_psu import IDENTITY, BenchPsu

pyvisa = pytest.importorskip("pyvisa")
pytest.importorskip("pyvisa_py")


def test_pyvisa_drives_the_simulated_supply(psu: BenchPsu) -> None:
    manager = pyvisa.ResourceManager("@py")
    instrument = manager.open_resource(
        f"ASRL{psu.port_name}::INSTR", read_termination="\n", write_termination="\n", timeout=2000
    )
    try:
        assert instrument.query("*IDN?") == IDENTITY
        instrument.write("VOLT 12;CURR 2;OUTP ON")
        assert float(instrument.query("MEAS:VOLT?")) == 12.0
        assert float(instrument.query("MEAS:CURR?")) == pytest.approx(1.2)
        assert instrument.query("SYST:ERR?") == '0,"No error"'
    finally:
        instrument.close()
        manager.close()
