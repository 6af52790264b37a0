"""`hwbridge tools|prompt|inspect --spec ... [--port ...]` and `hwbridge ports`, as a user
types them; the bundled specs by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_sim.bench_psu import BenchPsu
from tests.cli.conftest import Run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def psu() -> Iterator[BenchPsu]:
    with BenchPsu() as device:
        yield device


def test_tools_and_prompt_of_a_bundled_spec_offline(run: Run) -> None:
    r = run("tools", "--spec", "bench_psu", "--allow", "set_*", "--json")
    assert r.code == 0, r.err
    document = json.loads(r.out)
    tools = {t["name"]: t for t in document["tools"]}
    assert document["device"] == "bench_psu" and document["port"] is None
    assert {"set_voltage", "set_current_limit", "measure_voltage"} <= set(tools)
    assert "output" not in tools  # not allowed: not offered
    assert tools["measure_voltage"]["read_only"] and not tools["set_voltage"]["read_only"]
    r = run("prompt", "--spec", str(ROOT / "devices" / "gnss_nmea.toml"))
    assert r.code == 0 and '"name":"position"' in r.out and "no port attached" in r.out


@pytest.mark.parametrize(
    ("argv", "said", "status"),
    [
        (["tools", "--spec", "nothing"], "no bundled device spec 'nothing'", 2),
        (["tools", "--spec", "bench_psu", "--allow", "measure*"], "matches no command", 2),
        (["tools", "--spec", "bench_psu", "--dbc", "x.dbc"], "exclude each other", 2),
        (["prompt", "--spec", "bench_psu", "--port", "/dev/nonexistent-port"], "PORT_DOWN", 1),
        (["prompt", "--port", "nosuchscheme://x"], "--port", 2),
    ],
)
def test_bad_input_is_one_line(run: Run, argv: list[str], said: str, status: int) -> None:
    r = run(*argv)
    assert r.code == status and said in r.err and r.err.count("\n") == 1, r.err


def test_a_malformed_spec_names_the_key(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "psu.toml"
    text = (ROOT / "devices" / "bench_psu.toml").read_text()
    spec.write_text(text.replace("maximum = 30", 'maximum = "high"'))
    r = run("tools", "--spec", str(spec))
    assert r.code == 2
    assert f"{spec}: commands.set_voltage.params.volts.maximum" in r.err


def test_inspect_a_live_supply(run: Run, psu: BenchPsu) -> None:
    script = "\n".join(
        [
            "identify",
            'set_voltage {"volts": 4}',
            '{"tool": "voltage_setpoint", "arguments": {}}',
            'output {"state": "ON"}',
            "status",
            "quit",
        ]
    )
    r = run(
        "inspect", "--spec", "bench_psu", "--port", psu.port_name, "--allow", "set_voltage",
        stdin=script,
    )  # fmt: skip
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())
    assert "bench_psu" in flat and "may run set_voltage" in flat
    assert '"volts": { "value": 4.0' in flat or '"value": 4.0' in flat
    assert "SEND_NOT_ALLOWED" in flat  # output is not allowed
    assert '"identity_confirmed": true' in flat
    assert psu.volts == 4.0 and not psu.output


def test_ports_lists_serial_ports_and_can_channels(run: Run) -> None:
    r = run("ports", "--json")
    assert r.code == 0, r.err
    document = json.loads(r.out)
    assert set(document) == {"serial", "can"}
    assert all("port" in p for p in document["serial"])
    assert all("interface" in c and "channel" in c for c in document["can"])


def test_inspect_a_port_without_a_spec_is_read_only(run: Run, psu: BenchPsu) -> None:
    r = run(
        "inspect", "--port", psu.port_name, stdin='serial_read {"duration_ms": 20}\nstatus\nquit'
    )
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())
    assert "generic port tools" in flat and "read-only" in flat
    assert '"count": 0' in flat and '"state": "connected"' in flat
    assert "serial_query" not in flat.split("Type help")[0]
