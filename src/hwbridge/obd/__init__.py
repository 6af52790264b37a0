"""Vehicle diagnostics: OBD-II (SAE J1979) and read-only UDS (ISO 14229) over ISO-TP on a CAN
bus or through an ELM327, as one MCS driver (`ObdDriver`)."""

from hwbridge._lazy import lazy_package
from hwbridge.obd.driver import ObdDriver
from hwbridge.obd.tools import ObdToolDriver
from hwbridge.obd.transport import Ecu, EcuReply, Elm327Adapter, IsoTpObdAdapter, ObdAdapter

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
