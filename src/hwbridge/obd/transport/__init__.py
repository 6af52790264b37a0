"""How diagnostic requests reach the vehicle: two swappable adapters behind `ObdAdapter`."""

from hwbridge.obd.transport.base import Ecu, EcuReply, ObdAdapter
from hwbridge.obd.transport.elm327_adapter import Elm327Adapter
from hwbridge.obd.transport.isotp_adapter import IsoTpObdAdapter

__all__ = ["Ecu", "EcuReply", "Elm327Adapter", "IsoTpObdAdapter", "ObdAdapter"]
