"""The simulated engine ECU described in ODX (ASAM MCD-2 D, ISO 22901), as its maker would ship
it: `write_engine_pdx(path)` writes `HWB_ECM_0417.pdx` (the name its DID F19E reports), a zip
of an index, a comparam subset with its CAN ids (0x7E0 / 0x7E8) and the diagnostic layers.

The base variant `HWB_ECM` describes what `firmware_sim.uds_server` answers: reads of the idle
speed target 0x0101 (rpm, 600-1000), the coolant temperature (F405, degC), the active session
(F186) and the identification DIDs (VIN, serial, part and software numbers), the write of the
idle speed target, DiagnosticSessionControl, ECUReset, the self test 0x0203 (start and
results), TesterPresent, and SecurityAccess's seed request. The ECU variant `HWB_ECM_0417`
inherits all of it. The XML is written by hand (no library needed to describe an ECU), in
ODX 2.2; hwbridge reads it with odxtools.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Final

__all__ = ["ENGINE_PDX_NAME", "engine_odx_files", "write_engine_pdx"]

ENGINE_PDX_NAME: Final = "HWB_ECM_0417.pdx"
_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<ODX MODEL-VERSION="2.2.0" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
)
_U8, _U16, _U24 = 8, 16, 24


def _coded(bits: int, kind: str = "A_UINT32") -> str:
    return (
        f'<DIAG-CODED-TYPE BASE-DATA-TYPE="{kind}" xsi:type="STANDARD-LENGTH-TYPE">'
        f"<BIT-LENGTH>{bits}</BIT-LENGTH></DIAG-CODED-TYPE>"
    )


def _const(name: str, byte: int, value: int, bits: int = _U8) -> str:
    return (
        f'<PARAM xsi:type="CODED-CONST"><SHORT-NAME>{name}</SHORT-NAME>'
        f"<BYTE-POSITION>{byte}</BYTE-POSITION><CODED-VALUE>{value}</CODED-VALUE>"
        f"{_coded(bits)}</PARAM>"
    )


def _value(name: str, byte: int, dop: str, default: str | None = None) -> str:
    fallback = f"<PHYSICAL-DEFAULT-VALUE>{default}</PHYSICAL-DEFAULT-VALUE>" if default else ""
    return (
        f'<PARAM xsi:type="VALUE"><SHORT-NAME>{name}</SHORT-NAME>'
        f'<BYTE-POSITION>{byte}</BYTE-POSITION>{fallback}<DOP-REF ID-REF="ECM.DOP.{dop}"/>'
        "</PARAM>"
    )


def _echo(name: str, byte: int, at: int, length: int) -> str:
    """A response parameter that repeats `length` bytes of the request from `at`."""
    return (
        f'<PARAM xsi:type="MATCHING-REQUEST-PARAM"><SHORT-NAME>{name}</SHORT-NAME>'
        f"<BYTE-POSITION>{byte}</BYTE-POSITION><REQUEST-BYTE-POS>{at}</REQUEST-BYTE-POS>"
        f"<BYTE-LENGTH>{length}</BYTE-LENGTH></PARAM>"
    )


def _table(name: str, rows: dict[int, str], bits: int = _U8) -> str:
    scales = "".join(
        f"<COMPU-SCALE><LOWER-LIMIT>{k}</LOWER-LIMIT><UPPER-LIMIT>{k}</UPPER-LIMIT>"
        f"<COMPU-CONST><VT>{label}</VT></COMPU-CONST></COMPU-SCALE>"
        for k, label in rows.items()
    )
    return (
        f'<DATA-OBJECT-PROP ID="ECM.DOP.{name}"><SHORT-NAME>{name}</SHORT-NAME>'
        "<COMPU-METHOD><CATEGORY>TEXTTABLE</CATEGORY><COMPU-INTERNAL-TO-PHYS><COMPU-SCALES>"
        f"{scales}</COMPU-SCALES></COMPU-INTERNAL-TO-PHYS></COMPU-METHOD>{_coded(bits)}"
        '<PHYSICAL-TYPE BASE-DATA-TYPE="A_UNICODE2STRING"/></DATA-OBJECT-PROP>'
    )


def _number(
    name: str,
    bits: int,
    *,
    unit: str | None = None,
    linear: tuple[float, float] | None = None,
    limits: tuple[float, float] | None = None,
) -> str:
    if linear is None:
        method = "<CATEGORY>IDENTICAL</CATEGORY>"
        physical = "A_UINT32"
    else:
        offset, factor = linear
        method = (
            "<CATEGORY>LINEAR</CATEGORY><COMPU-INTERNAL-TO-PHYS><COMPU-SCALES><COMPU-SCALE>"
            f"<COMPU-RATIONAL-COEFFS><COMPU-NUMERATOR><V>{offset:g}</V><V>{factor:g}</V>"
            "</COMPU-NUMERATOR></COMPU-RATIONAL-COEFFS></COMPU-SCALE></COMPU-SCALES>"
            "</COMPU-INTERNAL-TO-PHYS>"
        )
        physical = "A_INT32" if offset < 0 else "A_UINT32"
    constr = ""
    if limits is not None:
        low, high = limits
        constr = (
            f"<PHYS-CONSTR><LOWER-LIMIT>{low:g}</LOWER-LIMIT>"
            f"<UPPER-LIMIT>{high:g}</UPPER-LIMIT></PHYS-CONSTR>"
        )
    unit_ref = f'<UNIT-REF ID-REF="ECM.UNIT.{unit}"/>' if unit else ""
    return (
        f'<DATA-OBJECT-PROP ID="ECM.DOP.{name}"><SHORT-NAME>{name}</SHORT-NAME>'
        f"<COMPU-METHOD>{method}</COMPU-METHOD>{_coded(bits)}"
        f'<PHYSICAL-TYPE BASE-DATA-TYPE="{physical}"/>{constr}{unit_ref}</DATA-OBJECT-PROP>'
    )


def _text(name: str, most: int) -> str:
    return (
        f'<DATA-OBJECT-PROP ID="ECM.DOP.{name}"><SHORT-NAME>{name}</SHORT-NAME>'
        "<COMPU-METHOD><CATEGORY>IDENTICAL</CATEGORY></COMPU-METHOD>"
        '<DIAG-CODED-TYPE BASE-DATA-TYPE="A_ASCIISTRING" TERMINATION="END-OF-PDU" '
        f'xsi:type="MIN-MAX-LENGTH-TYPE"><MAX-LENGTH>{most}</MAX-LENGTH>'
        "<MIN-LENGTH>0</MIN-LENGTH></DIAG-CODED-TYPE>"
        '<PHYSICAL-TYPE BASE-DATA-TYPE="A_ASCIISTRING"/></DATA-OBJECT-PROP>'
    )


_DOPS = (
    _number("IdleSpeedTarget", _U16, unit="rpm", limits=(600, 1000)),
    _number("CoolantTemperature", _U8, unit="degC", linear=(-40, 1)),
    _number("TimingMs", _U16, unit="ms"),
    _number("TimingTensMs", _U16, unit="ms", linear=(0, 10)),
    _number("Byte", _U8),
    _table("SessionType", {1: "default", 2: "programming", 3: "extended"}),
    _table("ResetType", {1: "hard", 2: "keyOffOn", 3: "soft"}),
    _table("RoutineStatus", {0: "passed", 1: "inProgress", 2: "stopped"}),
    _table(
        "ResponseCode",
        {
            0x11: "serviceNotSupported",
            0x12: "subFunctionNotSupported",
            0x13: "incorrectMessageLengthOrInvalidFormat",
            0x22: "conditionsNotCorrect",
            0x24: "requestSequenceError",
            0x31: "requestOutOfRange",
            0x33: "securityAccessDenied",
            0x7F: "serviceNotSupportedInActiveSession",
        },
    ),
    _text("Ascii", 64),
)

_UNITS = (
    '<UNIT-SPEC><UNITS><UNIT ID="ECM.UNIT.rpm"><SHORT-NAME>rpm</SHORT-NAME>'
    "<DISPLAY-NAME>rpm</DISPLAY-NAME></UNIT>"
    '<UNIT ID="ECM.UNIT.degC"><SHORT-NAME>degC</SHORT-NAME><DISPLAY-NAME>degC</DISPLAY-NAME>'
    '</UNIT><UNIT ID="ECM.UNIT.ms"><SHORT-NAME>ms</SHORT-NAME><DISPLAY-NAME>ms</DISPLAY-NAME>'
    "</UNIT></UNITS></UNIT-SPEC>"
)

# (service, description, semantic, request params, positive response params)
_READS = {
    "IdleSpeedTarget": (0x0101, "IdleSpeedTarget", "the engine's idle speed target"),
    "CoolantTemperature": (0xF405, "CoolantTemperature", "the engine coolant temperature"),
    "ActiveSession": (0xF186, "SessionType", "the active diagnostic session"),
    "VIN": (0xF190, "Ascii", "the vehicle identification number"),
    "ECUSerialNumber": (0xF18C, "Ascii", "the ECU's serial number"),
    "SparePartNumber": (0xF187, "Ascii", "the maker's spare part number"),
    "SoftwareVersion": (0xF189, "Ascii", "the ECU software version"),
}


def _services() -> list[tuple[str, str, str, str, str]]:
    out = []
    for name, (did, dop, what) in _READS.items():
        request = _const("SID_RQ", 0, 0x22) + _const("DID", 1, did, _U16)
        response = _const("SID_PR", 0, 0x62) + _const("DID", 1, did, _U16) + _value(name, 3, dop)
        out.append((f"Read_{name}", f"Read {what}.", "DATA", request, response))
    out.append(
        (
            "Write_IdleSpeedTarget",
            "Write the engine's idle speed target (extended session, unlocked).",
            "CALIBRATION",
            _const("SID_RQ", 0, 0x2E)
            + _const("DID", 1, 0x0101, _U16)
            + _value("IdleSpeedTarget", 3, "IdleSpeedTarget"),
            _const("SID_PR", 0, 0x6E) + _const("DID", 1, 0x0101, _U16),
        )
    )
    out.append(
        (
            "DiagnosticSessionControl",
            "Enter a diagnostic session.",
            "SESSION",
            _const("SID_RQ", 0, 0x10) + _value("session", 1, "SessionType"),
            _const("SID_PR", 0, 0x50)
            + _value("session", 1, "SessionType")
            + _value("P2", 2, "TimingMs")
            + _value("P2Star", 4, "TimingTensMs"),
        )
    )
    out.append(
        (
            "ECUReset",
            "Reset the ECU (extended session).",
            "ECU-RESET",
            _const("SID_RQ", 0, 0x11) + _value("resetType", 1, "ResetType", "hard"),
            _const("SID_PR", 0, 0x51) + _value("resetType", 1, "ResetType"),
        )
    )
    for action, sub in (("Start", 1), ("Results", 3)):
        out.append(
            (
                f"{action}_SelfTest",
                f"{action} of the engine self test, routine 0203.",
                "ROUTINE",
                _const("SID_RQ", 0, 0x31)
                + _const("RoutineControlType", 1, sub)
                + _const("RID", 2, 0x0203, _U16),
                _const("SID_PR", 0, 0x71)
                + _const("RoutineControlType", 1, sub)
                + _const("RID", 2, 0x0203, _U16)
                + _value("status", 4, "RoutineStatus"),
            )
        )
    out.append(
        (
            "TesterPresent",
            "Tell the ECU a tester is present.",
            "TESTERPRESENT",
            _const("SID_RQ", 0, 0x3E) + _const("zero", 1, 0),
            _const("SID_PR", 0, 0x7E) + _const("zero", 1, 0),
        )
    )
    out.append(
        (
            "SecurityAccess_RequestSeed",
            "Ask for a security access seed (level 1).",
            "SECURITY",
            _const("SID_RQ", 0, 0x27) + _const("level", 1, 1),
            _const("SID_PR", 0, 0x67) + _const("level", 1, 1) + _value("seed", 2, "Ascii"),
        )
    )
    return out


def _layer() -> str:
    comms, requests, responses = [], [], []
    for name, desc, semantic, request, response in _services():
        comms.append(
            f'<DIAG-SERVICE ID="ECM.DS.{name}" SEMANTIC="{semantic}">'
            f"<SHORT-NAME>{name}</SHORT-NAME><DESC><p>{desc}</p></DESC>"
            f'<REQUEST-REF ID-REF="ECM.RQ.{name}"/>'
            f'<POS-RESPONSE-REFS><POS-RESPONSE-REF ID-REF="ECM.PR.{name}"/></POS-RESPONSE-REFS>'
            '<NEG-RESPONSE-REFS><NEG-RESPONSE-REF ID-REF="ECM.NR.general"/></NEG-RESPONSE-REFS>'
            "</DIAG-SERVICE>"
        )
        requests.append(
            f'<REQUEST ID="ECM.RQ.{name}"><SHORT-NAME>RQ_{name}</SHORT-NAME>'
            f"<PARAMS>{request}</PARAMS></REQUEST>"
        )
        responses.append(
            f'<POS-RESPONSE ID="ECM.PR.{name}"><SHORT-NAME>PR_{name}</SHORT-NAME>'
            f"<PARAMS>{response}</PARAMS></POS-RESPONSE>"
        )
    negative = (
        '<NEG-RESPONSE ID="ECM.NR.general"><SHORT-NAME>NR_general</SHORT-NAME><PARAMS>'
        + _const("SID_NR", 0, 0x7F)
        + _echo("SIDRQ_NR", 1, 0, 1)
        + _value("NRC", 2, "ResponseCode")
        + "</PARAMS></NEG-RESPONSE>"
    )
    comparams = (
        '<COMPARAM-REFS><COMPARAM-REF ID-REF="HWB_ISO_15765_2.CP_UniqueRespIdTable" '
        'DOCREF="HWB_ISO_15765_2" DOCTYPE="COMPARAM-SUBSET"><COMPLEX-VALUE>'
        "<SIMPLE-VALUE>2016</SIMPLE-VALUE><SIMPLE-VALUE>2024</SIMPLE-VALUE>"
        "</COMPLEX-VALUE></COMPARAM-REF></COMPARAM-REFS>"
    )
    return (
        _HEAD + '<DIAG-LAYER-CONTAINER ID="DLC.HWB_ECM"><SHORT-NAME>HWB_ECM</SHORT-NAME>'
        "<BASE-VARIANTS>"
        '<BASE-VARIANT ID="ECM.BV"><SHORT-NAME>HWB_ECM</SHORT-NAME>'
        "<DESC><p>hwbridge simulated engine control module</p></DESC>"
        f"{comparams}"
        f"<DIAG-DATA-DICTIONARY-SPEC><DATA-OBJECT-PROPS>{''.join(_DOPS)}</DATA-OBJECT-PROPS>"
        f"{_UNITS}</DIAG-DATA-DICTIONARY-SPEC>"
        f"<DIAG-COMMS>{''.join(comms)}</DIAG-COMMS>"
        f"<REQUESTS>{''.join(requests)}</REQUESTS>"
        f"<POS-RESPONSES>{''.join(responses)}</POS-RESPONSES>"
        f"<NEG-RESPONSES>{negative}</NEG-RESPONSES>"
        "</BASE-VARIANT></BASE-VARIANTS>"
        '<ECU-VARIANTS><ECU-VARIANT ID="ECM.EV.0417"><SHORT-NAME>HWB_ECM_0417</SHORT-NAME>'
        "<DESC><p>engine control module, software 4.1.7</p></DESC>"
        '<PARENT-REFS><PARENT-REF ID-REF="ECM.BV" xsi:type="BASE-VARIANT-REF"/></PARENT-REFS>'
        "</ECU-VARIANT></ECU-VARIANTS>"
        "</DIAG-LAYER-CONTAINER></ODX>\n"
    )


def _comparams() -> str:
    def comparam(name: str, default: int) -> str:
        return (
            f'<COMPARAM ID="HWB_ISO_15765_2.{name}" PARAM-CLASS="UNIQUE_ID" CPTYPE="STANDARD" '
            f'CPUSAGE="ECU-COMM"><SHORT-NAME>{name}</SHORT-NAME>'
            f"<PHYSICAL-DEFAULT-VALUE>{default}</PHYSICAL-DEFAULT-VALUE>"
            '<DATA-OBJECT-PROP-REF ID-REF="HWB_ISO_15765_2.DOP_CanId"/></COMPARAM>'
        )

    return (
        _HEAD + '<COMPARAM-SUBSET ID="HWB_ISO_15765_2" CATEGORY="TRANS">'
        "<SHORT-NAME>HWB_ISO_15765_2</SHORT-NAME>"
        "<COMPLEX-COMPARAMS>"
        '<COMPLEX-COMPARAM ID="HWB_ISO_15765_2.CP_UniqueRespIdTable" PARAM-CLASS="UNIQUE_ID" '
        'CPTYPE="STANDARD" CPUSAGE="ECU-COMM" ALLOW-MULTIPLE-VALUES="true">'
        "<SHORT-NAME>CP_UniqueRespIdTable</SHORT-NAME>"
        + comparam("CP_CanPhysReqId", 0x7E0)
        + comparam("CP_CanRespUSDTId", 0x7E8)
        + "</COMPLEX-COMPARAM></COMPLEX-COMPARAMS>"
        '<DATA-OBJECT-PROPS><DATA-OBJECT-PROP ID="HWB_ISO_15765_2.DOP_CanId">'
        "<SHORT-NAME>DOP_CanId</SHORT-NAME>"
        "<COMPU-METHOD><CATEGORY>IDENTICAL</CATEGORY></COMPU-METHOD>"
        f'{_coded(32)}<PHYSICAL-TYPE BASE-DATA-TYPE="A_UINT32"/></DATA-OBJECT-PROP>'
        "</DATA-OBJECT-PROPS>"
        "</COMPARAM-SUBSET></ODX>\n"
    )


def _index(files: list[str]) -> str:
    listed = "".join(f"<FILE>{name}</FILE>" for name in files)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<CATALOG F-DTD-VERSION="ODX-2.2.0">'
        "<SHORT-NAME>HWB_ECM_0417</SHORT-NAME><ABLOCKS><ABLOCK>"
        f"<SHORT-NAME>diagnostic_data</SHORT-NAME><FILES>{listed}</FILES>"
        "</ABLOCK></ABLOCKS></CATALOG>\n"
    )


def engine_odx_files() -> dict[str, str]:
    """The PDX's members by name: the ODX documents and the index."""
    files = {"HWB_ISO_15765_2.odx-cs": _comparams(), "HWB_ECM.odx-d": _layer()}
    return {"index.xml": _index(list(files)), **files}


def write_engine_pdx(path: str | Path) -> Path:
    """Write the engine ECU's PDX to `path` (a folder: `HWB_ECM_0417.pdx` in it)."""
    target = Path(path)
    if target.is_dir():
        target = target / ENGINE_PDX_NAME
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as pdx:
        for name, text in engine_odx_files().items():
            info = zipfile.ZipInfo(name, date_time=(2024, 3, 15, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            pdx.writestr(info, text)
    return target
