"""One SendPolicy for every bridge: CAN frames, serial commands, diagnostic services.

Read-only by default; see SendPolicy.
"""

from hwbridge.policy.audit import AuditEntry
from hwbridge.policy.consent import ConsentCallback
from hwbridge.policy.requests import CommandRequest, SendKind, SendRequest, ServiceRequest
from hwbridge.policy.send_policy import SendPolicy

__all__ = [
    "AuditEntry",
    "CommandRequest",
    "ConsentCallback",
    "SendKind",
    "SendPolicy",
    "SendRequest",
    "ServiceRequest",
]
