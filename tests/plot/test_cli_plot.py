"""`hwbridge plot` from a real capture (with its databases), from a dataset and from the
simulator, into PNG, SVG and HTML; the files are checked: size, dimensions, the signals named."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from firmware_sim import VirtualVehicle
from hwbridge.cli.main import main
from tests.captures.conftest import GPS_DBC, J1939_DBC, TRUCK
from tests.plot.conftest import png_size
from tests.shared_data import needs_shared

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.timeout(120)

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"


def plot(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plot", *args])
    out, err = capsys.readouterr()
    return code, out, err


@needs_shared
@pytest.mark.parametrize("fmt", ["png", "svg", "html"])
def test_a_real_capture_with_its_databases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    out = tmp_path / f"truck.{fmt}"
    code, said, err = plot(
        capsys, str(TRUCK), "--dbc", str(GPS_DBC), "--dbc", str(J1939_DBC),
        "--signal", "EngineSpeed", "--signal", "gnss_pos.Lat*", "--signal", "FixType",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert f"wrote {out}" in said
    assert "EEC1.EngineSpeed: 12,719 samples" in err
    data = out.read_bytes()
    assert 20_000 < len(data) < 2_000_000
    if fmt == "png":
        width, height = png_size(data)
        assert width == 1200 and 700 < height < 1200  # three panels
        return
    text = data.decode()
    for name in ("EEC1.EngineSpeed", "gnss_pos.Latitude", "gnss_status.FixType", "3D-fix"):
        assert name in text  # SVG text stays text, so the names are searchable
    assert "rpm" in text and "deg" in text
    if fmt == "html":
        assert text.startswith("<!DOCTYPE html>") and "<svg" in text
        assert "<script" not in text and "http://" not in text.split("<svg", 1)[0]
        assert re.search(r"<td>EEC1\.EngineSpeed</td><td>rpm</td><td>12,719</td>", text)
    else:
        assert text.lstrip().startswith("<?xml")


def test_a_dataset_downsampled_in_sql(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "drive.svg"
    code, _, err = plot(
        capsys, "--dataset", str(dataset), "--signal", "Drive.*", "--out", str(out),
        "--width", "800", "--title", "a test drive",
    )  # fmt: skip
    assert code == 0, err
    assert "Drive.Speed: 100,000 samples" in err and "drawn" in err
    text = out.read_text()
    assert "Drive.Speed (downsampled)" in text and "a test drive" in text
    for label in ("P", "R", "N", "D"):  # the labelled signal, its labels as tick names
        assert f">{label}<" in text or f"> {label}<" in text or f">{label} <" in text
    png = tmp_path / "window.png"
    code, _, err = plot(
        capsys, "--dataset", str(dataset), "--signal", "Speed", "--start", "10",
        "--end", "20", "--out", str(png),
    )  # fmt: skip
    assert code == 0, err
    assert "Drive.Speed: 10,001 samples" in err  # 10 s at 1 kHz, both ends included
    assert png_size(png.read_bytes())[0] == 1200


def test_usage_errors_exit_2(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "x.png")
    cases = [
        (["--dataset", str(dataset), "--signal", "Speed", "--out", str(tmp_path / "x.jpg")], ".png, .svg or .html"),
        (["--dataset", str(dataset), "--signal", "Nope", "--out", out], "no signal named 'Nope'"),
        (["--dataset", str(dataset), "--signal", "Zz*", "--out", out], "no signal matches"),
        (["--signal", "Speed", "--out", out], "give one source"),
        (["--bus", "virtual:x", "--signal", "Speed", "--out", out], "--duration"),
        (["--dataset", str(tmp_path / "none"), "--signal", "Speed", "--out", out], "--dataset"),
    ]  # fmt: skip
    for args, words in cases:
        code, _, err = plot(capsys, *args)
        assert code == 2, (args, err)
        assert words in err, (args, err)


def test_the_simulator_over_a_live_bus(
    channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sim.png"
    with VirtualVehicle(DEMO, channel=channel):
        code, _, err = plot(
            capsys, "--bus", f"virtual:{channel}", "--duration", "1.5",
            "--signal", "VehicleSpeed", "--signal", "EngineSpeed", "--signal", "GearLever",
            "--out", str(out),
        )  # fmt: skip
    assert code == 0, err
    assert "VehicleDynamics.VehicleSpeed:" in err and "TransmissionStatus.GearLever:" in err
    counts = [int(m.replace(",", "")) for m in re.findall(r": ([\d,]+) samples", err)]
    assert len(counts) == 3 and all(c > 5 for c in counts)  # 1.5 s of 10..100 Hz messages
    width, height = png_size(out.read_bytes())
    assert width == 1200 and height > 600  # three panels: rpm, km/h, the gear lever's labels


def test_ctrl_c_while_the_worker_reads_ends_the_command_at_once(
    dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The series are read in a thread while matplotlib loads; Ctrl-C then kills the query
    worker, so the command ends now rather than when the read would (120 s at most)."""
    import hwbridge.cli.plot as plot_command
    from hwbridge.captures.series import SeriesReader

    def endless(self: SeriesReader, *args: object, **kwargs: object) -> None:
        self.engine.run("SELECT max(a.range + b.range) FROM range(1000000) a, range(1000000) b")
        raise AssertionError("the endless query answered")

    def interrupted() -> None:
        time.sleep(0.5)  # the query is running
        raise KeyboardInterrupt

    monkeypatch.setattr(SeriesReader, "series", endless)
    monkeypatch.setattr(plot_command, "_warm_matplotlib", interrupted)
    started = time.monotonic()
    code, _, err = plot(
        capsys, "--dataset", str(dataset), "--signal", "Speed", "--out", str(tmp_path / "x.png")
    )
    assert code == 130 and "interrupted" in err
    assert time.monotonic() - started < 15
