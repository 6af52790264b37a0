"""`hwbridge demo`: the recorded session is valid, checks its own outcomes, opens the inspector.

The whole session runs end to end in tests/test_readme.py (it takes about 12 s: the vehicle
has to reach 20 km/h); these tests stay fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwbridge.can import CanDriver
from hwbridge.cli.demo_play import Step, load_session, simulator
from hwbridge.cli.errors import EXIT_RUNTIME, CliError
from hwbridge.core.models import DriverResponse
from hwbridge.resources import bundled_dbc
from tests.cli.conftest import Run


def test_every_recorded_call_names_a_tool_of_its_act() -> None:
    """A typo in demo_session.toml shows here, not 12 s into a demo."""
    session = load_session()
    assert session.allowed == ["ClimateCommand"]
    for act in session.acts:
        with CanDriver.from_dbc(bundled_dbc(), policy=act.policy.build()) as driver:
            tools = {t.name for t in driver.list_tools()} | set(driver.refused_tools())
        for step in act.steps:
            assert step.answer is not None or step.tool in tools, step.label
            detected = driver.detect_tool_call(step.output("call_1"))
            assert [c.tool for c in detected] == ([] if step.answer else [step.tool])


def test_openai_steps_are_native_tool_calls() -> None:
    step = Step(label="x", tool="bus_status", dialect="openai")
    message = step.output("call_9")
    assert isinstance(message, dict)
    call = message["tool_calls"][0]
    assert call["id"] == "call_9" and call["function"]["name"] == "bus_status"
    assert json.loads(call["function"]["arguments"]) == {}


@pytest.mark.parametrize(
    ("step", "response", "surprise"),
    [
        (Step(label="read", tool="read_signals"), DriverResponse(call_executed=True), None),
        (
            Step(label="read", tool="read_signals"),
            DriverResponse(call_failed=True, call_detail="BUS_DOWN: no frames"),
            "'read' failed (BUS_DOWN: no frames)",
        ),
        (
            Step(label="send", tool="send_message", refused="SEND_NOT_ALLOWED"),
            DriverResponse(call_failed=True, call_detail="SEND_NOT_ALLOWED: read-only"),
            None,
        ),
        (
            Step(label="send", tool="send_message", refused="SEND_NOT_ALLOWED"),
            DriverResponse(call_executed=True),
            "'send' executed",
        ),
        (
            Step(label="send", tool="send_message", refused="OUT_OF_RANGE"),
            DriverResponse(call_failed=True, call_detail="SEND_NOT_ALLOWED: read-only"),
            "'send' failed (SEND_NOT_ALLOWED: read-only)",
        ),
        (Step(label="end", answer="Done."), DriverResponse(), None),
        (Step(label="end", answer="Done."), DriverResponse(call_executed=True), "'end' executed"),
    ],
)
def test_a_step_that_does_not_go_as_recorded_is_reported(
    step: Step, response: DriverResponse, surprise: str | None
) -> None:
    assert step.surprise(response) == surprise


def test_a_step_is_a_call_or_an_answer() -> None:
    with pytest.raises(ValueError, match="either tool"):
        Step(label="both", tool="bus_status", answer="hi")
    with pytest.raises(ValueError, match="either tool"):
        Step(label="neither")


def test_inspect_option_opens_the_inspector_on_the_simulator(run: Run) -> None:
    r = run(
        "demo",
        "--inspect",
        stdin='read_signals {"signals": ["EngineSpeed"]}\nstatus\nbus_status\n',
    )
    assert r.code == 0, r.err
    assert "may send ClimateCommand" in r.out
    assert '"unit": "rpm"' in r.out and "socketcand" in r.out
    # the session's nominal bitrate goes along: the demo has no --bitrate to give
    assert '"bus_load_percent": null' not in r.out and "--bitrate on the" not in r.out
    assert '"bus_load_percent": ' in r.out


def test_a_simulator_that_cannot_start_is_one_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.dbc"
    broken.write_text("BO_ this is not a database\n")
    wanted = r"the simulator did not start \(exit status 2\)"
    with pytest.raises(CliError, match=wanted) as caught, simulator(broken):
        pass
    assert caught.value.exit_code == EXIT_RUNTIME
