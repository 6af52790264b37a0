"""`python -m firmware_sim --psu --gnss` as a user runs it: two pty lines, then the devices
answer a SerialDriver; SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

from hwbridge import SerialDriver
from tests.serial_bridge.conftest import GNSS_SPEC, PSU_SPEC, ROOT

LINE = re.compile(r"^(psu|gnss): (/dev/pts/\d+)$")


def test_the_bench_devices_alone() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", "--psu", "--gnss", "--gnss-rate", "10"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().strip() for _ in range(2)]
        found = {m.group(1): m.group(2) for m in map(LINE.match, lines) if m}
        assert list(found) == ["psu", "gnss"], lines
        with SerialDriver.from_spec(PSU_SPEC, port=found["psu"]) as psu:
            r = psu.process_llm_response('{"tool": "identify", "arguments": {}}')
            assert r.tool_call_result["values"]["model"]["value"] == "PSU-3005"
        with SerialDriver.from_spec(GNSS_SPEC, port=found["gnss"]) as gnss:
            r = gnss.process_llm_response(json.dumps({"tool": "satellites", "arguments": {}}))
            assert r.tool_call_result["values"]["in_use"]["value"] == 9
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
    assert process.returncode == 0
    assert err == ""  # no vehicle, so no "using the bundled demo vehicle" line
