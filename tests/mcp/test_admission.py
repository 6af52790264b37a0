"""Which connections the HTTP server closes to make room: the unproven, oldest first, the
client's own before anyone's; never one that has shown the token."""

from __future__ import annotations

import pytest

from hwbridge.mcp import HttpLimits
from hwbridge.mcp.admission import Admission


class Conn:
    def __init__(self, peer: str, heard: bool = True) -> None:
        self.peer = peer
        self.heard = heard
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True


def admitted(admission: Admission, *peers: str) -> list[Conn]:
    conns = [Conn(peer) for peer in peers]
    for conn in conns:
        assert admission.admit(conn)
    return conns


def test_a_client_beyond_its_cap_closes_its_own_oldest() -> None:
    admission = Admission(max_connections=8, max_unproven_per_client=3)
    other = admitted(admission, "10.0.0.2")
    mine = admitted(admission, "10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.1")
    assert [c.evicted for c in mine] == [True, False, False, False]
    assert not other[0].evicted
    assert len(admission) == 4 and admission.evicted == 1


def test_a_full_server_closes_the_oldest_unproven_of_anyone() -> None:
    admission = Admission(max_connections=4, max_unproven_per_client=4)
    first, second, third = admitted(admission, "10.0.0.1", "10.0.0.2", "10.0.0.3")
    admission.prove(first)
    (fourth,) = admitted(admission, "10.0.0.4")
    (fifth,) = admitted(admission, "10.0.0.5")  # full: the oldest unproven is second
    assert [c.evicted for c in (first, second, third, fourth, fifth)] == [
        False,
        True,
        False,
        False,
        False,
    ]
    assert len(admission) == 4


def test_proven_connections_are_never_closed_to_make_room() -> None:
    admission = Admission(max_connections=2, max_unproven_per_client=1)
    held = admitted(admission, "127.0.0.1", "127.0.0.1")  # the second evicts the first
    assert held[0].evicted
    admission.prove(held[1])
    (newer,) = admitted(admission, "127.0.0.1")
    assert admission.is_proven(held[1]) and not held[1].evicted
    admission.prove(newer)
    late = Conn("127.0.0.1")
    assert not admission.admit(late)  # proven ones alone fill it: refused
    assert admission.refused == 1 and not held[1].evicted and not newer.evicted
    admission.leave(newer)
    admission.leave(newer)  # closing twice is harmless
    assert admission.admit(late) and len(admission) == 2


def test_a_connection_not_read_yet_goes_after_those_that_sent_something() -> None:
    admission = Admission(max_connections=8, max_unproven_per_client=3)
    unread = Conn("127.0.0.1", heard=False)  # accepted in a batch, not read yet
    assert admission.admit(unread)
    older, newer = admitted(admission, "127.0.0.1", "127.0.0.1")
    admitted(admission, "127.0.0.1", "127.0.0.1")
    assert [unread.evicted, older.evicted, newer.evicted] == [False, True, True]

    admission = Admission(max_connections=8, max_unproven_per_client=2)
    batch = [Conn("127.0.0.1", heard=False) for _ in range(3)]
    assert all(admission.admit(conn) for conn in batch)
    assert [c.evicted for c in batch] == [True, False, False]  # none read: the oldest


def test_proving_a_closed_connection_does_not_hold_it() -> None:
    admission = Admission(max_connections=2, max_unproven_per_client=2)
    (conn,) = admitted(admission, "127.0.0.1")
    admission.leave(conn)
    admission.prove(conn)
    assert len(admission) == 0 and not admission.is_proven(conn)


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ({"read_timeout_s": 0}, "read_timeout_s must be above 0"),
        ({"read_timeout_s": float("nan")}, "read_timeout_s must be above 0"),
        ({"max_connections": 8, "max_unproven_per_client": 9}, "max_unproven_per_client <="),
        ({"max_unproven_per_client": 0}, "1 <= max_unproven_per_client"),
    ],
)
def test_limits_that_cannot_work_are_refused(limits: dict[str, float], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        HttpLimits(**limits)  # type: ignore[arg-type]
