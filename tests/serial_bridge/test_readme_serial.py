"""The README's serial sessions run as written against the simulator and print what the
README says they print."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.serial_bridge.conftest import ROOT

README = (ROOT / "README.md").read_text()
SECTION = README.split("## The serial bridge", 1)[1].split("\n## ", 1)[0]


def _block_after(marker: str) -> tuple[str, str | None]:
    """The first python block after `marker`, and the `prints` block after it if any."""
    text = SECTION.split(marker, 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None, marker
    rest = text[code.end() :]
    printed = re.match(r"\s*prints\n\n```\n(.*?)```", rest, re.S)
    return code.group(1), printed.group(1) if printed else None


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    ).stdout


def test_the_bench_supply_session() -> None:
    code, printed = _block_after("A bench-supply session")
    assert _run(code) == printed


def test_the_gnss_session() -> None:
    code, printed = _block_after("A GNSS session")
    assert _run(code) == printed


def test_the_slcan_example() -> None:
    code, _ = _block_after("### A CanDriver over an slcan adapter")
    assert _run(code) == "TransmissionStatus ok\n"
    assert "prints `TransmissionStatus ok`" in SECTION


def test_the_policy_example_names_only_real_fields() -> None:
    from hwbridge import SendPolicy

    code, _ = _block_after("One object governs a whole bench")
    call = re.search(r"SendPolicy\((.*?)\)\n", code, re.S)
    assert call is not None
    kwargs = call.group(1).replace('audit_log="bench.jsonl"', "audit_log=None")
    policy = eval(f"SendPolicy({kwargs})", {"SendPolicy": SendPolicy})
    assert policy.allows_command("output_on") and policy.allows_message("ClimateCommand")
