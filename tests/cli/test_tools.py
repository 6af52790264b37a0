"""`hwbridge tools`: the table, the JSON document, catalog mode on a large real database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hwbridge.can import CanDriver
from hwbridge.core.prompts import estimate_tokens
from tests.cli.conftest import DEMO, REPO, Run

GENERIC = [
    "list_messages",
    "describe_message",
    "search_signals",
    "read_signals",
    "read_message",
    "wait_for_signal",
    "capture",
    "signal_timeseries",
    "plot_signals",
    "bus_status",
    "decode_frame",
]


def test_table_lists_tools_with_typed_parameters_and_prompt_size(run: Run) -> None:
    r = run("tools", "--dbc", str(DEMO))
    assert r.code == 0, r.err
    with CanDriver.from_dbc(DEMO) as driver:
        prompt = driver.get_driver_system_message()
        names = [t.name for t in driver.list_tools()]
    for name in names:
        assert name in r.out
    assert "read_EngineData" in names
    assert "signals: string[]" in r.out
    assert "timeout_ms?: integer 0..30000" in r.out
    assert "[rpm]" in r.out  # descriptions are text, not rich markup
    assert f"{estimate_tokens(prompt):,} tokens ({len(prompt):,} characters)" in r.out
    assert "Send policy: read-only" in r.out
    assert "\x1b[" not in r.out  # not a terminal: no escape codes


def test_json_is_the_only_output_and_matches_the_library(run: Run) -> None:
    r = run("tools", "--dbc", str(DEMO), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    with CanDriver.from_dbc(DEMO) as driver:
        prompt = driver.get_driver_system_message()
        tools = [t.model_dump(mode="json", exclude_none=True) for t in driver.list_tools()]
    assert doc["tools"] == tools
    assert doc["system_prompt_tokens"] == estimate_tokens(prompt)
    assert doc["system_prompt_chars"] == len(prompt)
    assert doc["pack"] == "json" and doc["policy"]["read_only"] is True
    assert doc["messages"] == 11


def test_allow_adds_send_tools_and_resolves_names(run: Run) -> None:
    r = run("tools", "--dbc", str(DEMO), "--json", "--allow", "climatecommand")
    doc = json.loads(r.out)
    names = {t["name"] for t in doc["tools"]}
    assert {"send_message", "send_ClimateCommand"} <= names
    assert doc["policy"]["allow_messages"] == ["ClimateCommand"]  # the exact name the policy needs


def test_large_real_database_in_catalog_mode(run: Run, ford: Path) -> None:
    r = run("tools", "--dbc", str(ford), "--exposure", "catalog", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [t["name"] for t in doc["tools"]] == GENERIC
    assert doc["messages"] > 300
    assert doc["system_prompt_tokens"] < 4000
    table = run("tools", "--dbc", str(ford), "--exposure", "catalog")
    assert "11 tools from" in table.out and "331 messages" in table.out


def test_model_picks_the_pack_variant(run: Run) -> None:
    doc = json.loads(run("tools", "--dbc", str(DEMO), "--json", "--model", "llama3.2:1b").out)
    assert doc["pack"] == "compact" and doc["model"] == "llama3.2:1b"


def test_python_dash_m_prints_pure_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "tools", "--dbc", str(DEMO), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"FORCE_COLOR": "1", "PATH": ""},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tools"][0]["name"] == "list_messages"


def test_repaired_database_warns_on_stderr_only(run: Run, tmp_path: Path) -> None:
    repaired = tmp_path / "repaired.dbc"  # two ids above 0x7FF without the flag
    repaired.write_text(
        'VERSION ""\nNS_ :\nBS_:\nBU_: ECU\n'
        'BO_ 256 Engine: 8 ECU\n SG_ Speed : 0|16@1+ (1,0) [0|100] "" ECU\n'
        'BO_ 2048 High: 8 ECU\n SG_ A : 0|8@1+ (1,0) [0|255] "" ECU\n'
        'BO_ 4660 Higher: 8 ECU\n SG_ B : 0|8@1+ (1,0) [0|255] "" ECU\n'
    )
    r = run("tools", "--dbc", str(repaired), "--json")
    assert r.code == 0
    assert json.loads(r.out)["messages"] == 3
    assert r.err == (
        f"hwbridge: warning: {repaired}: loaded after 2 repairs of defects cantools refuses "
        "(--debug lists them)\n"
    )


C1_KCD = """<?xml version="1.0" encoding="UTF-8"?>
<NetworkDefinition xmlns="http://kayak.2codeornot2code.org/1.0">
  <Document/>
  <Bus name="B">
    <Message id="0x100" name="EngineData" length="8">
      <Signal name="EngineSpeed" offset="0" length="16">
        <Value unit="rpm&#x9b;2K&#x9b;1A&#x9d;0;PWNED&#x9c;"/>
      </Signal>
    </Message>
  </Bus>
</NetworkDefinition>
"""


def test_json_output_never_carries_a_raw_terminal_control(run: Run, tmp_path: Path) -> None:
    """A database's text with C1 controls (CSI, OSC: some terminals act on them) is written
    as JSON escapes, the same JSON: JSON escapes only C0 itself."""
    kcd = tmp_path / "c1.kcd"
    kcd.write_text(C1_KCD)
    r = run("tools", "--json", "--dbc", str(kcd))
    assert r.code == 0, r.err
    assert not any(0x7F <= ord(c) <= 0x9F for c in r.out)
    assert "\\u009b" in r.out  # escaped where it stood
    said = json.dumps(json.loads(r.out), ensure_ascii=False)
    assert "rpm\x9b2K\x9b1A\x9d0;PWNED\x9c" in said  # the same JSON: nothing lost
