"""hwbridge.core resolves its names on first use: a module of the core loads without the rest
(ToolError without pydantic), and the package still offers every name it did."""

from __future__ import annotations

import pickle
import subprocess
import sys

from hwbridge import core


def test_every_name_of_the_core_resolves_and_is_listed() -> None:
    for name in core.__all__:
        assert getattr(core, name) is not None, name
    assert set(core.__all__) <= set(dir(core))


def test_tool_error_is_one_class_wherever_it_is_imported_from() -> None:
    from hwbridge import ToolError as top
    from hwbridge.core.errors import ToolError
    from hwbridge.core.models import ToolError as from_models

    assert ToolError is from_models is core.ToolError is top
    error = pickle.loads(pickle.dumps(ToolError("QUERY_FAILED", "x", retryable=True)))
    assert (type(error), error.code, error.retryable) == (ToolError, "QUERY_FAILED", True)


def test_raising_a_tool_error_loads_neither_pydantic_nor_the_rest_of_the_core() -> None:
    code = (
        "import sys; from hwbridge.core.errors import ToolError; ToolError('X', 'y');"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m.startswith('hwbridge.core.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['hwbridge.core.errors', 'hwbridge.core.jsonsafe']"
