"""Consent for calls that change state, asked of the MCP client's user by elicitation.

`build_server(driver, consent=True)` (`hwbridge mcp --consent`) puts the driver behind a
`ConsentGate`, the same one `hwbridge chat --consent` uses, and asks the person on the
client's side before each call that can change state: the question names the tool and what
it would put on the wire (the bridge, the message and its signal values, a frame's bytes, a
diagnostic request). Accept runs the call; decline, cancel, an unchecked box or no answer
refuses it with CONSENT_DENIED, and nothing is sent. A client that cannot ask its user (no
elicitation capability, or no way back to it) gets a refusal that says so, never a send.

The answer is asked here, on the event loop, in the way the connection speaks: at MCP
2026-07-28 the call returns `input_required` with the question and the client calls again
with the answer (bound to the same tool and arguments); before, the server sends an
`elicitation/create` request and waits for it. The answer is then handed to the gate through
a context variable of that one call: the gate alone decides, and without an answer for
exactly this call it refuses.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from contextvars import ContextVar
from typing import Any, Final

from mcp import types
from mcp.server import ServerRequestContext

from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import ToolCall
from hwbridge.mcp.questions import Sealed, StateSeal

__all__ = [
    "CONSENT_TIMEOUT_S",
    "MRTR_VERSION",
    "Verdict",
    "ask_consent",
    "can_elicit",
    "consented",
    "question_text",
]

log = logging.getLogger(__name__)

CONSENT_TIMEOUT_S: Final = 120.0
"""How long the person has to answer (back-channel elicitation); no answer refuses."""
MRTR_VERSION: Final = "2026-07-28"
"""From this protocol version on, a question goes out as an `input_required` result."""
_KEY = "hwbridge_consent"
_MAX_SHOWN = 1500  # characters of arguments in a question
_MAX_ABOUT = 300  # characters of the tool's description in a question

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Send it",
            "description": "Tick to let this call go out; leave it to refuse.",
        }
    },
    "required": ["approve"],
}

_APPROVED: ContextVar[str | None] = ContextVar("hwbridge_mcp_consent", default=None)
"""The binding of the call the person approved, in that call's own context."""


class Verdict:
    """What the person said: approved, or refused and why."""

    def __init__(self, approved: bool, reason: str = "") -> None:
        self.approved = approved
        self.reason = reason


def binding(tool: str, arguments: dict[str, Any]) -> str:
    """What an answer is an answer to: the tool and its exact arguments."""
    text = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def consented(tool: str, arguments: dict[str, Any]) -> bool:
    """The gate's question: did the person approve exactly this call?"""
    return _APPROVED.get() == binding(tool, arguments)


def approve(tool: str, arguments: dict[str, Any]) -> None:
    """Mark this call approved in the current context (the call's own task)."""
    _APPROVED.set(binding(tool, arguments))


def question_text(driver: HybridDriver, call: ToolCall) -> str:
    """The question the person reads: what would go out, where."""
    name = call.tool
    tool = next((t for t in driver.list_tools() if t.name == name), None)
    about = _first_sentence(tool.description or "") if tool is not None else ""
    shown = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(shown) > _MAX_SHOWN:
        shown = shown[: _MAX_SHOWN - 3] + "..."
    lines = [f"An AI assistant asks to run {name}, which can change the vehicle or bench."]
    if about:
        lines.append(f"{name}: {about}")
    lines.append(f"What it would send: {shown}")
    lines.append("Allow it? Nothing is sent unless you approve.")
    return "\n".join(lines)


def _first_sentence(text: str) -> str:
    """What the tool does, for a person: the rest of a description is for the model."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    cut = line.find(". ")
    line = line[: cut + 1] if cut >= 0 else line
    # a remote bench writes its own descriptions: the question stays readable
    return line if len(line) <= _MAX_ABOUT else line[: _MAX_ABOUT - 3] + "..."


async def ask_consent(
    ctx: ServerRequestContext[Any],
    driver: HybridDriver,
    call: ToolCall,
    params: types.CallToolRequestParams,
    timeout_s: float = CONSENT_TIMEOUT_S,
    *,
    seal: StateSeal,
    sealed: Sealed | None = None,
) -> Verdict | types.InputRequiredResult:
    """The person's answer for `call`, or the `input_required` result that asks for it.
    On a 2026-07-28 connection the question's request_state is sealed by `seal` (single use,
    bound to the call): an answer counts only in the round right after this server asked
    for it (`sealed`, the state the call came back with, opened), never twice."""
    name = call.tool
    if not can_elicit(ctx):
        return Verdict(
            False,
            f"this MCP client cannot ask its user (it does not support elicitation), and "
            f"{name} needs the user's consent",
        )
    question = question_text(driver, call)
    if ctx.protocol_version >= MRTR_VERSION:
        answer = (params.input_responses or {}).get(_KEY)
        if answer is None or sealed is None:  # not asked, or asked for another call or round
            state = seal.seal(binding(name, call.arguments), Sealed(False, None))
            return types.InputRequiredResult(
                input_requests={
                    _KEY: types.ElicitRequest(
                        params=types.ElicitRequestFormParams(
                            message=question, requested_schema=_SCHEMA
                        )
                    )
                },
                request_state=state,
            )
        return _verdict(name, answer)
    try:
        result = await asyncio.wait_for(
            ctx.session.elicit_form(question, _SCHEMA, related_request_id=ctx.request_id),
            timeout_s,
        )
    except TimeoutError:
        return Verdict(
            False, f"no answer to the consent question for {name} within {timeout_s:g} s"
        )
    except Exception as exc:  # no way back to the client, a client that failed to answer
        log.debug("consent for %s could not be asked", name, exc_info=True)
        return Verdict(False, f"the user could not be asked about {name} ({type(exc).__name__})")
    return _verdict(name, result)


def _verdict(name: str, answer: Any) -> Verdict:
    if isinstance(answer, dict):
        try:
            answer = types.ElicitResult.model_validate(answer)
        except ValueError:
            return Verdict(False, f"the answer about {name} was not one")
    if not isinstance(answer, types.ElicitResult):
        return Verdict(False, f"the answer about {name} was not one")
    if answer.action == "accept" and (answer.content or {}).get("approve") is True:
        return Verdict(True)
    said = {"accept": "did not tick approve", "decline": "declined", "cancel": "cancelled"}
    return Verdict(False, f"the user {said.get(answer.action, 'refused')} {name}")


def can_elicit(ctx: ServerRequestContext[Any]) -> bool:
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    try:
        return bool(ctx.session.check_client_capability(wanted))
    except Exception:
        return False
