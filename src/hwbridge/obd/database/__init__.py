"""What describes the diagnostic services: the PID table, trouble codes and their generic
descriptions, UDS names (negative responses, data identifiers, services)."""

from hwbridge._lazy import lazy_package
from hwbridge.obd.database.dtcs import decode_dtc, describe_dtc, encode_dtc, parse_dtc
from hwbridge.obd.database.pids import PIDS, Pid, decode_monitor_status, find_pid
from hwbridge.obd.database.uds import decode_did, find_did, nrc_name, policy_service

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
