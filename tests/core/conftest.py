from __future__ import annotations

import pytest

from tests.core.drivers import Thermostat


@pytest.fixture
def driver() -> Thermostat:
    return Thermostat()
