"""Chat clients for `Runner`, each over its provider's official SDK (an optional extra).

    pip install mcs-hwbridge[openai]      # OpenAIClient (and any OpenAI-compatible server)
    pip install mcs-hwbridge[anthropic]   # AnthropicClient
    pip install mcs-hwbridge[ollama]      # OllamaClient
    pip install mcs-hwbridge[llm]         # all three

Importing this package needs none of them; a client whose SDK is missing raises
`MissingExtraError` (an ImportError) naming the extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_package
from hwbridge.core.runner import ProviderError
from hwbridge.llm._base import MissingExtraError

if TYPE_CHECKING:
    from hwbridge.llm.anthropic_client import AnthropicClient
    from hwbridge.llm.ollama_client import OllamaClient
    from hwbridge.llm.openai_client import OpenAIClient

# the public names: the imports above (written once), the clients loaded on first use
__getattr__, __dir__ = lazy_package(globals())
