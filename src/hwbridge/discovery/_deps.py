"""Discovery computes with numpy; it is an optional extra, named plainly when it is missing."""

from __future__ import annotations

__all__ = ["EXTRA_HINT", "require_numpy"]

EXTRA_HINT = "pip install 'mcs-hwbridge[discovery]'"


def require_numpy() -> None:
    """Raise ImportError naming the `discovery` extra when numpy is not installed."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise ImportError(
            f"signal discovery needs numpy, which is not installed: {EXTRA_HINT}"
        ) from None
