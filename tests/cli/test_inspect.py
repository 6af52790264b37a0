"""`hwbridge inspect` driven by piped stdin against a live bus fed by a sender thread."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import can
from firmware_sim.socketcand import SocketcandServer
from tests.cli.conftest import DEMO, REPO, Run

READ = 'read_signals {"signals": ["EngineSpeed", "CoolantTemp"]}\n'


def rx_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("hwbridge-can-rx")]


def test_session_reads_refuses_and_closes(
    run: Run, channel: str, engine_sender: can.BusABC
) -> None:
    script = (
        "help\n"
        "tools read_\n"
        "describe read_signals\n" + READ + 'call send_ClimateCommand {"CabinSetpoint": 21.5}\n'
        "status\n"
        "The engine idles at 1500 rpm.\n"
        "quit\n"
        "bus_status\n"  # after quit: never run
    )
    r = run("inspect", "--dbc", str(DEMO), "--bus", f"virtual:{channel}", stdin=script)
    assert r.code == 0, r.err
    out = r.out
    assert "22 tools; send policy read-only" in out
    assert "describe TOOL" in out and "paste" in out  # help
    assert "read_EngineData" in out and "list_messages" not in out  # the filtered table
    assert "max_age_ms" in out and "ignore values older than this" in out  # describe
    # the read, executed with the value on the bus
    read = out.split("hwbridge> read_signals", 1)[1].split("hwbridge> call", 1)[0]
    assert "call read_signals (text)" in read and "executed" in read
    assert '"EngineSpeed": {' in read and '"value": 1500.0' in read and '"unit": "rpm"' in read
    assert '"CoolantTemp": {' in read and '"value": 90' in read
    assert "Tool result of read_signals" in read  # the message the LLM would get back
    # the send, refused by the read-only policy
    send = out.split("hwbridge> call send_ClimateCommand", 1)[1].split("hwbridge> status", 1)[0]
    assert "failed" in send and "SEND_NOT_ALLOWED" in send and "retry prompt:" in send
    assert '"state": "connected"' in out  # status
    assert "no tool call: final answer" in out
    assert out.count("call bus_status") == 1  # status ran; the line after quit did not
    seen = iter(lambda: engine_sender.recv(0), None)
    assert all(frame.arbitration_id != 0x3C0 for frame in seen)  # nothing was sent
    deadline = time.monotonic() + 2
    while rx_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not rx_threads(), "the driver was not closed"


def test_allowed_send_reaches_the_bus(run: Run, channel: str) -> None:
    peer = can.Bus(interface="virtual", channel=channel)
    try:
        r = run(
            "inspect",
            "--dbc",
            str(DEMO),
            "--bus",
            f"virtual:{channel}",
            "--allow",
            "ClimateCommand",
            stdin='send_ClimateCommand {"CabinSetpoint": 21.5, "AcRequest": "On"}\n',
        )
        assert r.code == 0, r.err
        assert "send policy may send ClimateCommand" in r.out
        assert '"sent": true' in r.out
        frame = peer.recv(1.0)
        assert frame is not None and frame.arbitration_id == 0x3C0
        assert frame.data[0] == 43  # 21.5 degC / 0.5
    finally:
        peer.shutdown()


def test_pasted_llm_outputs(run: Run, channel: str, engine_sender: can.BusABC) -> None:
    script = (
        "Let me look. ```json\n"  # an unfinished paste continues on the next lines
        '{"tool": "read_signals",\n'
        ' "arguments": {"signals": ["EngineSpeed"]}}\n'
        "```\n"
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "call_7", "type": '
        '"function", "function": {"name": "read_message", "arguments": '
        '"{\\"message\\": \\"EngineData\\"}"}}]}\n'
        "{'tool': 'read_signals', 'arguments': {'signals': ['EngineSped']}\n"  # never closed
        "\n"
        "paste\n"
        'Decoding: <tool_call>{"tool": "decode_frame",\n'
        '"arguments": {"id": "0x100", "data": "70 17"}}</tool_call>\n'
        ".\n"
        "call nope {}\n"
        "call read_signals [1]\n"
    )
    r = run("inspect", "--dbc", str(DEMO), "--bus", f"virtual:{channel}", stdin=script)
    assert r.code == 0, r.err
    blocks = r.out.split("hwbridge> ")
    fenced = next(b for b in blocks if b.startswith("Let me look."))
    assert "call read_signals (text)" in fenced and '"value": 1500.0' in fenced
    openai = next(b for b in blocks if b.startswith('{"role"'))
    assert "call read_message (openai)" in openai and '"label": "Running"' in openai
    assert "call_7" in openai  # the tool message answers the OpenAI call id
    healed = next(b for b in blocks if b.startswith("{'tool'"))
    assert "(text, healed)" in healed and "UNKNOWN_SIGNAL" in healed
    assert "did you mean" in healed and "EngineSpeed" in healed
    pasted = next(b for b in blocks if b.startswith("paste"))
    assert "call decode_frame (text)" in pasted and '"EngineSpeed": 1500.0' in pasted
    assert "tool nope is unknown" in r.out
    assert "arguments must be a JSON object" in r.out


def test_piped_subprocess_over_socketcand(channel: str, engine_sender: can.BusABC) -> None:
    with SocketcandServer({"vcan0": channel}) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hwbridge",
                "inspect",
                "--dbc",
                str(DEMO),
                "--bus",
                server.url("vcan0"),
            ],
            input=READ + 'send_ClimateCommand {"CabinSetpoint": 21.5}\n',
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "executed" in proc.stdout and '"value": 1500.0' in proc.stdout
    assert "SEND_NOT_ALLOWED" in proc.stdout


def test_diagnostics_and_j1939_are_inspected_as_chat_and_mcp_take_them(
    run: Run, channel: str
) -> None:
    """`inspect --obd BUS` and `--j1939 BUS`: their tools by hand, each bridge's health."""
    from firmware_sim import VirtualVehicle
    from firmware_sim.j1939 import VirtualTruck

    with VirtualVehicle(DEMO, channel=channel, drive=False):
        r = run("inspect", "--obd", f"virtual:{channel}",
                stdin='tools obd_\ncall obd_read {"pids": ["RPM"]}\nstatus\n')  # fmt: skip
    assert r.code == 0, r.err
    assert "hwbridge inspect: obd (ObdDriver)" in r.out
    assert "obd_read_dtcs" in r.out and "obd_freeze_frame" in r.out  # the table
    read = r.out.split("hwbridge> call obd_read", 1)[1]
    assert '"name": "RPM"' in read and '"unit": "rpm"' in read and "executed" in read
    assert "obd: ok" in r.out
    truck_channel = f"{channel}-truck"
    with VirtualTruck(channel=truck_channel, drive=False):
        r = run("inspect", "--j1939", f"virtual:{truck_channel}", "--obd", f"virtual:{channel}",
                stdin="tools j1939_\ncall j1939_nodes {}\n")  # fmt: skip
    assert r.code == 0, r.err
    assert "j1939 (J1939Driver)" in r.out and "obd (ObdDriver)" in r.out
    nodes = r.out.split("hwbridge> call j1939_nodes", 1)[1]
    assert "executed" in nodes and '"address"' in nodes
