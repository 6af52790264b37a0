"""`hwbridge discover --html`: the evidence page, opened in headless Chromium; nothing from a
capture or a database can put markup or script into it."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import can
from hwbridge.cli.main import main
from hwbridge.discovery.report.html import render_html
from hwbridge.discovery.report.models import (
    DiscoveryReport,
    FieldReport,
    MessageReport,
    Note,
    ReferenceMatch,
)
from tests.discovery.test_discover import make_drive

HOSTILE = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
REFERENCE_DBC = f'''VERSION ""

NS_ :

BS_:

BU_: GNSS

BO_ 512 Gnss: 8 GNSS
 SG_ Speed : 0|16@1+ (0.01,0) [0|655.35] "{HOSTILE}" GNSS
'''


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    return found


def dom(page: Path) -> str:
    """The page as Chromium parsed and laid it out (its DOM after loading), offline."""
    done = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
         f"file://{page}"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def _capture(folder: Path, name: str) -> Path:
    """20 s at 50 Hz: 0x123 with a counter (byte 0) and a speed in 0.01 steps (bytes 1-2);
    0x200 the GNSS module's speed (the reference)."""
    path = folder / name
    with can.Logger(str(path)) as log:
        for i in range(1000):
            t = 1_700_000_000.0 + i * 0.02
            speed = 40.0 + 30.0 * math.sin(i / 120.0) + i * 0.01
            raw = round(speed * 100)
            log.on_message_received(
                can.Message(timestamp=t, arbitration_id=0x123, is_extended_id=False,
                            data=bytes([i % 16, raw & 0xFF, raw >> 8, 0, 0x5A, 0, 0, 0]))
            )  # fmt: skip
            gnss = round(speed * 100).to_bytes(2, "little") + bytes(6)
            log.on_message_received(
                can.Message(timestamp=t + 0.001, arbitration_id=0x200, is_extended_id=False,
                            data=gnss)
            )  # fmt: skip
    return path


def test_the_page_of_a_capture_opens_in_chromium_and_escapes_what_it_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = _capture(tmp_path, f"drive{HOSTILE.replace('/', '_')}.log")
    reference = tmp_path / "gnss.dbc"
    reference.write_text(REFERENCE_DBC)
    page = tmp_path / "report.html"
    code = main(["discover", str(capture), "--reference", str(reference), "--html", str(page)])
    assert code == 0, capsys.readouterr().err
    assert f"evidence written to {page}" in capsys.readouterr().out
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text.lower() and "&lt;script&gt;" in text  # name and unit escaped
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)  # nothing loaded
    assert "default-src 'none'" in text
    parsed = dom(page)
    assert "<script" not in parsed.lower()
    assert 'id="id-123-s"' in parsed and "0x123" in parsed
    assert "COUNTER_123_0" in parsed and "counter" in parsed
    # the speed field matched the reference, drawn over it
    assert "~ Gnss.Speed r=1.000" in parsed
    assert parsed.count("<polyline") == 2
    scale = re.search(r"r=1\.000, scale ([0-9.e-]+) \(least squares: [0-9.e-]+\), offset", parsed)
    assert scale is not None and float(scale.group(1)) == pytest.approx(0.01, rel=0.01)


def test_names_from_a_hostile_database_are_inert() -> None:
    """Names a KCD or ARXML file may hold freely (an XML attribute is any text)."""
    field = FieldReport(
        name=f"SIG_{HOSTILE}", start_bit=0, length=8, byte_order="little_endian",
        signed=False, kind="value", scale=2.0, unit=IMG,
        reference=ReferenceMatch(message=f"</code>{HOSTILE}", signal=IMG, r=0.99, r2=0.98, verdict="confirmed", fitted_scale=1.0),
    )  # fmt: skip
    report = DiscoveryReport(
        messages=[MessageReport(id=0x10, extended=False, dlc=8, frames=9, period_ms=10.0,
                                signals=[field])],
        captures=[f"{HOSTILE}.blf"], reference_messages=[HOSTILE],
        notes=[Note(message=HOSTILE, signal=IMG, text=f"</li>{HOSTILE}")],
        dropped={HOSTILE: 1},
    )  # fmt: skip
    page = render_html(report, title=f"t{HOSTILE}")
    lowered = page.lower()
    assert "<script" not in lowered and "<img" not in lowered
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in page
    assert "No evidence was collected" in page  # made without discover(evidence=True)


@pytest.mark.timeout(240)
def test_a_real_drive_page_draws_every_id_with_its_flip_rates(tmp_path: Path) -> None:
    _, capture, gnss = make_drive(tmp_path)  # needs ../shared
    page = tmp_path / "drive.html"
    assert main(["discover", str(capture), "--reference", str(gnss), "--html", str(page)]) == 0
    parsed = dom(page)
    assert parsed.count('class="message"') >= 10
    assert 'class="bits"' in parsed and "flipped in" in parsed
    assert "gnss_speed.Speed" in parsed and "<polyline" in parsed
    assert page.stat().st_size < 2_000_000
