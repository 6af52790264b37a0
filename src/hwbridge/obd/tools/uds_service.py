"""The UDS (ISO 14229) tools, with the udsoncan library's client over any ObdAdapter.

udsoncan builds the requests and reads the answers (ReadDataByIdentifier,
ReadDTCInformation); `_AdapterConnection` carries them through the diagnostic adapter to
one ECU, physically addressed. A raw request (`uds_request`) that would change an ECU's
state or security is judged by the send policy on its exact bytes first (`uds_0x2E`...).
"""

from __future__ import annotations

import logging
import queue
from typing import Any, cast

import udsoncan
from udsoncan.client import Client
from udsoncan.common.DidCodec import DidCodec
from udsoncan.connections import BaseConnection
from udsoncan.exceptions import (
    InvalidResponseException,
    NegativeResponseException,
    TimeoutException,
    UnexpectedResponseException,
)
from udsoncan.Response import Response
from udsoncan.typing import ClientConfig

from hwbridge.core.models import ToolError
from hwbridge.obd.database.did_definitions import DidDefinitions
from hwbridge.obd.database.dtcs import decode_dtc, describe_dtc
from hwbridge.obd.database.uds import (
    decode_did,
    find_did,
    nrc_name,
    policy_service,
    service_name,
)
from hwbridge.obd.transport.base import Ecu, ObdAdapter, UnansweredRequest
from hwbridge.policy import SendPolicy, ServiceRequest
from hwbridge.policy.outcomes import failure_outcome

__all__ = ["UdsService"]

_LOGGER = "hwbridge.obd"
# udsoncan logs every negative response as an error; with no logging configured Python would
# print those to stderr. They are results here: the client's log goes to the application's
# handlers only (a NullHandler keeps Python's last-resort printer away).
logging.getLogger(f"UdsClient[{_LOGGER}]").addHandler(logging.NullHandler())

_MAX_REQUEST = 4095
_MAY_HAVE_ACTED = "; it may have taken effect. Check before sending it again."
_STATUS_FLAGS = (
    "test_failed",
    "test_failed_this_operation_cycle",
    "pending",
    "confirmed",
    "test_not_completed_since_last_clear",
    "test_failed_since_last_clear",
    "test_not_completed_this_operation_cycle",
    "warning_indicator_requested",
)


class _RawCodec(DidCodec):
    """Every data identifier as its bytes: hwbridge decodes them (decode_did)."""

    def encode(self, *values: Any) -> bytes:
        return bytes(values[0]) if values else b""

    def decode(self, payload: bytes) -> bytes:
        return bytes(payload)

    def __len__(self) -> int:
        raise DidCodec.ReadAllRemainingData


class _AdapterConnection(BaseConnection):
    """udsoncan's connection interface on a diagnostic adapter, for one ECU."""

    def __init__(self, adapter: ObdAdapter, ecu: Ecu, timeout_s: float) -> None:
        super().__init__(ecu.name)
        self.adapter = adapter
        self.ecu = ecu
        self.timeout_s = timeout_s
        self._answers: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._open = False

    def open(self) -> _AdapterConnection:
        self._open = True
        return self

    def close(self) -> None:
        self._open = False

    def is_open(self) -> bool:
        return self._open

    def empty_rxqueue(self) -> None:
        while not self._answers.empty():
            self._answers.get_nowait()

    def specific_send(self, payload: bytes, timeout: float | None = None) -> None:
        for reply in self.adapter.request(bytes(payload), ecu=self.ecu, timeout_s=self.timeout_s):
            if not reply.complete:
                raise ToolError(
                    "INCOMPLETE_RESPONSE",
                    f"The {self.ecu.name} ECU's answer did not finish: {reply.error}.",
                    retryable=True,
                )
            self._answers.put(reply.data)

    def specific_wait_frame(self, timeout: float | None = None) -> bytes | None:
        try:
            return self._answers.get_nowait()  # the adapter waited already
        except queue.Empty:
            raise TimeoutException("no answer") from None  # type: ignore[no-untyped-call]


def _raw_request(text: str) -> bytes:
    """The bytes of a raw request a model wrote; INVALID_VALUE for what it may not send this
    way (not hex, too long, an OBD-II mode, SecurityAccess: its seed and key stay out of the
    conversation, so it goes through uds_unlock)."""
    try:
        payload = bytes.fromhex("".join(text.split()))
    except ValueError:
        raise ToolError("INVALID_VALUE", "request must be hex bytes, e.g. 22 F1 90.") from None
    if not 1 <= len(payload) <= _MAX_REQUEST:
        raise ToolError("INVALID_VALUE", f"A UDS request has 1 to {_MAX_REQUEST} bytes.")
    if payload[0] < 0x10:
        raise ToolError(
            "INVALID_VALUE", "Services below 0x10 are OBD-II modes: use the obd_ tools."
        )
    if payload[0] == 0x27:
        raise ToolError(
            "INVALID_VALUE",
            "SecurityAccess (0x27) goes through uds_unlock, which keeps the seed and the key "
            "out of the conversation; nothing was sent.",
        )
    return payload


def _status(byte: int) -> dict[str, Any]:
    return {
        "byte": f"0x{byte:02X}",
        **{name: bool(byte >> bit & 1) for bit, name in enumerate(_STATUS_FLAGS)},
    }


class UdsService:
    """UDS reads (and policy-gated raw requests) to one ECU at a time."""

    def __init__(
        self,
        adapter: ObdAdapter,
        policy: SendPolicy,
        timeout_s: float = 2.0,
        dids: DidDefinitions | None = None,
    ) -> None:
        self.adapter = adapter
        self.policy = policy
        self.timeout_s = timeout_s
        self.dids = dids

    def _client(self, ecu: Ecu) -> Client:
        settings: dict[str, Any] = dict(udsoncan.configs.default_client_config)
        settings.update(
            data_identifiers={"default": _RawCodec},
            request_timeout=self.timeout_s,
            p2_timeout=self.timeout_s,
            use_server_timing=False,
            logger_name=_LOGGER,
            exception_on_unexpected_response=True,
        )
        config = cast(ClientConfig, settings)
        return Client(_AdapterConnection(self.adapter, ecu, self.timeout_s), config=config)

    def _call(self, ecu: Ecu, what: str, work: Any) -> Any:
        try:
            with self._client(ecu) as client:
                return work(client)
        except NegativeResponseException as exc:
            code = int(exc.response.code or 0)
            raise ToolError(
                "NEGATIVE_RESPONSE",
                f"The {ecu.name} ECU refused {what}: {nrc_name(code)} (0x{code:02X}).",
            ) from None
        except TimeoutException:
            raise ToolError(
                "NO_RESPONSE",
                f"The {ecu.name} ECU ({ecu.address}) did not answer {what}.",
                retryable=True,
            ) from None
        except (InvalidResponseException, UnexpectedResponseException) as exc:
            raise ToolError(
                "INVALID_RESPONSE",
                f"The {ecu.name} ECU answered {what} with something that is "
                f"not a valid response ({type(exc).__name__}).",
            ) from None

    def read_did(self, ecu: Ecu, did_text: str) -> dict[str, Any]:
        defined = self.dids.find(did_text) if self.dids is not None else None
        did = defined.did if defined is not None else find_did(did_text)
        if did is None:
            raise ToolError(
                "INVALID_VALUE",
                f"Not a data identifier: {did_text[:40]!r}. Give 4 hex digits such as F190 or a "
                "name such as VIN.",
            )
        what = f"ReadDataByIdentifier {did:04X}"
        response = self._call(ecu, what, lambda c: c.read_data_by_identifier([did]))
        data = bytes(response.service_data.values.get(did, b""))
        if defined is not None:
            return {"ecu": ecu.name, **defined.decode(data)}
        return {"ecu": ecu.name, **decode_did(did, data[:512])}

    def read_dtcs(self, ecu: Ecu, status_mask: int) -> dict[str, Any]:
        what = f"ReadDTCInformation 0x02 (mask 0x{status_mask:02X})"
        response = self._call(ecu, what, lambda c: c.get_dtc_by_status_mask(status_mask))
        codes = []
        for dtc in response.service_data.dtcs[:256]:
            two = (dtc.id >> 8).to_bytes(2, "big")
            code = describe_dtc(decode_dtc(two))
            codes.append(
                {
                    **code,
                    "failure_type": f"0x{dtc.id & 0xFF:02X}",
                    "status": _status(dtc.status.get_byte_as_int()),
                }
            )
        return {
            "ecu": ecu.name,
            "status_mask": f"0x{status_mask:02X}",
            "count": len(codes),
            "codes": codes,
        }

    def request(self, ecu: Ecu, text: str) -> dict[str, Any]:
        payload = _raw_request(text)
        service = policy_service(payload)
        if service is None:
            replies = self.adapter.request(payload, ecu=ecu, timeout_s=self.timeout_s)
            audit_error = None
        else:
            request = ServiceRequest(service, payload, ecu=ecu.name, tool="uds_request")
            if self.policy.dry_run:
                self.policy.check(request)
                return {"sent": False, "dry_run": True, "service": service_name(payload[0])}
            with self.policy.open_audit() as audit:
                self.policy.check(request)
                try:
                    replies = self.adapter.request(payload, ecu=ecu, timeout_s=self.timeout_s)
                except UnansweredRequest as exc:  # it went out and may have taken effect
                    audit_error = audit.write(request, "sent", exc.code)
                    return {
                        "ecu": ecu.name,
                        "service": service_name(payload[0]),
                        "sent": True,
                        "answered": False,
                        "note": f"{exc.code}: the request went out but its answer did not "
                        f"finish{_MAY_HAVE_ACTED}",
                        **({"audit_error": audit_error} if audit_error else {}),
                    }
                except ToolError as exc:
                    audit.write(request, failure_outcome(exc), exc.code)
                    raise
                else:
                    audit_error = audit.write(request, "sent")
        result: dict[str, Any] = {
            "ecu": ecu.name,
            "service": service_name(payload[0]),
            "sent": True,
        }
        if audit_error:
            result["audit_error"] = audit_error
        acted = _MAY_HAVE_ACTED if service is not None else "."
        if not replies:
            result.update(
                answered=False, note=f"the request went out but the ECU did not answer{acted}"
            )
            return result
        reply = replies[0]
        if not reply.complete and reply.request_cut:
            # the ECU's flow control stopped it: ISO-TP discards an unfinished message
            note = "only part of the request went out (the ECU stopped it part way)"
            note += "; check before sending it again." if service is not None else "."
            result.update(answered=False, problem=reply.error, note=note)
            return result
        if not reply.complete:
            note = f"the request went out but its answer did not finish{acted}"
            result.update(answered=False, problem=reply.error, note=note)
            return result
        parsed = Response.from_payload(reply.data)
        result["answered"] = True
        if parsed.valid and not parsed.positive and parsed.code is not None:
            code = int(parsed.code)
            result.update(positive=False, nrc=f"0x{code:02X}", nrc_name=nrc_name(code))
        else:
            positive = len(reply.data) > 0 and reply.data[0] == payload[0] + 0x40  # none: 0xC0+
            result.update(positive=positive)
            result["data"] = reply.data[:512].hex(" ").upper()
        return result
