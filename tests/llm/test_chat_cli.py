"""`hwbridge chat` with scripted stdin, against the loopback fake provider and the simulated
vehicle (in-process on a virtual bus, and in a subprocess over socketcand with Ctrl-C)."""

from __future__ import annotations

import contextlib
import io
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

import can
from firmware_sim import VirtualVehicle
from firmware_sim.socketcand import SocketcandServer
from hwbridge.cli.main import main
from tests.cli.sim_bus import stack_of
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, json_answer, sse

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "dbc" / "demo_vehicle.dbc"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def channel() -> str:
    return f"chat-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def vehicle(channel: str) -> Iterator[VirtualVehicle]:
    with VirtualVehicle(DEMO, channel=channel) as car:
        yield car


def chat(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *options: str,
    stdin: str,
) -> Result:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    capsys.readouterr()
    code = main(["chat", "--dbc", str(DEMO), *options])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def local(fake: FakeProvider, *more: str) -> tuple[str, ...]:
    return (
        "--provider",
        "openai-compatible",
        "--base-url",
        fake.base_url,
        "--model",
        "local",
        *more,
    )


def test_a_question_about_the_simulated_vehicle(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
    vehicle: VirtualVehicle,
) -> None:
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", "read_signals", {"signals": ["EngineSpeed"]})])),
        sse(P.openai_stream(["The engine ", "is running."], usage=(900, 12))),
    )
    r = chat(
        capsys,
        monkeypatch,
        *local(fake_openai, "--bus", f"virtual:{channel}"),
        stdin="What is the engine speed?\n/health\n",
    )
    assert r.code == 0, r.err
    out = r.out
    assert f"hwbridge chat: openai-compatible local (native tools) on virtual:{channel}" in out
    assert "send policy read-only" in out
    assert "you> What is the engine speed?" in out
    assert '→ read_signals {"signals": ["EngineSpeed"]}' in out
    assert '✓ read_signals {"values": {"EngineSpeed": {"value":' in out
    assert "model: The engine is running." in out
    assert "(2 rounds, 1,712 tokens in, 53 out)" in out
    assert '"adapter_answering": true' in out  # /health
    assert fake_openai.requests[0]["tools"][0]["function"]["name"] == "list_messages"


def test_consent_is_asked_on_the_terminal(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    send = "send_ClimateCommand"
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", send, {"CabinSetpoint": 22})])),
        sse(P.openai_stream(["Set to 22."])),
        sse(P.openai_stream([], [("call_2", send, {"CabinSetpoint": 23})])),
        sse(P.openai_stream(["Not sent."])),
    )
    peer = can.Bus(interface="virtual", channel=channel)
    try:
        r = chat(
            capsys,
            monkeypatch,
            *local(fake_openai, "--bus", f"virtual:{channel}", "--allow", "ClimateCommand"),
            "--consent",
            stdin="22 degrees\ny\n23 degrees\nn\n",
        )
        sent = [m for m in iter(lambda: peer.recv(0.2), None) if m.arbitration_id == 0x3C0]
    finally:
        peer.shutdown()
    assert r.code == 0, r.err
    assert "consent asked before each send" in r.out
    assert r.out.count(f'? allow {send} {{"CabinSetpoint": 22}}? [y/N] y') == 1
    assert f"✓ {send}" in r.out
    assert f'? allow {send} {{"CabinSetpoint": 23}}? [y/N] n' in r.out
    assert f"✗ {send} CONSENT_DENIED: The user did not approve {send}" in r.out
    assert len(sent) == 1  # only the approved one went out


def test_a_provider_error_is_one_line_and_the_chat_goes_on(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    # the SDK retries a 429 on its own; this one says not to, as a server may
    no_retry = {"x-should-retry": "false"}
    fake_openai.script(json_answer(P.OPENAI_429, 429, no_retry), sse(P.openai_stream(["Hello."])))
    r = chat(
        capsys,
        monkeypatch,
        *local(fake_openai, "--bus", f"virtual:{channel}"),
        stdin="hi\nhi again\n",
    )
    assert r.code == 0
    assert "provider error: openai-compatible: HTTP 429 (rate limited): Rate limit reached" in r.out
    assert "model: Hello." in r.out


def test_text_mode_never_prints_the_call(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    call = '{"tool": "bus_status", "arguments": {}}'
    fake_openai.script(
        sse(P.openai_stream(["Checking. ", call[:9], call[9:]])), sse(P.openai_stream(["Up."]))
    )
    r = chat(
        capsys,
        monkeypatch,
        *local(fake_openai, "--bus", f"virtual:{channel}", "--mode", "text"),
        stdin="is the bus up?\n",
    )
    assert r.code == 0, r.err
    assert "model: Checking." in r.out and "→ bus_status" in r.out and "model: Up." in r.out
    assert '"tool"' not in r.out


@pytest.mark.parametrize("stream", [True, False])
def test_text_call_result_and_answer_in_order_streamed_or_not(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
    vehicle: VirtualVehicle,
    stream: bool,
) -> None:
    """A message with text and a call: the text, the call, its result, then the answer with
    its label (without streaming, the call came first, the result was glued to the text and
    the answer had no label)."""
    call = ("call_1", "read_signals", {"signals": ["GearLever"]})
    if stream:
        fake_openai.script(
            sse(P.openai_stream(["Let me ", "look."], [call])),
            sse(P.openai_stream(["It is in P."])),
        )
    else:
        fake_openai.script(
            json_answer(P.openai_completion("Let me look.", [P.openai_call(*call)])),
            json_answer(P.openai_completion("It is in P.")),
        )
    options = ("--bus", f"virtual:{channel}", *(() if stream else ("--no-stream",)))
    r = chat(capsys, monkeypatch, *local(fake_openai, *options), stdin="which gear?\n")
    assert r.code == 0, r.err
    lines = [line.strip() for line in r.out.splitlines()]
    start = lines.index("you> which gear?")
    shown = [line for line in lines[start + 1 :] if line and not line.startswith("(")]
    assert shown[0] == "model: Let me look.", shown
    assert shown[1].startswith('→ read_signals {"signals": ["GearLever"]}'), shown
    assert shown[2].startswith("✓ read_signals {"), shown
    assert shown[3] == "model: It is in P.", shown


def test_missing_key_and_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, channel: str
) -> None:
    bus = ("--bus", f"virtual:{channel}")
    r = chat(capsys, monkeypatch, "--provider", "openai", "--model", "gpt-4o-mini", *bus, stdin="")
    assert r.code == 2
    assert r.err.startswith("hwbridge: --provider openai needs an API key: set OPENAI_API_KEY")
    assert "api_key=" not in r.err and r.err.count("\n") == 1
    r = chat(
        capsys, monkeypatch, "--provider", "anthropic", "--model", "claude-opus-4-6", *bus, stdin=""
    )
    assert r.code == 2 and "ANTHROPIC_API_KEY" in r.err and r.err.count("\n") == 1
    r = chat(capsys, monkeypatch, "--provider", "openai", *bus, stdin="")
    assert r.code == 2 and r.err.startswith("hwbridge: --model is required")
    r = chat(capsys, monkeypatch, "--provider", "openai-compatible", "--model", "m", *bus, stdin="")
    assert r.code == 2 and "needs --base-url" in r.err


def test_an_unreachable_server_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, channel: str
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    r = chat(
        capsys,
        monkeypatch,
        "--provider", "openai-compatible", "--base-url", url, "--model", "m",
        "--bus", f"virtual:{channel}",
        stdin="hello\n",
    )  # fmt: skip
    assert r.code == 1
    assert r.err.startswith(f"hwbridge: openai-compatible: cannot reach {url}: ")
    assert r.err.count("\n") == 1 and "you>" not in r.out


def test_a_refused_key_is_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    fake_openai.server.clear()
    fake_openai.server.expect_request("/v1/models").respond_with_json(P.OPENAI_401, status=401)
    r = chat(capsys, monkeypatch, *local(fake_openai, "--bus", f"virtual:{channel}"), stdin="")
    assert r.code == 2
    assert r.err.startswith("hwbridge: openai-compatible: HTTP 401 (the API key was refused)")


def _lines(stream: IO[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, ""):
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _until(lines: queue.Queue[str], needle: str, timeout_s: float = 15.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            seen += lines.get(timeout=0.1)
        except queue.Empty:
            continue
        if needle in seen:
            return seen
    raise AssertionError(f"{needle!r} never came; saw:\n{seen}")


@contextlib.contextmanager
def _ctrl_c_deliverable() -> Iterator[None]:
    """The command started meanwhile gets Ctrl-C's usual meaning. A suite run as a background
    job (`pytest ... &` in a script) has SIGINT ignored, which every process it starts inherits:
    the chat then keeps that at its prompt, as a program started with `nohup` should."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


WAIT_S = 20.0
"""The wait Ctrl-C interrupts."""


def test_ctrl_c_stops_a_long_wait_over_socketcand(fake_openai: FakeProvider, channel: str) -> None:
    """The command in its own process, the simulator behind a socketcand server: Ctrl-C
    ends a 20 s wait at once, the chat goes on, a second Ctrl-C leaves."""
    wait = {"signal": "EngineSpeed", "op": ">", "value": 15000, "timeout_ms": int(WAIT_S * 1000)}
    fake_openai.script(
        sse(P.openai_stream([], [("call_w", "wait_for_signal", wait)])),
        sse(P.openai_stream(["Still here."])),
    )
    with (
        VirtualVehicle(DEMO, channel=channel),
        SocketcandServer({"vcan0": channel}) as server,
        _ctrl_c_deliverable(),
    ):
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "hwbridge", "chat", "--dbc", str(DEMO),
                *local(fake_openai, "--bus", f"socketcand://127.0.0.1:{server.port}/vcan0"),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                **os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "PYTHONFAULTHANDLER": "1"
            },
        )  # fmt: skip
        try:
            assert proc.stdin is not None and proc.stdout is not None
            lines = _lines(proc.stdout)
            proc.stdin.write("wait until the engine revs past 15000 rpm\n")
            proc.stdin.flush()
            _until(lines, "→ wait_for_signal")
            time.sleep(0.3)  # the wait is under way
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
            try:
                _until(lines, "(interrupted)")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nthe chat's threads:\n{stack_of(proc)}") from None
            assert time.monotonic() - start < WAIT_S / 2  # at once, not when the wait ends
            proc.stdin.write("still there?\n")
            proc.stdin.flush()
            _until(lines, "model: Still here.")
            # at the prompt Ctrl-C leaves; on a loaded machine the first may arrive before
            # the prompt is back (it then ends the turn), so it is pressed again
            code = None
            for _ in range(10):
                proc.send_signal(signal.SIGINT)
                try:
                    code = proc.wait(1.0)
                    break
                except subprocess.TimeoutExpired:
                    continue
            assert code == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # the second request carried no half-answered call
    roles = [m["role"] for m in fake_openai.requests[1]["messages"]]
    assert roles == ["system", "user", "user"]


def test_one_chat_over_can_serial_and_obd_under_one_policy(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
    vehicle: VirtualVehicle,
    tmp_path: Path,
) -> None:
    from firmware_sim.bench_psu import BenchPsu

    psu = BenchPsu(link=tmp_path / "psu")
    psu.start()
    try:
        fake_openai.script(
            sse(P.openai_stream([], [
                ("call_1", "read_signals", {"signals": ["EngineSpeed"]}),
                ("call_2", "measure_voltage", {}),
                ("call_3", "obd_read", {"pids": ["0C"]}),
                ("call_4", "obd_clear_dtcs", {}),
            ])),
            sse(P.openai_stream(["All three answered."])),
        )  # fmt: skip
        r = chat(
            capsys,
            monkeypatch,
            *local(fake_openai, "--bus", f"virtual:{channel}", "--obd", f"virtual:{channel}"),
            "--spec", "bench_psu", "--port", str(tmp_path / "psu"),
            "--allow", "set_voltage",
            stdin="How is everything?\n",
        )  # fmt: skip
    finally:
        psu.stop()
    assert r.code == 0, r.err
    assert "obd_clear_dtcs" not in {
        t["function"]["name"] for t in fake_openai.requests[0]["tools"]
    }  # the one policy allows set_voltage, not clearing codes
    offered = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert {"read_signals", "measure_voltage", "set_voltage", "obd_read"} <= offered
    assert "✓ read_signals" in r.out and "✓ measure_voltage" in r.out and "✓ obd_read" in r.out
    assert "✗ obd_clear_dtcs SEND_NOT_ALLOWED" in r.out
    assert "may send set_voltage" in r.out


def test_an_allow_no_bridge_knows_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    alone = ("--bus", f"virtual:{channel}", "--allow", "ClimateComand")
    r = chat(capsys, monkeypatch, *local(fake_openai, *alone), stdin="")
    assert r.code == 2  # the CAN bridge alone: its own words, with the close names
    assert "--allow ClimateComand: no message named 'ClimateComand'; did you mean" in r.err
    both = (*alone, "--obd", f"virtual:{channel}")
    r = chat(capsys, monkeypatch, *local(fake_openai, *both), stdin="")
    assert r.code == 2
    assert "--allow ClimateComand: no CAN message, serial command or diagnostic service" in r.err
    services = ("--bus", f"virtual:{channel}", "--allow-service", "obd_clear_dtcs")
    r = chat(capsys, monkeypatch, *local(fake_openai, *services), stdin="")
    assert r.code == 2
    assert "--allow-service needs --obd" in r.err
