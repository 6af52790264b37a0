"""`with driver:` for every driver, adapter and port: one definition of the context manager,
so that leaving the block always means the same thing (close, idempotently)."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing:
    """A base for whatever holds a bus, a port or a file: `with x:` calls `x.close()`."""

    def close(self) -> None:
        """Release what this holds; idempotent. Subclasses say what."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
