"""The J1939 tools an LLM sees: dm1, dm2, request, nodes, clear_dtcs."""

from hwbridge.j1939.tools.common import J1939Settings
from hwbridge.j1939.tools.tool_driver import J1939ToolDriver

__all__ = ["J1939Settings", "J1939ToolDriver"]
