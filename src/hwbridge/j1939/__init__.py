"""SAE J1939 for trucks, buses and machines: diagnostics (DM1, DM2), the transport protocol,
requests and the nodes on the bus."""
