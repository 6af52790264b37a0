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
import secrets
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from mcp import types

__all__ = [
    "BENCH_KEY_PREFIX",
    "MAX_QUESTIONS",
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
"""At most this many questions about one call are passed on (a round, or one call's
questions asked mid-call); the next is refused."""
MAX_FORM_TEXT: Final = 300
"""A bench's form's titles and descriptions are cut to this length."""
MAX_BENCH_STATE: Final = 16_384
"""A bench's request_state is handed back only up to this size (characters)."""
STATE_TTL_S: Final = 600.0
"""A sealed state opens within this long after it was handed out, once."""
_MAX_ISSUED = 4096  # sealed states outstanding at once (the oldest are forgotten first)
BENCH_KEY_PREFIX: Final = "bench:"
"""A bench's question keys, as this server's client sees them (apart from its own)."""
_MAX_FORM_DEPTH = 32  # a form nests a few levels; a deeper one is not passed on

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
    asked: int = 0  # questions put to the person for this call

    @property
    def can_ask(self) -> bool:
        return self.ask_on_server is not None and self.loop is not None

    async def ask(self, bench: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The person's answer to a bench's question, from any event loop; a question that
        cannot be passed on, or no answer within `timeout_s`, is a refusal (`cancel`)."""
        if not self.can_ask or not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="cancel")
        self.asked += 1
        if self.asked > MAX_QUESTIONS:  # a bench asking on and on gets no more answers
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


def plain(text: str, limit: int) -> str:
    """A bench's text as a person may read it: no control character, no bidirectional or
    other format character (which could make it read as something else), at most `limit`
    characters."""
    cut = len(text) > limit
    text = "".join(  # only what is kept is looked at: a bench's megabyte is cut first
        " " if unicodedata.category(c) in ("Cc", "Cf") and c != "\n" else c
        for c in text[: limit - 3 if cut else limit]
    )
    return text + "..." if cut else text


def label(bench: str, message: str) -> str:
    """A bench's question as the person reads it: said to be the bench's, every line of it
    marked as the bench's (so none can pass for this server's), bounded, plain."""
    lines = plain(message, MAX_QUESTION_CHARS).splitlines() or [""]
    return f"{plain(bench, 120)} asks:\n" + "\n".join(f"| {line}" for line in lines)


def passable(schema: Any) -> dict[str, Any] | None:
    """A bench's form as it may be passed on: a JSON object of at most MAX_SCHEMA_BYTES,
    every text in it plain and cut to MAX_FORM_TEXT characters."""
    try:
        shown = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(schema, dict) or len(shown.encode()) > MAX_SCHEMA_BYTES:
        return None
    try:
        cleaned = _plain_texts(schema, _MAX_FORM_DEPTH)
    except ValueError:  # nested deeper than any form needs
        return None
    return cleaned if isinstance(cleaned, dict) else None


def _plain_texts(value: Any, depth: int) -> Any:
    """`value` with every text plain; ValueError when nested deeper than `depth`."""
    if isinstance(value, str):
        return plain(value, MAX_FORM_TEXT)
    if isinstance(value, dict | list) and depth <= 0:
        raise ValueError("too deep")
    if isinstance(value, dict):
        return {plain(str(k), MAX_FORM_TEXT): _plain_texts(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_texts(v, depth - 1) for v in value]
    return value


def relayed(bench: str, asked: types.InputRequiredResult) -> tuple[dict[str, Any] | None, str]:
    """A bench's `input_required` questions as this server's (keys prefixed), or None and
    why they cannot be passed on (not forms, too many, too large)."""
    requests = asked.input_requests or {}
    if not requests:
        return None, "asked for another round without a question"
    if len(requests) > MAX_QUESTIONS:
        return None, f"asked {len(requests)} questions at once (at most {MAX_QUESTIONS})"
    if len(asked.request_state or "") > MAX_BENCH_STATE:
        return None, f"handed back a state of more than {MAX_BENCH_STATE:,} characters"
    out: dict[str, Any] = {}
    for key, request in requests.items():
        params = getattr(request, "params", None)
        if not isinstance(request, types.ElicitRequest) or not isinstance(
            params, types.ElicitRequestFormParams
        ):
            return None, "asked for something that is not a form"
        schema = passable(params.requested_schema)
        if schema is None or len(key) > 200:
            return None, "asked with a form too large to pass on"
        out[BENCH_KEY_PREFIX + key] = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=label(bench, params.message), requested_schema=schema
            )
        )
    return out, ""


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
    `hwbridge.mcp.consent.binding`), what was settled, a nonce, and an HMAC with a key made
    at start. `open` gives it back only for the same call, only as this server wrote it,
    only within STATE_TTL_S, and only once: a client that sends a round again (a retry, a
    replay) gets a new question, never a second send on one answer."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._issued: OrderedDict[str, float] = OrderedDict()  # nonce: when it was handed out
        self._lock = threading.Lock()

    def seal(self, binding: str, sealed: Sealed) -> str:
        nonce = secrets.token_hex(16)
        with self._lock:
            self._issued[nonce] = time.monotonic()
            while len(self._issued) > _MAX_ISSUED:
                self._issued.popitem(last=False)
        body = base64.urlsafe_b64encode(
            json.dumps([binding, sealed.approved, sealed.bench_state, nonce]).encode()
        ).decode()
        return f"{body}.{self._mac(body)}"

    def open(self, state: str | None, binding: str) -> Sealed | None:
        if not state or "." not in state or len(state) > 4 * MAX_BENCH_STATE:
            return None
        body, _, mac = state.rpartition(".")
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):  # any text
            return None
        try:
            bound, approved, bench_state, nonce = json.loads(base64.urlsafe_b64decode(body))
        except (ValueError, TypeError, binascii.Error):
            return None
        if bound != binding or not isinstance(approved, bool) or not isinstance(nonce, str):
            return None
        if bench_state is not None and not isinstance(bench_state, str):
            return None
        with self._lock:  # once, and in time
            issued = self._issued.pop(nonce, None)
        if issued is None or time.monotonic() - issued > STATE_TTL_S:
            return None
        return Sealed(approved, bench_state)

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
