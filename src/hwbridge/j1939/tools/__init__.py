"""The J1939 tools an LLM sees: dm1, dm2, request, nodes, clear_dtcs."""

from hwbridge._lazy import lazy_package
from hwbridge.j1939.tools.common import J1939Settings
from hwbridge.j1939.tools.tool_driver import J1939ToolDriver

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
