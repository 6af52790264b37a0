"""The J1939 tools' work: diagnostic messages, requests, the nodes, clearing codes.

Everything a vehicle sends is decoded into bounded JSON values: data for the model to read,
never text to follow. A request goes out only from a claimed address; on a bus that takes no
frame (a replay) or without an address, the read tools answer from what was heard and say
that nothing was sent.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from hwbridge.core.models import ToolError
from hwbridge.j1939.database.catalog import J1939Database
from hwbridge.j1939.database.ids import (
    ACK_PGN,
    ADDRESS_CLAIMED_PGN,
    DM1_PGN,
    DM2_PGN,
    DM3_PGN,
    DM11_PGN,
    GLOBAL,
    REQUEST_PGN,
    TP_CM_PGN,
    TP_DT_PGN,
)
from hwbridge.j1939.database.name import J1939Name
from hwbridge.j1939.database.strings import decode_text
from hwbridge.j1939.database.tables import address_name
from hwbridge.j1939.tools.common import (
    MAX_SOURCES,
    J1939Settings,
    age,
    counted,
    dm_entry,
    put,
    source_info,
    target,
)
from hwbridge.j1939.transport.link import Heard, J1939Link, RequestOutcome, group
from hwbridge.policy import SendPolicy, ServiceRequest
from hwbridge.policy.outcomes import failure_outcome

__all__ = ["CLEARS", "ClearKind", "J1939Service"]

ClearKind = Literal["active", "previously_active"]
CLEARS: dict[str, tuple[str, int, str]] = {
    "active": ("j1939_dm11", DM11_PGN, "DM11"),
    "previously_active": ("j1939_dm3", DM3_PGN, "DM3"),
}
_NOT_REQUESTABLE = {
    ACK_PGN: "Acknowledgment",
    REQUEST_PGN: "Request",
    TP_CM_PGN: "TP.CM",
    TP_DT_PGN: "TP.DT",
}
_FALLBACK = frozenset({"READ_ONLY_BUS", "NO_ADDRESS"})
_MAX_DATA_SHOWN = 256  # bytes of an answer shown as hex


def _to(destination: int) -> str | int:
    return "global" if destination == GLOBAL else destination


class J1939Service:
    """The tools over one link, gated by `policy`, decoding with `db`."""

    def __init__(
        self,
        link: J1939Link,
        policy: SendPolicy,
        db: J1939Database,
        settings: J1939Settings | None = None,
    ) -> None:
        self.link = link
        self.policy = policy
        self.db = db
        self.settings = settings or J1939Settings()

    # -- asking, or listening when nothing can be sent -------------------------------------

    def _ask(
        self, pgn: int, destination: int, timeout_s: float
    ) -> tuple[RequestOutcome, str | None]:
        """A request and its answers; on a bus that takes no frame, or without an address,
        what was heard of `pgn` (listening up to `timeout_s` when nothing was), with why
        nothing was sent."""
        why = self.link.read_only
        if why is None:
            try:
                return self.link.request(pgn, destination, timeout_s=timeout_s), None
            except ToolError as exc:
                if exc.code not in _FALLBACK:
                    raise
                why = exc.message
        held = self.link.heard(pgn)
        if destination != GLOBAL:
            held = {s: h for s, h in held.items() if s == destination}
        waited = 0.0
        if not held:
            heard = self.link.listen(pgn, timeout_s=timeout_s, source=destination, until_first=True)
            held, waited = heard.answers, heard.waited_s
        outcome = RequestOutcome(pgn, destination, None, False, waited, held, {}, {}, [])
        return outcome, why

    @staticmethod
    def _not_sent(why: str | None, result: dict[str, Any]) -> None:
        """Why nothing was sent, and what the answers are then, into `result`."""
        if why is not None:
            result["not_sent_because"] = why[:300]
            result["note"] = "nothing was requested: the answers are what was heard on the bus"

    def _problems(self, outcome: RequestOutcome, result: dict[str, Any]) -> None:
        """NACKs, aborted and unfinished transfers, into `result`."""
        nacks = [
            {"source": s, "answer": a.kind} for s, a in sorted(outcome.acks.items()) if a.control
        ]
        if nacks:
            put(result, "nacked_by", nacks)
        aborted = [{"source": s, "problem": why[:160]} for s, why in sorted(outcome.aborts.items())]
        if aborted:
            put(result, "aborted", aborted)
        if outcome.cut:
            cut = [
                {"source": p.source, "received_bytes": p.received, "size": p.size}
                for p in outcome.cut
            ]
            put(result, "incomplete", cut)

    def _no_answer(self, what: str, outcome: RequestOutcome, why: str | None) -> ToolError:
        if outcome.sent:
            who = "no ECU" if outcome.destination == GLOBAL else f"address {outcome.destination}"
            text = f"The {what} request went out; {who} answered within {outcome.waited_s:g} s."
        else:
            who = (
                "no ECU was"
                if outcome.destination == GLOBAL
                else f"address {outcome.destination} was not"
            )
            text = (
                f"Nothing was sent: {(why or 'no address')[:300]} And {who} heard sending "
                f"{what} in {outcome.waited_s:g} s."
            )
        return ToolError("NO_RESPONSE", text, retryable=True)

    # -- DM1 -------------------------------------------------------------------------------

    def dm1(self, address: int | None) -> dict[str, Any]:
        window = self.settings.dm1_window_s
        source = target(address)
        link = self.link
        first = link.listening_since + window - time.monotonic()
        if first > 0:
            link.wait(first)  # a full window heard: every ECU broadcasting has been
        # what the first window heard counts whole, even a frame of its very first moment
        since = link.listening_since if first > 0 else time.monotonic() - window
        held = self._held(DM1_PGN, source)
        if not any(h.t >= since for h in held) and first <= 0:
            link.listen(DM1_PGN, timeout_s=window, source=source, until_first=True)
            held = self._held(DM1_PGN, source)
            since = time.monotonic() - window
        now = time.monotonic()
        claims = link.nodes()["claims"]
        current = [h for h in held if h.t >= since]
        older = [h for h in held if h.t < since]
        sources = [{**source_info(h.source, claims), **dm_entry(h, self.db, now)} for h in current]
        shown, meta = counted(sources, MAX_SOURCES)
        result: dict[str, Any] = {"window_s": window, "sources": shown, **meta}
        if older:
            stale = [{"source": h.source, "heard_s_ago": age(h.t, now)} for h in older]
            put(result, "not_current", stale)
        if not current:
            who = "no ECU" if source == GLOBAL else f"address {source}"
            result["note"] = f"{who} broadcast a DM1 in the last {window:g} s"
        return result

    def _held(self, pgn: int, source: int) -> list[Heard]:
        held = self.link.heard(pgn)
        return [h for s, h in sorted(held.items()) if source in (GLOBAL, s)]

    # -- DM2 -------------------------------------------------------------------------------

    def dm2(self, address: int | None) -> dict[str, Any]:
        destination = target(address)
        outcome, why = self._ask(DM2_PGN, destination, self.settings.request_timeout_s)
        now = time.monotonic()
        claims = self.link.nodes()["claims"]
        sources = [
            {**source_info(s, claims), **dm_entry(h, self.db, now)}
            for s, h in sorted(outcome.answers.items())
        ]
        shown, meta = counted(sources, MAX_SOURCES)
        result: dict[str, Any] = {"sent": outcome.sent, "to": _to(destination)}
        self._not_sent(why, result)
        result.update(sources=shown, **meta)
        self._problems(outcome, result)
        if not sources and not any(k in result for k in ("nacked_by", "aborted", "incomplete")):
            raise self._no_answer("DM2", outcome, why)
        return result

    # -- any PGN ---------------------------------------------------------------------------

    def request(self, pgn: int, address: int | None, timeout_ms: int | None) -> dict[str, Any]:
        if isinstance(pgn, bool) or not isinstance(pgn, int) or not 0 <= pgn <= 0x3FFFF:
            raise ToolError("INVALID_VALUE", f"pgn must be 0..262143, not {pgn!r}.")
        # a PDU1 group's PDU-specific byte is the destination, not the PGN: judge the group
        # that is asked for (59922 is 0xEA12: a request for the Request PGN 59904)
        pgn = group(pgn)
        if pgn in (DM11_PGN, DM3_PGN):
            service = "j1939_dm11" if pgn == DM11_PGN else "j1939_dm3"
            if not self.policy.allows_service(service):
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    f"A request for PGN {pgn} clears trouble codes ({service}), which the send "
                    "policy does not allow; nothing was sent.",
                )
            raise ToolError(
                "INVALID_VALUE", f"PGN {pgn} clears trouble codes: use j1939_clear_dtcs."
            )
        if pgn in _NOT_REQUESTABLE:
            raise ToolError(
                "INVALID_VALUE",
                f"PGN {pgn} ({_NOT_REQUESTABLE[pgn]}) is part of the protocol, not data to "
                "request.",
            )
        destination = target(address)
        timeout_s = self.settings.request_timeout_s
        if timeout_ms is not None:
            timeout_s = min(max(int(timeout_ms), 100), 20000) / 1000
        outcome, why = self._ask(pgn, destination, timeout_s)
        now = time.monotonic()
        claims = self.link.nodes()["claims"]
        answers = [
            self._answer(h, claims, now, fresh=outcome.sent)
            for _, h in sorted(outcome.answers.items())
        ]
        shown, meta = counted(answers, MAX_SOURCES)
        result: dict[str, Any] = {"pgn": pgn}
        label = self.db.pgn_label(pgn)
        if label:
            result["pgn_name"] = label
        result.update(sent=outcome.sent, to=_to(destination))
        self._not_sent(why, result)
        result.update(answers=shown, **meta)
        acked = [s for s, a in sorted(outcome.acks.items()) if not a.control]
        if acked:
            put(result, "acknowledged_by", acked)
        self._problems(outcome, result)
        if not answers and not outcome.acks and not outcome.aborts and not outcome.cut:
            raise self._no_answer(f"PGN {pgn}", outcome, why)
        return result

    def _answer(
        self, heard: Heard, claims: dict[int, Any], now: float, *, fresh: bool
    ) -> dict[str, Any]:
        out = source_info(heard.source, claims)
        out.update(transport=heard.transport, size=len(heard.data))
        if not fresh:
            out["heard_s_ago"] = age(heard.t, now)
        data = heard.data
        out["data"] = data[:_MAX_DATA_SHOWN].hex(" ").upper()
        if len(data) > _MAX_DATA_SHOWN:
            out["data_bytes_not_shown"] = len(data) - _MAX_DATA_SHOWN
        if heard.pgn in (DM1_PGN, DM2_PGN):
            dm = dm_entry(heard, self.db, now)
            dm.pop("heard_s_ago", None)
            dm.pop("transport", None)
            out["decoded"] = dm
        elif heard.pgn == ADDRESS_CLAIMED_PGN and len(data) >= 8:
            out["decoded"] = J1939Name.from_bytes(data).describe()
        elif (decoded := self.db.decode(heard.pgn, heard.source, data)) is not None:
            out["decoded"] = decoded
        elif (text := decode_text(heard.pgn, data)) is not None:
            out["text"] = text
        return out

    # -- nodes -----------------------------------------------------------------------------

    def nodes(self) -> dict[str, Any]:
        link = self.link
        note = None
        sent = False
        if link.read_only is None:
            try:
                link.request(ADDRESS_CLAIMED_PGN, GLOBAL, timeout_s=link.response_s)
                sent = True
            except ToolError as exc:
                if exc.code not in (*_FALLBACK, "RATE_LIMITED"):
                    raise
                note = exc.message
        else:
            note = link.read_only
        snapshot = link.nodes()
        heard: dict[int, tuple[float, float, int, dict[int, int]]] = snapshot["nodes"]
        claims: dict[int, tuple[J1939Name, float]] = snapshot["claims"]
        ours = link.address
        now = time.monotonic()
        entries = []
        for address in sorted(set(heard) | set(claims) | ({ours} if ours is not None else set())):
            entry: dict[str, Any] = {"address": address}
            preferred = address_name(address)
            if preferred:
                entry["preferred_for"] = preferred
            if address == ours:
                entry["this_tool"] = True
                entry["name"] = link.name.describe()
            elif address in claims:
                entry["name"] = claims[address][0].describe()
            entry["claimed"] = address in claims or address == ours
            if address in heard:
                _, last, frames, pgns = heard[address]
                entry.update(last_heard_s_ago=age(last, now), frames=frames, pgns_heard=len(pgns))
            entries.append(entry)
        shown, meta = counted(entries, 64)
        result: dict[str, Any] = {"request_sent": sent}
        if note:
            result["note"] = (
                f"no request for address claims was sent ({note}); these are the nodes heard"
            )
        result.update(nodes=shown, **meta)
        cannot = snapshot["cannot_claim"]
        if cannot:
            put(result, "cannot_claim", [n.describe() for n in cannot])
        return result

    # -- DM11 / DM3 ------------------------------------------------------------------------

    def clear(self, which: str, address: int | None) -> dict[str, Any]:
        if which not in CLEARS:
            raise ToolError("INVALID_VALUE", "which must be active or previously_active.")
        service, pgn, dm = CLEARS[which]
        destination = target(address)
        request = ServiceRequest(
            service,
            pgn.to_bytes(3, "little"),
            ecu=None if destination == GLOBAL else f"address {destination}",
            tool="j1939_clear_dtcs",
        )
        head: dict[str, Any] = {"which": which, "service": service, "to": _to(destination)}
        if self.policy.dry_run:
            self.policy.check(request)
            return {**head, "sent": False, "dry_run": True}
        with self.policy.open_audit() as audit:  # AUDIT_FAILED here, before anything is sent
            self.policy.check(request)
            try:
                outcome = self.link.request(
                    pgn, destination, timeout_s=self.settings.request_timeout_s
                )
            except ToolError as exc:  # nothing went out (no address, a replay, the budget)
                audit.write(request, failure_outcome(exc), exc.code)
                raise
            audit_error = audit.write(request, "sent")
        result: dict[str, Any] = {**head, "sent": True}
        acks = sorted(outcome.acks.items())
        put(result, "acknowledged_by", [s for s, a in acks if not a.control])
        refused = [{"source": s, "answer": a.kind} for s, a in acks if a.control]
        if refused:
            put(result, "refused_by", refused)
        if not acks:
            result["note"] = (
                f"the {dm} request went out, but no ECU acknowledged it within "
                f"{outcome.waited_s:g} s; read the codes to see whether they were cleared"
            )
        if audit_error:
            result["audit_error"] = audit_error
        return result
