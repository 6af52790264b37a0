"""Every example of the README and of docs/ runs as written and prints what its page says.

One test per page runs its blocks in page order (see tests/docs_pages.py for the rules); the
checks below add what a `prints` block cannot say (values that vary, output described in a
sentence), by page and heading. Every `hwbridge` command line shown anywhere must parse.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from hwbridge.cli.main import build_parser
from tests.docs_pages import (
    Block,
    blocks,
    command_lines,
    hwbridge_words,
    pages,
    repository_folder,
    run_command,
    run_python,
    section,
)
from tests.shared_data import SHARED, SHARED_REASON

Check = Callable[[str, Path], None]


def _first_can_read(out: str, folder: Path) -> None:
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert re.fullmatch(r"EngineSpeed \d+\.\d+ rpm", lines[0]), out
    assert float(lines[0].split()[1]) == pytest.approx(800, abs=50)  # idle, jittering
    assert lines[1] == "GearLever 0 P"


def _discover_front_page(out: str, folder: Path) -> None:
    import cantools

    assert "0x100  11-bit  8 bytes" in out and "counter" in out and "checksum" in out
    draft = cantools.database.load_file(str(folder / "draft.dbc"), strict=True)
    assert isinstance(draft, cantools.database.can.Database)
    assert len(draft.messages) >= 10


def _can_page_read(out: str, folder: Path) -> None:
    first, second = out.splitlines()
    assert re.fullmatch(r"22 tools, a prompt of \d+ tokens", first), first
    assert "'EngineSpeed': {'value': " in second and "'unit': 'rpm'" in second
    assert "not_received" not in second  # the simulator really sends


def _replay(out: str, folder: Path) -> None:
    assert "3D-fix" in out and "41.41" in out


def _driver_in_20_lines(out: str, folder: Path) -> None:
    block = next(b for b in blocks("docs/core.md", "python") if b.heading == "A driver in 20 lines")
    assert len(block.code.strip().splitlines()) <= 24


def _async(out: str, folder: Path) -> None:
    assert re.fullmatch(r"4 reads of 0\.5 s each took 0\.[5-9] s: \['NOT_RECEIVED'\]\n", out), out
    text = section("docs/core.md", "Async drivers")
    assert "prints `4 reads of 0.5 s each took 0.5 s: ['NOT_RECEIVED']`" in text


def _trust(out: str, folder: Path) -> None:
    lines = out.splitlines()
    assert "'can', 'captures', 'j1939', 'obd'" in lines[0]
    assert lines[1] == "intact 64"
    text = section("docs/trust.md", "Checking what is installed")
    assert "prints `['can', 'captures', 'j1939', 'obd']`" in text and "`intact 64`" in text


def _slcan(out: str, folder: Path) -> None:
    assert out == "TransmissionStatus ok\n"
    assert "prints `TransmissionStatus ok`" in section(
        "docs/serial.md", "A CanDriver over an slcan adapter"
    )


def _diagnostics(out: str, folder: Path) -> None:
    over_can, over_elm = out.split("ELM327\n")
    assert over_can.startswith("ISO 15765-4 (can-isotp)\n")
    over_can = over_can.split("\n", 1)[1]
    assert over_can == over_elm  # the same answers over both adapters
    assert "  MIL on: True | codes: 1\n" in over_can
    assert "  P0217 Engine coolant over temperature condition (engine)\n" in over_can
    assert "  freeze frame of P0217: coolant 12" in over_can
    assert "  clear: SEND_NOT_ALLOWED: Clearing trouble codes" in over_can


def _discovery_page_names(out: str, folder: Path) -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "discovery.md").read_text()
    for name in ("survey_bus(duration_ms)", "snapshot_bus(name, duration_ms)",
                 "diff_snapshots(a, b)", "correlate_signal(signal, duration_ms)",
                 "define_signal(name, id, start_bit, length, byte_order, signed, scale, offset, unit)",
                 "draft_dbc()", "examples/discover_demo.py", "--gnss-can"):  # fmt: skip
        assert name in text, name


# (page, heading): what the output of the runnable blocks under that heading must show
CHECKS: dict[tuple[str, str], Check] = {
    ("README.md", "Read live signals with your DBC"): _first_can_read,
    ("README.md", "Find signals without a DBC"): _discover_front_page,
    ("docs/getting-started.md", "Your DBC on the simulated vehicle"): _first_can_read,
    ("docs/can.md", "Read live signals"): _can_page_read,
    ("docs/can.md", "Replaying a capture as a live bus"): _replay,
    ("docs/core.md", "A driver in 20 lines"): _driver_in_20_lines,
    ("docs/core.md", "Async drivers"): _async,
    ("docs/trust.md", "Checking what is installed"): _trust,
    ("docs/serial.md", "A CanDriver over an slcan adapter"): _slcan,
    ("docs/obd.md", "Vehicle diagnostics: OBD-II and UDS (`hwbridge.obd`)"): _diagnostics,
    ("docs/discovery.md", "In Python"): _discovery_page_names,
}


def _runnable(block: Block) -> bool:
    if block.language == "python":
        return block.mark != "skip"
    return block.language == "bash" and block.mark == "run"


@pytest.mark.slow
@pytest.mark.parametrize("page", pages())
def test_every_example_of_the_page_runs_as_written(page: str, tmp_path: Path) -> None:
    for block in blocks(page, "python"):
        if block.mark == "skip":
            assert block.reason, f"{block.name}: say why it is not run"
            compile(block.code, block.name, "exec")
    runnable = [b for b in blocks(page) if _runnable(b)]
    if not runnable:
        return
    folder = repository_folder(tmp_path)
    left_out = []
    for block in runnable:
        if block.needs_shared and not (SHARED / "data").is_dir():
            left_out.append(block.name)
            continue
        if block.language == "python":
            out = run_python(block.code, cwd=folder)
        else:
            out = "".join(run_command(line, folder) for line in command_lines(block.code))
        if block.printed is not None:
            assert out == block.printed, f"{block.name} printed\n{out}"
        check = CHECKS.get((page, block.heading))
        if check is not None:
            check(out, folder)
    if left_out:
        pytest.skip(f"{SHARED_REASON}: {', '.join(left_out)} not run")


def test_every_check_has_its_example() -> None:
    """A check whose example moved or lost its heading would otherwise never run again."""
    for page, heading in CHECKS:
        assert any(_runnable(b) and b.heading == heading for b in blocks(page)), (page, heading)


def test_every_hwbridge_command_shown_parses() -> None:
    """`hwbridge sim` hands its arguments to the simulator's parser, as the command does."""
    from firmware_sim.cli import build_parser as simulator_parser

    parser = build_parser()
    shown = 0
    for page in pages():
        for block in blocks(page, "bash"):
            for words in hwbridge_words(block.code):
                shown += 1
                try:
                    if words and words[0] == "sim":
                        simulator_parser().parse_args(words[1:])
                    else:
                        parser.parse_args(words)
                except SystemExit:
                    pytest.fail(f"{block.name}: hwbridge {' '.join(words)} does not parse")
    assert shown > 20
