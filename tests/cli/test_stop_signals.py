"""Ctrl-C and SIGTERM stop a command even when they arrive while its main thread holds the
lock of the event it waits on (what `Event.wait` does for a moment each time it wakes).

Each case runs in a process of its own: signal handlers belong to a process's main thread.
The signal is sent while the lock is held, so the handler runs with it held: setting the
event inside the handler (as `monitor`, `record`, `discover --live` and the simulator did)
waits for ever there; CI met it as a monitor that never ended after Ctrl-C.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.cli.conftest import REPO

_HELD_LOCK = """
import os, signal, threading
stop = threading.Event()
with {context}:
    with stop._cond:  # held, as Event.wait holds it each time it wakes
        os.kill(os.getpid(), signal.{signal})
        for _ in range(1000):  # the handler runs between these bytecodes
            pass
    print("stopped" if stop.wait(10) else "not stopped", flush=True)
"""


def _run(script: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)],
            cwd=REPO,
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process hung: the signal's handler waits for a lock its thread holds")


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_while_the_event_lock_is_held_still_stops(signum: str) -> None:
    context = (
        "__import__('hwbridge.cli.live_bus', fromlist=['x'])"
        ".on_stop_signals(lambda signum: stop.set())"
    )
    result = _run(_HELD_LOCK.format(context=context, signal=signum))
    assert result.stdout == "stopped\n", result.stderr


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_the_simulator_stops_on_a_signal_while_the_event_lock_is_held(signum: str) -> None:
    context = "__import__('firmware_sim.stop_signals', fromlist=['x']).stop_on_signals(stop)"
    result = _run(_HELD_LOCK.format(context=context, signal=signum))
    assert result.stdout == "stopped\n", result.stderr


def test_the_handler_gets_each_signal_and_the_previous_handlers_come_back() -> None:
    result = _run(
        """
        import os, signal, threading
        from hwbridge.cli.stop_signals import relayed_signals
        got, done = [], threading.Event()
        def handler(signum):
            got.append(signal.Signals(signum).name)
            if len(got) == 2:
                done.set()
        before = signal.getsignal(signal.SIGINT)
        with relayed_signals((signal.SIGINT, signal.SIGTERM), handler):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            done.wait(10)
        print(sorted(got), signal.getsignal(signal.SIGINT) is before)
        """
    )
    assert result.stdout == "['SIGINT', 'SIGTERM'] True\n", result.stderr


def test_at_once_can_leave_a_blocking_wait_in_the_main_thread() -> None:
    """The chat's second Ctrl-C: raised in the handler itself, it ends a wait that nothing
    else would end."""
    result = _run(
        """
        import os, signal, threading
        from hwbridge.cli.stop_signals import relayed_signals
        def leave(signum):
            raise KeyboardInterrupt
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            with relayed_signals((signal.SIGINT,), lambda signum: None, at_once=leave):
                threading.Event().wait(20)
            print("waited")
        except KeyboardInterrupt:
            print("left")
        """
    )
    assert result.stdout == "left\n", result.stderr


def test_when_at_once_leaves_the_handler_is_not_called() -> None:
    """The chat's second Ctrl-C leaves; its first withdraws the answer. Were the signal handed
    to the handler before `at_once` looked, the handler's withdrawal could come first and a
    single Ctrl-C leave the chat (seen under load as "(left)" for one press)."""
    result = _run(
        """
        import os, signal, threading
        from hwbridge.cli.stop_signals import relayed_signals
        called = []
        def leave(signum):
            raise KeyboardInterrupt
        try:
            with relayed_signals((signal.SIGINT,), called.append, at_once=leave):
                os.kill(os.getpid(), signal.SIGINT)
                threading.Event().wait(20)
        except KeyboardInterrupt:
            pass
        print("handler called" if called else "handler not called")
        """
    )
    assert result.stdout == "handler not called\n", result.stderr
