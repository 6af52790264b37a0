"""`--security-key MODULE:FUNCTION` on `inspect`, `mcp` and `chat`: the user's key function
unlocks the simulated engine ECU; a bad one is one clear usage line before anything opens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwbridge.cli.main import build_parser
from tests.cli.conftest import DEMO, Run

KEY_FILE = """
from firmware_sim import demo_security_key

def key(seed: bytes, level: int, ecu: str) -> bytes:
    return demo_security_key(seed, level)
"""


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "workshop_key.py"
    path.write_text(KEY_FILE)
    return path


def test_inspect_unlocks_with_the_users_key_function(
    run: Run, channel: str, key_file: Path
) -> None:
    from firmware_sim import VirtualVehicle

    calls = "\n".join([
        'call uds_session {"ecu": "engine", "session": "extended"}',
        'call uds_unlock {"ecu": "engine", "level": 1}',
        'call uds_write_did {"ecu": "engine", "did": "0101", "value": "0384"}',
        'call uds_read_did {"ecu": "engine", "did": "0101"}',
    ]) + "\n"  # fmt: skip
    with VirtualVehicle(DEMO, channel=channel, drive=False):
        r = run("inspect", "--obd", f"virtual:{channel}", "--security-key", f"{key_file}:key",
                "--allow-service", "uds_0x10", "uds_0x27", "uds_0x2E", stdin=calls)  # fmt: skip
    assert r.code == 0, r.err
    unlock = r.out.split("hwbridge> call uds_unlock", 1)[1].split("hwbridge>", 1)[0]
    assert '"unlocked": true' in unlock and "unlocked (level 1)" in unlock
    read = r.out.split("hwbridge> call uds_read_did", 1)[1]
    assert '"raw": "03 84"' in read  # 900 rpm written


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("no_such_module_38:key", "cannot be loaded"),
        ("hwbridge:no_such_function", "has no function no_such_function"),
        ("justaname", "give MODULE:FUNCTION"),
        ("missing_file.py:key", "no such Python file"),
    ],
)
def test_a_bad_security_key_is_a_usage_error(run: Run, value: str, says: str) -> None:
    r = run("inspect", "--obd", "virtual:nothing-here", "--security-key", value)
    assert r.code == 2 and says in r.err
    assert r.err.count("\n") == 1


def test_security_key_needs_obd(run: Run, key_file: Path) -> None:
    r = run("mcp", "--print-config", "--bus", "virtual:x", "--security-key", f"{key_file}:key")
    assert r.code == 2 and "--security-key needs --obd" in r.err


def test_the_security_key_reaches_the_printed_config(
    run: Run, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(key_file.parent)
    r = run("mcp", "--print-config", "--obd", "virtual:garage", "--allow-service", "uds_0x27",
            "--security-key", "workshop_key.py:key")  # fmt: skip
    assert r.code == 0, r.err
    args = json.loads(r.out)["mcpServers"]["hwbridge"]["args"]
    assert args[-2:] == ["--security-key", f"{key_file}:key"]  # made absolute for the client


def test_chat_mcp_and_inspect_take_the_option() -> None:
    parser = build_parser()
    for command in (["chat", "--provider", "ollama"], ["mcp"], ["inspect"]):
        args = parser.parse_args([*command, "--obd", "virtual:x", "--security-key", "m:f"])
        assert args.security_key == "m:f"
