"""`hwbridge mcp` as a user types it: the printed client config works as printed, stdout
holds nothing but the protocol, bad options are one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from hwbridge.cli.main import build_parser
from hwbridge.cli.mcp_server import OFFLINE_TOOLS, is_serial_port
from hwbridge.mcp import HttpLimits
from tests.cli.conftest import DEMO, REPO, Run
from tests.mcp.conftest import Session


def test_the_printed_config_starts_a_working_server(run: Run, tmp_path: Path) -> None:
    printed = run("mcp", "--print-config", "--dbc", str(DEMO.relative_to(REPO)))
    assert printed.code == 0, printed.err
    config = json.loads(printed.out)  # stdout is the JSON block alone
    entry = config["mcpServers"]["hwbridge"]
    assert Path(entry["command"]).is_absolute()
    assert entry["args"] == ["mcp", "--dbc", str(DEMO)]  # the relative path made absolute
    assert "claude mcp add hwbridge -- " in printed.err

    # a client starts it from elsewhere with a bare environment, as Claude Desktop does
    params = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=tmp_path)
    session = Session(lambda: Client(params))
    try:
        names = {t.name for t in session.run(lambda c: c.list_tools()).tools}
        hidden = session.run(lambda c: c.call_tool("read_signals", {"signals": ["EngineSpeed"]}))
    finally:
        session.close()
    assert names == OFFLINE_TOOLS  # without --bus: the catalog and decoding only
    assert hidden.is_error


def test_http_config_names_the_token_variable_never_the_token(run: Run) -> None:
    printed = run(
        "mcp", "--print-config", "--http", "127.0.0.1:8123", "--token-env", "HWB_MCP_TOKEN"
    )
    assert printed.code == 0, printed.err
    entry = json.loads(printed.out)["mcpServers"]["hwbridge"]
    assert entry == {
        "type": "http",
        "url": "http://127.0.0.1:8123/mcp",
        "headers": {"Authorization": "Bearer ${HWB_MCP_TOKEN}"},
    }


def test_a_farm_s_config_names_its_benches_and_no_local_bus(run: Run) -> None:
    printed = run(
        "mcp", "--remote", "http://10.0.0.11:8000/mcp", "--remote", "hil2=http://10.0.0.12:8000/mcp",
        "--remote-read-only", "read_*", "--print-config",
    )  # fmt: skip
    assert printed.code == 0, printed.err
    args = json.loads(printed.out)["mcpServers"]["hwbridge"]["args"]
    assert args == [
        "mcp", "--remote", "http://10.0.0.11:8000/mcp", "--remote", "hil2=http://10.0.0.12:8000/mcp",
        "--remote-read-only", "read_*",
    ]  # fmt: skip
    assert "bundled demo vehicle" not in printed.err
    assert build_parser().parse_args(args).remote_read_only == ["read_*"]


def test_stdout_holds_only_the_protocol() -> None:
    """A client that connects and leaves at once: nothing but protocol on stdout, however
    chatty the start (the bundled-database notice goes to stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "hwbridge", "mcp"],
        check=False,
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "bundled demo vehicle" in done.stderr


def test_the_help_states_the_http_limits_the_server_applies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["mcp", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    limits = HttpLimits()
    assert f"(default {limits.read_timeout_s:g})" in text
    assert f"at most {limits.max_connections} connections" in text
    assert f"at most {limits.max_unproven_per_client} per client address" in text
    assert f"at most {limits.max_silent}; one is safe from newer ones for its first" in text
    assert f"{limits.silent_grace_s:g} s" in text


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--token-env", "X"], "--token-env applies to --http only"),
        (["--read-timeout", "5"], "--read-timeout applies to --http only"),
        (["--http", ":0", "--read-timeout", "0"], "--read-timeout: read_timeout_s must be above 0"),
        (["--http", "127.0.0.1:http"], "--http: '127.0.0.1:http' is not HOST:PORT"),
        (["--http", "127.0.0.1:70000"], "--http: port 70000 is outside 0-65535"),
        (["--http", ":8000", "--token-env", "HWB_UNSET_VARIABLE"], "HWB_UNSET_VARIABLE"),
        (["--print-config", "--http", ":0"], "needs a fixed port"),
        (["--print-config", "--allow", "Nope"], "--allow Nope: no message named 'Nope'"),
        (["--obd", "no bus here"], "--obd no bus here: invalid CAN bus"),
        (["--spec", "bench_psu"], "--spec needs --port PORT"),
        (
            ["--spec", "bench_psu", "--port", "loop://", "--allow", "set_volts"],
            "--allow set_volts: matches no command that changes state (these do: output, "
            "set_current_limit, set_voltage)",
        ),
    ],
)
def test_bad_options_are_one_line(run: Run, argv: list[str], words: str) -> None:
    result = run("mcp", *argv)
    assert result.code == 2
    assert result.out == ""
    assert words in result.err.splitlines()[-1]


def test_without_the_mcp_extra_it_says_which_to_install(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "hwbridge.mcp" or m.startswith("hwbridge.mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the SDK were not installed
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    result = run("mcp", "--print-config")
    assert result.code == 2
    assert result.err.strip() == (
        "hwbridge: hwbridge.mcp needs the MCP Python SDK: pip install 'mcs-hwbridge[mcp]'"
    )


def test_an_elm327_port_that_is_not_there_is_one_line(run: Run) -> None:
    result = run("mcp", "--obd", "/dev/hwbridge-no-such-port")
    assert result.code == 1 and result.out == ""
    assert result.err.startswith("hwbridge: --obd /dev/hwbridge-no-such-port: ")
    assert result.err.rstrip().endswith("(PORT_DOWN)")


@pytest.mark.parametrize(
    ("target", "port"),
    [
        ("/dev/ttyUSB0", True),
        ("COM3", True),
        ("socket://192.168.0.10:35000", True),
        ("rfc2217://host:4000", True),
        ("socketcand://127.0.0.1:29536/vcan0", False),
        ("slcan:///dev/ttyACM0@115200", False),
        ("socketcan:can0", False),
        ("virtual:garage", False),
    ],
)
def test_obd_targets_are_told_apart(target: str, port: bool) -> None:
    assert is_serial_port(target) is port


def test_the_obd_options_reach_the_printed_config(run: Run) -> None:
    printed = run(
        "mcp", "--print-config", "--obd", "socket://192.168.0.10:35000",
        "--allow-service", "obd_clear_dtcs",
    )  # fmt: skip
    assert printed.code == 0, printed.err
    args = json.loads(printed.out)["mcpServers"]["hwbridge"]["args"]
    # --obd alone serves the diagnostics alone: no CAN database in the command
    assert args == [
        "mcp", "--obd", "socket://192.168.0.10:35000", "--allow-service", "obd_clear_dtcs",
    ]  # fmt: skip


def test_the_serial_options_reach_the_printed_config(run: Run, tmp_path: Path) -> None:
    (tmp_path / "psu").touch()  # a device's stable name, relative to where the user is
    printed = run(
        "mcp", "--print-config", "--bus", "virtual:bench", "--spec", "bench_psu",
        "--port", str(tmp_path / "psu"), "--allow", "set_*", "ClimateCommand",
    )  # fmt: skip
    assert printed.code == 0, printed.err
    args = json.loads(printed.out)["mcpServers"]["hwbridge"]["args"]
    assert args == [
        "mcp", "--bus", "virtual:bench", "--spec", "bench_psu", "--port", str(tmp_path / "psu"),
        "--allow", "ClimateCommand", "set_*",
    ]  # fmt: skip
