"""How J1939 travels: the transport protocol for messages longer than 8 bytes."""
