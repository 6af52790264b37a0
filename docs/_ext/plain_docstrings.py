"""Show hwbridge's docstrings as they are written.

The docstrings are plain text (a summary, then `name: meaning` lines with hanging indents),
not reStructuredText: parsed as RST they would turn into block quotes and stray references.
This extension gives autodoc each docstring as a literal block, so the API reference shows
exactly what `help()` shows, and the build stays free of warnings.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def as_literal_block(  # noqa: PLR0917 (the signature of the Sphinx event)
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Replace `lines` (the docstring, dedented by autodoc) with one literal block."""
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return
    body = ["    " + line if line.strip() else "" for line in lines]
    lines[:] = ["::", "", *body, ""]


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", as_literal_block)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
