"""Chat clients for `Runner`, each over its provider's official SDK (an optional extra).

    pip install mcs-hwbridge[openai]      # OpenAIClient (and any OpenAI-compatible server)
    pip install mcs-hwbridge[anthropic]   # AnthropicClient
    pip install mcs-hwbridge[ollama]      # OllamaClient
    pip install mcs-hwbridge[llm]         # all three

Importing this package needs none of them; a client whose SDK is missing raises
`MissingExtraError` (an ImportError) naming the extra to install.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hwbridge.core.runner import ProviderError
from hwbridge.llm._base import MissingExtraError

if TYPE_CHECKING:
    from hwbridge.llm.anthropic_client import AnthropicClient
    from hwbridge.llm.ollama_client import OllamaClient
    from hwbridge.llm.openai_client import OpenAIClient

__all__ = ["AnthropicClient", "MissingExtraError", "OllamaClient", "OpenAIClient", "ProviderError"]

_CLIENTS = {
    "OpenAIClient": "hwbridge.llm.openai_client",
    "AnthropicClient": "hwbridge.llm.anthropic_client",
    "OllamaClient": "hwbridge.llm.ollama_client",
}


def __getattr__(name: str) -> Any:
    module = _CLIENTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hwbridge.llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
