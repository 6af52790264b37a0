"""The capture readers' tests share the captures tests' drives and databases."""

from tests.captures.conftest import fleet_dbc

__all__ = ["fleet_dbc"]
