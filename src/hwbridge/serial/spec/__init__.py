"""What describes a serial device: the TOML device spec, its models and its loader."""

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

__all__ = [
    "CommandSpec",
    "DeviceSpec",
    "ErrorSpec",
    "FieldSpec",
    "IdentitySpec",
    "LoadedSpec",
    "ParamSpec",
    "PortSpec",
    "SpecError",
    "StreamSpec",
    "load_spec",
    "parse_spec",
]
