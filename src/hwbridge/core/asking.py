"""Asking someone (a consent callback, a dialog, a terminal) with a deadline.

The question runs in its own daemon thread, so a callback that never returns (a user who
walked away) cannot hold a call beyond its timeout; only an explicit True approves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["ask_with_timeout"]

log = logging.getLogger(__name__)


def ask_with_timeout(
    question: Callable[[], object], timeout_s: float, *, what: str = "the action"
) -> bool:
    """True only when `question()` returns True within `timeout_s`; False on any other
    answer, an exception (logged) or no answer in time."""
    answer: list[object] = []
    done = threading.Event()

    def asking() -> None:
        try:
            answer.append(question())
        except Exception:
            log.exception("the consent callback failed; %s is refused", what)
        finally:
            done.set()

    threading.Thread(target=asking, name=f"consent:{what}", daemon=True).start()
    if not done.wait(timeout_s):
        log.warning("no consent for %s within %g s; refused", what, timeout_s)
        return False
    return bool(answer) and answer[0] is True
