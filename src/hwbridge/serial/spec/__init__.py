"""What describes a serial device: the TOML device spec, its models and its loader."""

from hwbridge._lazy import lazy_package
from hwbridge.serial.spec.loader import LoadedSpec, SpecError, load_spec, parse_spec
from hwbridge.serial.spec.models import (
    CommandSpec,
    DeviceSpec,
    ErrorSpec,
    FieldSpec,
    IdentitySpec,
    ParamSpec,
    PortSpec,
    StreamSpec,
)

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
