"""A bench's questions to the person, passed on by an aggregating server (`hwbridge mcp
--remote`).

A bench served with `hwbridge mcp --consent` asks its client's user before each call that
changes state. Behind an aggregating server, the bench's client is that server's
`McpToolDriver`, and the person is at the far end, in the aggregating server's own client.
The call handler puts the call's `Questions` in a ContextVar (as it puts `PROGRESS`), and
the driver passes the bench's question on the way that client can be asked:

- a connection of the handshake versions (`elicitation/create`): the question goes to the
  client while the bench's call waits (`Questions.ask`), and the answer goes back to the
  bench;
- a 2026-07-28 connection (`input_required`): the bench's questions become this server's own
  `input_required` result (`Questions.pending`), the bench's state sealed in this server's
  (bound to the tool and its arguments and signed with a key of this server, so a client
  cannot forge it or move it to another call); the client's next call brings the answers,
  and the bench is called again with them and its state.

With no one to ask (a Python caller, a client without elicitation, a question in a form
that cannot be passed on), the bench gets no answer and refuses as its own consent gate
does: nothing is sent. A bench's words reach the person labelled as the bench's, cut to
MAX_QUESTION_CHARS, never as this server's.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from mcp import types

__all__ = [
    "BENCH_KEY_PREFIX",
    "MAX_QUESTION_CHARS",
    "QUESTIONS",
    "Questions",
    "Sealed",
    "StateSeal",
    "passable",
]

MAX_QUESTION_CHARS: Final = 1500
"""A bench's question is cut to this length before the person reads it."""
MAX_SCHEMA_BYTES: Final = 4096
"""A bench's form (its requested schema) is passed on only up to this size."""
MAX_QUESTIONS: Final = 4
"""At most this many questions of one `input_required` round are passed on."""
BENCH_KEY_PREFIX: Final = "bench:"
"""A bench's question keys, as this server's client sees them (apart from its own)."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

Ask = Callable[[str, dict[str, Any]], Awaitable[types.ElicitResult]]


@dataclass
class Questions:
    """What one served call can ask its client's user. `ask` (on `loop`, the server's)
    is set on a connection that can be asked mid-call; `relay` on a 2026-07-28 one, with
    the `answers` and bench `state` its client brought, and `pending` the bench's round
    to hand back."""

    where: str = ""
    ask_on_server: Ask | None = None
    loop: asyncio.AbstractEventLoop | None = None
    timeout_s: float = 120.0
    relay: bool = False
    answers: dict[str, Any] | None = None
    state: str | None = None
    pending: types.InputRequiredResult | None = None
    pending_from: str = ""  # the bench that asked, as messages name it

    @property
    def can_ask(self) -> bool:
        return self.ask_on_server is not None and self.loop is not None

    async def ask(self, bench: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The person's answer to a bench's question, from any event loop; a question that
        cannot be passed on, or no answer within `timeout_s`, is a refusal (`cancel`)."""
        if not self.can_ask or not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="cancel")
        schema = passable(params.requested_schema)
        if schema is None:
            return types.ElicitResult(action="cancel")
        assert self.ask_on_server is not None
        assert self.loop is not None
        asked = asyncio.wait_for(self.ask_on_server(label(bench, params.message), schema),
                                 self.timeout_s)  # fmt: skip
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(asked, self.loop))
        except Exception:  # no answer in time, the client gone: nobody said yes
            return types.ElicitResult(action="cancel")


QUESTIONS: ContextVar[Questions | None] = ContextVar("hwbridge_mcp_questions", default=None)
"""The questions of the call being served (set by the call handler for its execution)."""


def label(bench: str, message: str) -> str:
    """A bench's question as the person reads it: said to be the bench's, bounded, with no
    control character."""
    text = _CONTROL.sub(" ", message)
    if len(text) > MAX_QUESTION_CHARS:
        text = text[: MAX_QUESTION_CHARS - 3] + "..."
    return f"{bench[:120]} asks:\n{text}"


def passable(schema: Any) -> dict[str, Any] | None:
    """A bench's form as it may be passed on: a JSON object of at most MAX_SCHEMA_BYTES."""
    try:
        shown = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return None
    if not isinstance(schema, dict) or len(shown.encode()) > MAX_SCHEMA_BYTES:
        return None
    return dict(schema)


def relayed(bench: str, asked: types.InputRequiredResult) -> dict[str, Any] | None:
    """A bench's `input_required` questions as this server's (keys prefixed), or None when
    one of them cannot be passed on (not a form, too many, too large)."""
    requests = asked.input_requests or {}
    if not requests or len(requests) > MAX_QUESTIONS:
        return None
    out: dict[str, Any] = {}
    for key, request in requests.items():
        params = getattr(request, "params", None)
        if not isinstance(request, types.ElicitRequest) or not isinstance(
            params, types.ElicitRequestFormParams
        ):
            return None
        schema = passable(params.requested_schema)
        if schema is None or len(key) > 200:
            return None
        out[BENCH_KEY_PREFIX + key] = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=label(bench, params.message), requested_schema=schema
            )
        )
    return out


def bench_answers(responses: dict[str, Any] | None) -> dict[str, Any] | None:
    """The answers of a client's call that are the bench's, under the bench's own keys."""
    if not responses:
        return None
    mine = {
        key[len(BENCH_KEY_PREFIX) :]: value
        for key, value in responses.items()
        if isinstance(key, str) and key.startswith(BENCH_KEY_PREFIX)
    }
    return mine or None


@dataclass(frozen=True)
class Sealed:
    """What a sealed state says about the call it was given for."""

    approved: bool  # this server's own consent question was answered yes
    bench_state: str | None  # the bench's request_state, handed back to it as it was


class StateSeal:
    """The request_state this server hands its client: the call's binding (see
    `hwbridge.mcp.consent.binding`), what was settled, and an HMAC with a key made at
    start: `open` gives it back only for the same call and only as this server wrote it."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def seal(self, binding: str, sealed: Sealed) -> str:
        body = base64.urlsafe_b64encode(
            json.dumps([binding, sealed.approved, sealed.bench_state]).encode()
        ).decode()
        return f"{body}.{self._mac(body)}"

    def open(self, state: str | None, binding: str) -> Sealed | None:
        if not state or "." not in state or len(state) > 65_536:
            return None
        body, _, mac = state.rpartition(".")
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):  # any text
            return None
        try:
            bound, approved, bench_state = json.loads(base64.urlsafe_b64decode(body))
        except (ValueError, TypeError, binascii.Error):
            return None
        if bound != binding or not isinstance(approved, bool):
            return None
        if bench_state is not None and not isinstance(bench_state, str):
            return None
        return Sealed(approved, bench_state)

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
