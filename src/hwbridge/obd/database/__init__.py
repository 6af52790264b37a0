"""What describes the diagnostic services: the PID table, trouble codes and their generic
descriptions, UDS names (negative responses, data identifiers, services)."""

from hwbridge.obd.database.dtcs import decode_dtc, describe_dtc, encode_dtc, parse_dtc
from hwbridge.obd.database.pids import PIDS, Pid, decode_monitor_status, find_pid
from hwbridge.obd.database.uds import decode_did, find_did, nrc_name, policy_service

__all__ = [
    "PIDS",
    "Pid",
    "decode_did",
    "decode_dtc",
    "decode_monitor_status",
    "describe_dtc",
    "encode_dtc",
    "find_did",
    "find_pid",
    "nrc_name",
    "parse_dtc",
    "policy_service",
]
