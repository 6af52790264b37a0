"""The CAN bridge: python-can transports, cantools databases, tools an LLM can call."""
