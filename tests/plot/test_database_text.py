"""Text from a database (units, value labels, signal names) is drawn as the text it is: a DBC
is data, and matplotlib would read `$...$` in it as TeX math (a unit of nested `\\sqrt` made
`plot_signals` fail with a RecursionError; a label `$5 off$` came out as italic math)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hwbridge.cli.main import main
from hwbridge.plot import Series, render

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.timeout(120)

NESTED = "$" + "\\sqrt{" * 300 + "x" + "}" * 300 + "$"


def _drawn_text(svg: bytes) -> str:
    """The text an SVG shows: its <text> elements, without the comments matplotlib adds."""
    body = re.sub(r"<!--.*?-->", "", svg.decode(), flags=re.DOTALL)
    return " ".join(re.findall(r"<text[^>]*>(.*?)</text>", body, flags=re.DOTALL))


def test_a_unit_that_is_tex_is_drawn_not_parsed() -> None:
    speed = Series("Speed", NESTED, [0.0, 1.0, 2.0], [1.0, 2.0, 1.0], 3)
    svg = render([speed], "svg")
    assert "\\sqrt{\\sqrt{" in svg.decode()  # the unit as written, on the axis


def test_labels_names_and_titles_keep_their_dollars() -> None:
    mode = Series(
        "Mode$x$", "$km/h$", [0.0, 1.0, 2.0], [0.0, 1.0, 0.0], 3,
        labels={0.0: "$5 off$", 1.0: "on_x^2"},
    )  # fmt: skip
    shown = _drawn_text(render([mode], "svg", title="$a$ b"))
    for text in ("$5 off$", "on_x^2", "Mode$x$", "$a$ b"):
        assert text in shown, text


def test_hwbridge_plot_draws_a_database_whose_unit_is_tex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import can

    dbc = tmp_path / "tex.dbc"
    dbc.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n\n'
        "BO_ 256 Msg: 8 ECU\n"
        f' SG_ Level : 0|8@1+ (1,0) [0|255] "{NESTED}" ECU\n'
        ' SG_ State : 8|2@1+ (1,0) [0|3] "" ECU\n\n'
        'VAL_ 256 State 0 "$5 off$" 1 "on" ;\n'
    )
    log = tmp_path / "drive.log"
    with can.Logger(str(log)) as writer:
        for i in range(50):
            data = bytes([i % 256, i % 2, 0, 0, 0, 0, 0, 0])
            writer(can.Message(timestamp=1.7e9 + i * 0.01, arbitration_id=256, data=data,
                               is_extended_id=False))  # fmt: skip
    out = tmp_path / "tex.svg"
    code = main(["plot", str(log), "--dbc", str(dbc), "--signal", "Msg.*", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "$5 off$" in _drawn_text(out.read_bytes())


def test_a_capture_spanning_centuries_is_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Times far apart but within the frame checks' bound (|t| < 9e9 s): the buckets of the
    series query multiply microseconds, which overflowed 64 bits (DuckDB: "Overflow in
    multiplication of INT64") and `hwbridge plot` failed."""
    dbc = tmp_path / "one.dbc"
    dbc.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n\n'
        'BO_ 256 Msg: 8 ECU\n SG_ Level : 0|8@1+ (1,0) [0|255] "%" ECU\n'
    )
    log = tmp_path / "far.log"
    log.write_text(
        "(-8900000000.000000) can0 100#0100000000000000\n"
        "(1700000000.000000) can0 100#0200000000000000\n"
        "(1700000001.000000) can0 100#0300000000000000\n"
    )
    out = tmp_path / "far.svg"
    code = main(["plot", str(log), "--dbc", str(dbc), "--signal", "Msg.Level", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "Msg.Level: 3 samples" in err


def test_a_long_label_is_cut_with_an_ellipsis_and_the_legend_leaves_the_lines_alone() -> None:
    from hwbridge.plot.render import MAX_LABEL_CHARS, figure

    long = "Transmission in limp-home mode after a fault"
    mode = Series("Mode", None, [0.0, 1.0, 2.0], [0.0, 1.0, 0.0], 3, labels={0.0: "Off", 1.0: long})
    shown = _drawn_text(render([mode], "svg"))
    assert long[: MAX_LABEL_CHARS - 1] + "\u2026" in shown and long not in shown
    speed = Series("VehicleSpeed", "km/h", [0.0, 1.0, 2.0], [0.0, 50.0, 100.0], 3)
    fig = figure([speed], 1200, None)
    fig.canvas.draw()
    [ax] = fig.axes
    shown_legend = ax.get_legend()
    assert shown_legend is not None
    legend = shown_legend.get_window_extent()
    plotted = ax.get_window_extent()
    assert legend.x0 >= plotted.x1  # beside the panel: the line's end at the top right is seen
