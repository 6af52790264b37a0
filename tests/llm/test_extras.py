"""Each client is an optional extra: without its SDK, the error names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys
sys.modules[{module!r}] = None  # as if the SDK were not installed
import hwbridge.llm                # the package itself needs no SDK
try:
    from hwbridge.llm import {client}
except ImportError as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize(
    ("module", "client"),
    [("openai", "OpenAIClient"), ("anthropic", "AnthropicClient"), ("ollama", "OllamaClient")],
)
def test_a_missing_sdk_names_its_extra(module: str, client: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(module=module, client=client)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    assert out == (
        f"MissingExtraError {client} needs the {module} package: "
        f"pip install mcs-hwbridge[{module}] (or mcs-hwbridge[llm] for every client)"
    )


def test_core_imports_no_provider_sdk() -> None:
    code = (
        "import sys, hwbridge, hwbridge.core.runner, hwbridge.llm;"
        "print(sorted(m for m in ('openai', 'anthropic', 'ollama') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.strip() == "[]"


def test_unknown_names_are_attribute_errors() -> None:
    import hwbridge.llm

    with pytest.raises(AttributeError):
        _ = hwbridge.llm.GeminiClient
