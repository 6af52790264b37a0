"""Driver trust tests use the in-process `hwbridge` runner of the CLI tests."""

from tests.cli.conftest import run  # noqa: F401  (the fixture)
