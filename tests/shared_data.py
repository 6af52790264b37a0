"""The reference data beside the checkout (../shared): real databases and captures that some
tests read when they are there. A test that needs them is marked `@needs_shared` (a fixture
calls `require_shared()`), and without them it is skipped with this one reason. A parametrize
over files of ../shared takes `shared_params(...)`: without the data, one parameter skipped with
the same reason instead of an error at collection or pytest's own words for an empty list."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"
SHARED_REASON = "../shared/data is not beside the checkout"
HAVE_SHARED = DATA.is_dir()
needs_shared = pytest.mark.skipif(not HAVE_SHARED, reason=SHARED_REASON)


def require_shared() -> None:
    """Skip the running test (or fixture) with the one reason when ../shared/data is missing."""
    if not HAVE_SHARED:
        pytest.skip(SHARED_REASON)


def shared_files(folder: str, *suffixes: str) -> list[Path]:
    """The files of ../shared/data/`folder` with one of `suffixes` (all files when none), sorted;
    an empty list when the data is not there."""
    where = DATA / folder
    if not where.is_dir():
        return []
    return sorted(
        p for p in where.iterdir() if p.is_file() and (not suffixes or p.suffix in suffixes)
    )


def shared_params(values: Iterable[Any]) -> list[Any]:
    """`values` for a parametrize over ../shared; without the data, one parameter that is
    skipped with the one reason."""
    if HAVE_SHARED:
        return list(values)
    return [pytest.param(None, id="no-shared", marks=pytest.mark.skip(reason=SHARED_REASON))]
