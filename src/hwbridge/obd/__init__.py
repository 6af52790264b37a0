"""Vehicle diagnostics: OBD-II (SAE J1979) and read-only UDS (ISO 14229) over ISO-TP on a CAN
bus or through an ELM327, as one MCS driver (`ObdDriver`); DID definitions (TOML) and ODX
descriptions give its ECUs' data identifiers and services names and types."""

from hwbridge._lazy import lazy_package
from hwbridge.obd.database.did_definitions import (
    DidDefinitionError,
    DidDefinitions,
    did_definitions_schema,
    load_did_definitions,
)
from hwbridge.obd.database.odx import OdxError, load_odx
from hwbridge.obd.driver import ObdDriver
from hwbridge.obd.tools import ObdToolDriver
from hwbridge.obd.transport import Ecu, EcuReply, Elm327Adapter, IsoTpObdAdapter, ObdAdapter

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
