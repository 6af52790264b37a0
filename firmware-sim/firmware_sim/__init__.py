"""Simulated ECUs and devices, reachable over real transports (python-can, TCP, ptys)."""
