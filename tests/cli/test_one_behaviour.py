"""One behaviour for every command (issue 21), each item through the real command line:
`python -m hwbridge ...` in a subprocess, on real files, the simulator, python-can's virtual
bus, socketcand over loopback and a loopback chat server."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

import can
from hwbridge.can.database.database import CanDatabase
from tests.cli.conftest import DEMO, ENGINE, REPO
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, json_answer, sse

pytestmark = pytest.mark.timeout(120)

COMMANDS = [
    "tools", "prompt", "inspect", "chat", "mcp", "drivers", "sim", "schema", "decode",
    "discover", "demo", "ports", "dump", "plot", "monitor", "record",
]  # fmt: skip
_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST", "OPENAI_BASE_URL", "COLUMNS")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    paths = [str(REPO / "src"), str(REPO / "firmware-sim"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["COLUMNS"] = "250"  # results in one piece, not wrapped into the panel's width
    return env


def hwbridge(
    *argv: str, stdin: str = "", cwd: Path = REPO, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hwbridge", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        timeout=timeout,
        check=False,
    )


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "using the bundled demo vehicle" not in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("hwbridge: ") and "Traceback" not in err and "[Errno" not in err
    return lines[0]


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A canutils log: 20 EngineData frames of the demo vehicle and 5 of an unknown id."""
    frame = CanDatabase.load(DEMO).encode("EngineData", ENGINE)
    path = tmp_path / "drive.log"
    with can.Logger(str(path)) as log:
        for i in range(20):
            log.on_message_received(
                can.Message(
                    timestamp=1_700_000_000 + i * 0.01,
                    arbitration_id=frame.arbitration_id,
                    data=frame.data,
                    is_extended_id=frame.is_extended,
                    channel="vcan0",
                )
            )
        for i in range(5):
            log.on_message_received(
                can.Message(
                    timestamp=1_700_000_000.5 + i * 0.01,
                    arbitration_id=0x7AB,
                    data=bytes(8),
                    is_extended_id=False,
                    channel="vcan0",
                )
            )
    return path


# -- exit codes -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_option_is_exit_2_for_every_command(command: str) -> None:
    proc = hwbridge(command, "--no-such-option")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr


def test_decode_with_a_database_that_does_not_exist_is_exit_2(
    capture: Path, tmp_path: Path
) -> None:
    proc = hwbridge("decode", str(capture), "--dbc", "missing.dbc", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (
        "hwbridge: missing.dbc: cannot read the file: No such file or directory"
    )
    assert not (tmp_path / "o").exists()


def test_a_capture_that_does_not_exist_is_exit_2_named_once(tmp_path: Path) -> None:
    decode = hwbridge("decode", "missing.mf4", "--dbc", str(DEMO), "--out", str(tmp_path / "o"))
    discover = hwbridge("discover", "missing.blf")
    assert (decode.returncode, discover.returncode) == (2, 2)
    assert one_line(decode.stderr) == "hwbridge: capture not found: missing.mf4"
    assert one_line(discover.stderr) == "hwbridge: capture not found: missing.blf"
    assert decode.stdout == discover.stdout == ""


def test_decode_captures_raises_for_a_capture_that_does_not_exist(tmp_path: Path) -> None:
    from hwbridge.captures.decode import decode_captures

    with pytest.raises(FileNotFoundError, match="capture not found"):
        decode_captures([tmp_path / "missing.mf4"], [DEMO], tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_dataset_or_spec_that_does_not_exist_is_exit_2() -> None:
    for argv in (
        ["inspect", "--dataset", "/nonexistent/dataset"],
        ["inspect", "--spec", "missing.toml", "--port", "loop://"],
        ["prompt", "--pack", "missing.toml"],
        ["tools", "--dbc", "missing.dbc"],
    ):
        proc = hwbridge(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        one_line(proc.stderr)


# -- datasets -------------------------------------------------------------------------------


@pytest.fixture
def dataset(capture: Path, tmp_path: Path) -> Path:
    root = tmp_path / "top" / "ds"
    proc = hwbridge("decode", str(capture), "--dbc", str(DEMO), "--out", str(root))
    assert proc.returncode == 0, proc.stderr
    return root


def test_a_dataset_root_is_opened(dataset: Path) -> None:
    proc = hwbridge("inspect", "--dataset", str(dataset), stdin="status\n")
    assert proc.returncode == 0, proc.stderr
    assert f"dataset {dataset} (1 tables, 1 sources)" in " ".join(proc.stdout.split())


def test_a_folder_above_a_dataset_is_refused_naming_the_root(dataset: Path) -> None:
    proc = hwbridge("inspect", "--dataset", str(dataset.parent), stdin="status\n")
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "is not a dataset root" in line and f"at {dataset};" in line


def test_a_folder_below_a_dataset_is_refused_naming_the_root(dataset: Path) -> None:
    for below in (dataset / "EngineData", dataset / "EngineData" / "source=drive.log"):
        proc = hwbridge("inspect", "--dataset", str(below), stdin="status\n")
        assert proc.returncode == 2, proc.stderr
        line = one_line(proc.stderr)
        assert "inside the table EngineData" in line and f"dataset at {dataset};" in line


def test_a_virtual_environment_is_no_dataset(tmp_path: Path, dataset: Path) -> None:
    """Parquet test data deep in site-packages is nobody's table (it failed with an
    ArrowTypeError once)."""
    venv = tmp_path / "venv"
    data = venv / "lib" / "python3.12" / "site-packages" / "pyarrow" / "tests" / "data"
    data.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for name in ("v0.7.1.parquet", "alltypes.parquet"):
        (data / name).write_bytes((next(dataset.rglob("*.parquet"))).read_bytes()[:100])
    proc = hwbridge("inspect", "--dataset", str(venv), stdin="status\n")
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "is not a dataset root: no table folder" in line and "Arrow" not in line


# -- inspect offline ------------------------------------------------------------------------


def test_inspect_browses_a_database_offline() -> None:
    frame = CanDatabase.load(DEMO).encode("EngineData", ENGINE)
    call = {"id": hex(frame.arbitration_id), "data": frame.data.hex()}
    proc = hwbridge(
        "inspect",
        "--dbc",
        str(DEMO),
        stdin=f"describe read_signals\ndecode_frame {json.dumps(call)}\n",
    )
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert f"{DEMO} (11 messages) offline" in out
    assert '"EngineSpeed"' in out and "1500" in out


# -- chat -----------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    httpd = HTTPServer(host="127.0.0.1", threaded=True)
    httpd.start()
    yield httpd
    httpd.clear()
    httpd.stop()


def chat(fake: FakeProvider, *more: str, stdin: str) -> subprocess.CompletedProcess[str]:
    provider = "openai-compatible" if fake.provider == "openai" else fake.provider
    return hwbridge(
        "chat", "--dbc", str(DEMO), "--provider", provider,
        "--base-url", fake.base_url, "--model", "local", *more, stdin=stdin,
    )  # fmt: skip


def test_chat_offline_without_a_bus(server: HTTPServer) -> None:
    fake = FakeProvider(server, "openai").script(
        sse(P.openai_stream([], [("c1", "list_messages", {"filter": "Engine"})])),
        sse(P.openai_stream(["EngineData is there."])),
    )
    proc = chat(fake, stdin="Which engine messages are there?\n")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "on no bus (offline: catalog and decoding)" in out
    assert "✓ list_messages" in out and "model: EngineData is there." in out
    tools = {t["function"]["name"] for t in fake.requests[0]["tools"]}
    assert "list_messages" in tools and "send_message" not in tools


WHOLE_ANSWERS = {
    "openai": json_answer(P.openai_completion("Whole, not streamed.", usage=(50, 4))),
    # Ollama's SDK reads a stream line by line: one object pretty-printed over many lines
    "ollama": json_answer(P.ollama_completion("Whole, not streamed.", usage=(50, 4)), indent=2),
}


@pytest.mark.parametrize("provider", WHOLE_ANSWERS)
def test_chat_reads_a_whole_json_answer_to_a_streamed_request(
    server: HTTPServer, provider: str
) -> None:
    fake = FakeProvider(server, provider).script(WHOLE_ANSWERS[provider])
    proc = chat(fake, stdin="hello\n")
    assert proc.returncode == 0, proc.stderr
    assert fake.requests[0]["stream"] is True
    assert "model: Whole, not streamed." in proc.stdout


def test_chat_no_stream_asks_for_whole_answers(server: HTTPServer) -> None:
    fake = FakeProvider(server, "openai").script(
        json_answer(P.openai_completion("Asked whole.", usage=(50, 4)))
    )
    proc = chat(fake, "--no-stream", stdin="hello\n")
    assert proc.returncode == 0, proc.stderr
    assert "stream" not in fake.requests[0]
    assert "model: Asked whole." in proc.stdout


def test_chat_help_and_behaviour_agree_about_no_bus() -> None:
    proc = hwbridge("chat", "--help")
    text = " ".join(proc.stdout.split())
    assert "--no-stream" in text and "--bitrate" in text
    assert "without it the driver is offline" in text and "the chat is offline" in text


def test_a_missing_api_key_names_the_variable_not_a_parameter() -> None:
    proc = hwbridge("chat", "--provider", "openai", "--model", "gpt-4o-mini", stdin="")
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "set OPENAI_API_KEY" in line and "api_key=" not in line


# -- the bus --------------------------------------------------------------------------------


def test_bitrate_gives_bus_status_a_bus_load() -> None:
    with_rate = hwbridge("inspect", "--bus", "virtual:hwb-bitrate", "--bitrate", "500k",
                         stdin="status\n")  # fmt: skip
    without = hwbridge("inspect", "--bus", "virtual:hwb-bitrate", stdin="status\n")
    assert with_rate.returncode == without.returncode == 0, with_rate.stderr
    assert '"bus_load_percent": 0.0' in with_rate.stdout
    assert '"bus_load_percent": null' in without.stdout
    assert "--bitrate on the command line" in without.stdout
    bad = hwbridge("inspect", "--bitrate", "fast")
    offline = hwbridge("inspect", "--bitrate", "500k")
    assert (bad.returncode, offline.returncode) == (2, 2)
    assert one_line(offline.stderr) == (
        "hwbridge: --bitrate needs --bus: there is no bus to measure the load of"
    )


@pytest.fixture
def socketcand_url(tmp_path: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwbridge", "sim"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "the simulator printed nothing"
        yield proc.stdout.readline().strip().removeprefix("socketcand: ")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)


def _tools(*argv: str) -> dict[str, Any]:
    proc = hwbridge("tools", "--dbc", str(DEMO), "--exposure", "messages", "--json", *argv)
    assert proc.returncode == 0, proc.stderr
    return {t["name"]: t for t in json.loads(proc.stdout)["tools"]}


def _tool_names(*argv: str) -> set[str]:
    return set(_tools(*argv))


def _message_choices(tool: dict[str, Any]) -> list[str]:
    (message,) = [p for p in tool["parameters"] if p["name"] == "message"]
    return list(message["schema"]["enum"])


def test_fd_tools_are_not_offered_over_socketcand(socketcand_url: str) -> None:
    assert socketcand_url.startswith("socketcand://127.0.0.1:")
    over_socketcand = _tool_names("--bus", socketcand_url)
    virtual = _tool_names("--bus", "virtual:hwb-fd")
    assert "read_AdasObjects" in virtual  # 64 bytes, CAN FD
    assert "read_AdasObjects" not in over_socketcand
    assert virtual - over_socketcand == {"read_AdasObjects"}
    call = json.dumps({"message": "AdasObjects", "timeout_ms": 100})
    proc = hwbridge("inspect", "--bus", socketcand_url, stdin=f"read_message {call}\n")
    assert "read_message failed (UNSUPPORTED)" in " ".join(proc.stdout.split())


def test_fd_messages_are_no_send_choice_over_socketcand(socketcand_url: str) -> None:
    """send_message, start_periodic and stop_periodic offer no CAN FD message where sending
    one could only fail (UNSUPPORTED), nor is there a send_AdasObjects; reading is as before."""
    allow = ("--allow", "ClimateCommand", "AdasObjects")
    over_socketcand = _tools("--bus", socketcand_url, *allow)
    virtual = _tools("--bus", "virtual:hwb-fd-send", *allow)
    for name in ("send_message", "start_periodic", "stop_periodic"):
        assert _message_choices(virtual[name]) == ["AdasObjects", "ClimateCommand"]
        assert _message_choices(over_socketcand[name]) == ["ClimateCommand"]
    assert "send_AdasObjects" in virtual and "send_AdasObjects" not in over_socketcand
    assert "send_ClimateCommand" in over_socketcand
    assert over_socketcand["read_message"] == virtual["read_message"]
    assert over_socketcand["decode_frame"] == virtual["decode_frame"]
    only_fd = _tools("--bus", socketcand_url, "--allow", "AdasObjects")
    assert not {"send_message", "start_periodic", "send_AdasObjects"} & set(only_fd)
    # a model that names it anyway is told the choices, and nothing is sent
    call = json.dumps({"message": "AdasObjects"})
    proc = hwbridge("inspect", "--bus", socketcand_url, *allow,
                    stdin=f"send_message {call}\n")  # fmt: skip
    assert "parameter 'message' must be one of: ClimateCommand, got \"AdasObjects\"" in " ".join(
        proc.stdout.split()
    )


# -- smaller --------------------------------------------------------------------------------


def test_the_decode_summary_counts_unknown_frames(capture: Path, tmp_path: Path) -> None:
    proc = hwbridge("decode", str(capture), "--dbc", str(DEMO), "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "frames read 25, decoded 20, unknown frames 5 (from 1 id)" in out
    assert "unknown ids 5" not in out


def test_sim_help_names_hwbridge_sim() -> None:
    proc = hwbridge("sim", "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: hwbridge sim ")
    assert "python -m firmware_sim" not in proc.stdout


def test_ports_lists_no_serial_port_as_a_can_channel() -> None:
    proc = hwbridge("ports", "--json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    ports = {p["port"] for p in found["serial"]}
    assert not [c for c in found["can"] if c.get("channel") in ports]
    assert not [c for c in found["can"] if str(c.get("channel")).startswith("/dev/tty")]


def test_mf4_is_read_with_asammdf_imported_on_demand(tmp_path: Path) -> None:
    """The hwbridge process defers asammdf until an MF4 file is read: decoding and replaying
    one still work."""
    frame = CanDatabase.load(DEMO).encode("EngineData", ENGINE)
    path = tmp_path / "drive.mf4"
    with can.Logger(str(path)) as log:
        for i in range(10):
            log.on_message_received(
                can.Message(
                    timestamp=1_700_000_000 + i * 0.01,
                    arbitration_id=frame.arbitration_id,
                    data=frame.data,
                    is_extended_id=frame.is_extended,
                    channel=0,
                )
            )
    decode = hwbridge("decode", str(path), "--dbc", str(DEMO), "--out", str(tmp_path / "o"))
    assert decode.returncode == 0, decode.stderr
    assert "frames read 10, decoded 10" in " ".join(decode.stdout.split())
    replay = hwbridge("inspect", "--dbc", str(DEMO), "--bus", f"replay:{path}", stdin="status\n")
    assert replay.returncode == 0, replay.stderr
    assert "replay" in replay.stdout and "needs asammdf" not in replay.stdout + replay.stderr
    assert '"position_s"' in replay.stdout  # the replay status: the capture opened
