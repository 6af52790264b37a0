"""The version of hwbridge, in one place.

The build reads it from here (hatch's dynamic version), so the distribution's metadata,
`hwbridge.__version__`, `hwbridge --version` and the drivers' `DriverMeta.version` agree in
a wheel and in an editable install alike, with no metadata lookup at import.
"""

__version__ = "0.1.0"
