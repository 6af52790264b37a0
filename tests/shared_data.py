"""The reference data beside the checkout (../shared): real databases and captures that some
tests read when they are there. A test that needs them is marked `@needs_shared`, and without
them it is skipped with this one reason."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_REASON = "../shared/data is not beside the checkout"
needs_shared = pytest.mark.skipif(not (SHARED / "data").is_dir(), reason=SHARED_REASON)
