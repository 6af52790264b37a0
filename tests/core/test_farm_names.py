"""An Orchestrator over benches: `label.name` tools that every provider can call (under a
dot-free alias), reads of different drivers side by side, and tools that come and go."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbridge import (
    ConsentGate,
    DriverMeta,
    HybridDriver,
    Orchestrator,
    Tool,
    ToolError,
    ToolParameter,
)
from hwbridge.core.aio import CallJob
from hwbridge.core.models import is_tool_name, is_valid_tool_name
from hwbridge.core.native import Provider, native_aliases
from tests.conftest import BUSY_MARGIN_S
from tests.core.drivers import Thermostat

SECONDS = ToolParameter(name="seconds", required=True, schema={"type": "number", "minimum": 0})


class Bench(HybridDriver):
    """A bench whose reads take as long as asked and whose one send is recorded in order."""

    meta = DriverMeta(id="2d6b0e4f-1a7c-4f3e-8b95-0c4e7a1d9f26", name="Bench", version="1.0.0")

    def __init__(self, journal: list[str] | None = None, extra: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.journal = journal if journal is not None else []
        self.extra = extra

    def list_tools(self) -> list[Tool]:
        return [
            Tool(name="read", description="Wait, then read.", parameters=[SECONDS], read_only=True),
            Tool(name="press", description="Press the button.", parameters=[SECONDS]),
            *(Tool(name=n, description=f"The tool {n}.", read_only=True) for n in self.extra),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        time.sleep(arguments.get("seconds", 0))
        self.journal.append(f"{id(self)}:{tool_name}")
        return {"tool": tool_name}

    def grow(self, name: str) -> None:
        """A new tool appears (as on a remote server that reports its list changed)."""
        self.extra = (*self.extra, name)
        self.tools_changed()


def farm(*benches: HybridDriver, **options: Any) -> Orchestrator:
    return Orchestrator(
        {f"bench{i}": b for i, b in enumerate(benches, start=1)}, names="dotted", **options
    )


def openai_calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def test_every_tool_is_offered_under_its_bench_label() -> None:
    one, two = Thermostat(), Thermostat()
    orchestrator = farm(one, two)
    names = [t.name for t in orchestrator.list_tools()]
    assert names[:2] == ["bench1.get_temperature", "bench1.set_temperature"]
    assert "bench2.get_temperature" in names and "get_temperature" not in names
    response = orchestrator.process_llm_response(
        json.dumps({"tool": "bench2.get_temperature", "arguments": {"room": "kitchen"}})
    )
    assert response.call_executed and one.executed == []
    assert two.executed == [("get_temperature", {"room": "kitchen"})]


def test_native_definitions_carry_a_dot_free_alias_and_a_call_by_it_runs_the_tool() -> None:
    one, two = Thermostat(), Thermostat()
    orchestrator = farm(one, two)
    providers: tuple[Provider, ...] = ("openai", "anthropic", "openai_responses")
    for provider in providers:
        tools = orchestrator.get_native_tools(provider)
        names = [t["function"]["name"] if "function" in t else t["name"] for t in tools]
        assert all(is_valid_tool_name(n) for n in names)
        assert "bench2__get_temperature" in names
    response = orchestrator.process_llm_response(
        openai_calls(("bench2__get_temperature", {"room": "kitchen"}))
    )
    assert response.call_executed and not response.call_failed
    assert two.executed == [("get_temperature", {"room": "kitchen"})]
    # the echo names the tool as the model did: a provider checks the history it is sent
    echo = response.messages[0]["tool_calls"][0]["function"]["name"]  # type: ignore[index]
    assert echo == "bench2__get_temperature"
    anthropic = orchestrator.process_llm_response(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "bench1__set_temperature",
                    "input": {"room": "kitchen", "celsius": 20},
                }
            ],
        }
    )
    assert anthropic.call_executed
    assert one.executed == [("set_temperature", {"room": "kitchen", "celsius": 20})]


def test_a_dotted_name_is_found_in_prose_and_in_a_broken_call() -> None:
    bench = Thermostat()
    orchestrator = farm(bench)
    prose = 'Let me check. {"tool": "bench1.get_temperature", "arguments": {"room": "kitchen"}}.'
    assert orchestrator.process_llm_response(prose).call_executed
    # healed: the name is read whole, dots and all, where the JSON is broken or in a tag
    broken = '{"tool": "bench1.get_temperature", "arguments": {"room": "kitchen"'
    assert orchestrator.process_llm_response(broken).call_executed
    tagged = '<tool_call>bench1.get_temperature {"room": "kitchen"}</tool_call>'
    assert orchestrator.process_llm_response(tagged).call_executed
    assert len(bench.executed) == 3
    said = orchestrator.process_llm_response("I will call bench1.get_temperature next.")
    assert said.is_final_answer


def test_the_conflict_policies_still_hold_without_labels() -> None:
    plain = Orchestrator({"a": Thermostat(), "b": Thermostat()})
    assert "b__get_temperature" in [t.name for t in plain.list_tools()]
    with pytest.raises(ValueError, match="conflict='reject'"):
        Orchestrator({"a": Thermostat(), "b": Thermostat()}, conflict="reject")
    with pytest.raises(ValueError, match="names must be"):
        Orchestrator(names="flat")  # type: ignore[arg-type]


def test_a_label_too_long_for_a_name_is_refused_with_the_reason() -> None:
    class Long(Bench):
        def list_tools(self) -> list[Tool]:
            return [Tool(name="r" * 60, description="A long name.", read_only=True)]

    with pytest.raises(ValueError, match="use a shorter label"):
        Orchestrator({"bench_number_1": Long()}, names="dotted")


def test_a_server_s_tool_too_long_for_its_label_is_left_out_not_refused() -> None:
    """A driver whose tool names a server chose (it lists what it skips, as McpToolDriver
    does) never stops a farm: the tool is left out, the others are offered."""

    class Remote(Bench):
        def list_tools(self) -> list[Tool]:
            return [*super().list_tools(), Tool(name="r" * 60, description="A long name.")]

        def skipped_tools(self) -> dict[str, str]:
            return {}

    orchestrator = Orchestrator({"bench_number_1": Remote()}, names="dotted")
    names = [t.name for t in orchestrator.list_tools()]
    assert names == ["bench_number_1.read", "bench_number_1.press"]


def test_reads_of_different_benches_in_one_output_run_side_by_side() -> None:
    """Each read waits until all three are under way: run one after the other, the first
    would wait alone and fail (the barrier's timeout), however fast or busy the machine."""
    meeting = threading.Barrier(3, timeout=30)

    class Meeting(Bench):
        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            meeting.wait()
            return super().execute_tool(tool_name, arguments)

    orchestrator = farm(Meeting(), Meeting(), Meeting())
    calls: list[tuple[str, dict[str, Any]]] = [
        (f"bench{i}__read", {"seconds": 0}) for i in (1, 2, 3)
    ]
    response = orchestrator.process_llm_response(openai_calls(*calls))
    assert response.call_executed and not response.call_failed, response.call_detail
    assert response.messages is not None
    answered = [m["tool_call_id"] for m in response.messages[1:]]
    assert answered == ["call_0", "call_1", "call_2"]


def test_an_output_that_changes_state_runs_in_order() -> None:
    journal: list[str] = []
    one, two = Bench(journal), Bench(journal)
    orchestrator = farm(one, two)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("bench1__press", {"seconds": 0.2}),
        ("bench2__read", {"seconds": 0}),
    ]
    started = time.monotonic()
    assert orchestrator.process_llm_response(openai_calls(*calls)).call_executed
    assert time.monotonic() - started >= 0.2
    assert journal == [f"{id(one)}:press", f"{id(two)}:read"]


class HeldBench(Bench):
    """A bench whose reads last until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.Event()
        self.release = threading.Event()

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.reading.set()
        self.release.wait(HELD_S)
        return super().execute_tool(tool_name, arguments)


HELD_S = 20.0
"""How long a held read lasts at most when the test never lets it go."""


def test_calls_to_two_benches_from_two_threads_do_not_wait_for_each_other() -> None:
    held = HeldBench()
    orchestrator = farm(held, Bench())
    thread = threading.Thread(
        target=orchestrator.execute_tool, args=("bench1.read", {"seconds": 0})
    )
    thread.start()
    try:
        assert held.reading.wait(BUSY_MARGIN_S)  # the slow read is under way
        started = time.monotonic()
        orchestrator.execute_tool("bench2.read", {"seconds": 0})
        took = time.monotonic() - started
        # the other bench answered while the slow read was still held: it did not wait
        assert thread.is_alive() and took < HELD_S / 2
    finally:
        held.release.set()
        thread.join()


def test_a_consent_gate_that_asks_every_call_asks_one_question_at_a_time() -> None:
    asked: list[str] = []

    def ask(tool: str, arguments: dict[str, Any]) -> bool:
        asked.append(tool)
        return True

    gate = ConsentGate(farm(Bench(), Bench()), ask, every_call=True)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("bench1__read", {"seconds": 0}),
        ("bench2__read", {"seconds": 0}),
    ]
    assert gate.process_llm_response(openai_calls(*calls)).call_executed
    assert asked == ["bench1.read", "bench2.read"]
    assert gate.concurrency_key("bench1.read") is None


def test_new_tools_of_a_bench_appear_and_the_old_names_stay() -> None:
    one, two = Bench(), Bench()
    orchestrator = farm(one, two)
    gate = ConsentGate(orchestrator, lambda t, a: True)
    before = [t.name for t in gate.list_tools()]
    one.grow("status")
    after = [t.name for t in gate.list_tools()]
    assert after[: len(before)] == before or set(before) <= set(after)
    assert "bench1.status" in after
    assert gate.process_llm_response('{"tool": "bench1.status", "arguments": {}}').call_executed
    orchestrator.remove_driver("bench1")
    one.grow("later")  # no longer heard
    assert not any(t.name.startswith("bench1.") for t in orchestrator.list_tools())


def test_a_new_tool_that_cannot_be_offered_is_left_out_not_raised() -> None:
    bench = Bench()
    orchestrator = Orchestrator({"a": Thermostat(), "b": bench}, conflict="reject")
    bench.grow("echo")  # clashes with a's echo under reject: left out, logged
    names = [t.name for t in orchestrator.list_tools()]
    assert names.count("echo") == 1 and "b__echo" not in names
    assert "read" in names


@given(
    st.lists(
        st.from_regex(r"[A-Za-z0-9_-]{1,20}(\.[A-Za-z0-9_-]{1,20}){0,2}", fullmatch=True),
        unique=True,
        max_size=12,
    )
)
def test_aliases_are_unique_provider_safe_and_never_a_real_name(names: list[str]) -> None:
    names = [n for n in names if is_tool_name(n)]
    aliases = native_aliases(names)
    assert set(aliases) == {n for n in names if not is_valid_tool_name(n)}
    assert all(is_valid_tool_name(a) for a in aliases.values())
    assert len(set(aliases.values())) == len(aliases)
    assert not set(aliases.values()) & set(names)


def test_an_alias_that_would_take_a_real_name_gets_another() -> None:
    aliases = native_aliases(["bench1.read", "bench1__read"])
    assert aliases == {"bench1.read": "bench1__read_2"}


def test_an_abandoned_read_is_told_and_a_send_is_not() -> None:
    read, send = CallJob(), CallJob()
    heard: list[str] = []
    assert read.begin(False) and send.begin(True)
    read.on_abandon(lambda: heard.append("read"))
    send.on_abandon(lambda: heard.append("send"))
    withdrawn = CallJob()
    withdrawn.begin(False)
    withdrawn.on_abandon(lambda: heard.append("withdrawn"))()  # registered, then withdrawn
    for job in (read, send, withdrawn):
        job.cancel()
    assert heard == ["read"]
    read.on_abandon(lambda: heard.append("late"))  # abandoned already: told at once
    assert heard == ["read", "late"]


def test_a_tool_error_of_a_bench_keeps_its_code_through_the_labels() -> None:
    orchestrator = farm(Thermostat())
    with pytest.raises(ToolError) as caught:
        orchestrator.execute_tool("bench1.fail", {"kind": "retryable"})
    assert caught.value.code == "BUSY" and caught.value.retryable


# -- an alias offered stays bound to the tool it named (issue 33, review 2 finding 2) ---------


def native_names(driver: HybridDriver) -> dict[str, str]:
    """Each native function name the model is offered -> the tool a call by it runs."""
    offered = [t["function"]["name"] for t in driver.get_native_tools("openai")]
    return {name: driver.tool_name(name) for name in offered}


@pytest.mark.parametrize("label", ["a__b", "bench__1", "a_", "bench1_"])
def test_a_label_an_alias_could_not_be_told_apart_by_is_refused(label: str) -> None:
    """With benches `a` and `a__b`, `a__b__c` stood for `a__b.c` until bench `a` added
    `b__c`; with `a_` and `a`, `a___b` is `a_.b` or `a._b`."""
    with pytest.raises(ValueError, match="__"):
        Orchestrator({label: Bench()}, names="dotted")
    with pytest.raises(ValueError, match="__"):
        Orchestrator(names="dotted").add_driver(Bench(), label=label)


def test_an_alias_keeps_naming_its_tool_when_the_bench_adds_one_that_would_take_it() -> None:
    bench = Bench(extra=("b__c",))
    gate = ConsentGate(Orchestrator({"a": bench}, names="dotted"), lambda tool, args: True)
    before = native_names(gate)
    assert before["a__b__c"] == "a.b__c"
    bench.grow("b.c")  # listed after, but its alias would be `a__b__c` too
    bench.extra = ("b.c", "b__c")  # and now listed first
    bench.tools_changed()
    after = native_names(gate)
    assert after["a__b__c"] == "a.b__c"  # a call by the alias still runs the same tool
    assert set(before.items()) <= set(after.items())
    assert "a.b.c" in after.values()
    call = {"id": "1", "type": "function", "function": {"name": "a__b__c", "arguments": "{}"}}
    ran = gate.process_llm_response({"role": "assistant", "content": None, "tool_calls": [call]})
    assert ran.tool_call_result == {"tool": "b__c"}


def test_an_alias_of_a_tool_gone_is_not_given_to_another() -> None:
    bench = Bench(extra=("b__c",))
    orchestrator = Orchestrator({"a": bench}, names="dotted")
    assert native_names(orchestrator)["a__b__c"] == "a.b__c"
    bench.extra = ("b.c",)  # b__c is gone, b.c comes: its alias is another
    bench.tools_changed()
    after = native_names(orchestrator)
    assert "a__b__c" not in after
    assert after[next(n for n, t in after.items() if t == "a.b.c")] != "a__b__c"


NAME_PARTS = st.sampled_from(["a", "b", "c", "_", "a_", "_b", "b__c", "a.b", "b.c"])


@given(st.lists(st.lists(NAME_PARTS, unique=True, max_size=6), min_size=2, max_size=6))
def test_an_alias_once_given_always_stands_for_the_same_name(generations: list[list[str]]) -> None:
    """Whatever names come and go, an alias is given to one name only, and stays unique
    and never a real name."""
    first: dict[str, str] = {}  # alias -> the name it was first given to
    kept: dict[str, str] = {}
    for parts in generations:
        names = [f"x.{part}" for part in parts] + [p for p in parts if "." not in p]
        aliases = native_aliases(names, kept)
        assert set(aliases) == {n for n in names if not is_valid_tool_name(n)}
        assert len(set(aliases.values())) == len(aliases)
        assert not set(aliases.values()) & set(names)
        for name, alias in aliases.items():
            assert first.setdefault(alias, name) == name
        kept = {**kept, **aliases}
