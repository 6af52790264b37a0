"""How diagnostic requests reach the vehicle: two swappable adapters behind `ObdAdapter`."""

from hwbridge._lazy import lazy_package
from hwbridge.obd.transport.base import Ecu, EcuReply, ObdAdapter
from hwbridge.obd.transport.elm327_adapter import Elm327Adapter
from hwbridge.obd.transport.isotp_adapter import IsoTpObdAdapter

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
