"""One SendPolicy for every bridge: CAN frames, serial commands, diagnostic services.

Read-only by default; see SendPolicy.
"""

from hwbridge._lazy import lazy_package
from hwbridge.policy.audit import AuditEntry
from hwbridge.policy.consent import ConsentCallback
from hwbridge.policy.requests import CommandRequest, SendKind, SendRequest, ServiceRequest
from hwbridge.policy.send_policy import SendPolicy

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
