"""`python -m firmware_sim`: see `firmware_sim.cli`."""

import sys
from types import ModuleType
from typing import cast

# python-can imports asammdf (and with it pandas) for MF4 logs whenever it is installed:
# 0.3-0.4 s of a start that must stay under one second, for a format the simulator never
# reads. None in sys.modules makes that import fail fast, in this process only;
# `cli.main` called from elsewhere is unaffected.
sys.modules.setdefault("asammdf", cast(ModuleType, None))

from firmware_sim.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
