"""Which connections the HTTP server closes to make room: the unproven, oldest first, the
client's own before anyone's; the silent ones apart, never while young; one that has shown
the token only for another that has, and only while idle or streaming."""

from __future__ import annotations

import pytest

from hwbridge.mcp import HttpLimits
from hwbridge.mcp.admission import Admission


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Conn:
    def __init__(self, peer: str, idle_since: float | None = None) -> None:
        self.peer = peer
        self.idle_since = idle_since
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


def test_a_connection_not_read_yet_is_not_closed_to_make_room_for_others() -> None:
    # the server accepts connections in batches and reads them afterwards: the first of a
    # batch, not read yet, may be the token holder's
    clock = Clock()
    admission = Admission(max_connections=8, max_unproven_per_client=3, clock=clock)
    unread = Conn("127.0.0.1")
    assert admission.arrive(unread)
    crowd = [Conn("127.0.0.1") for _ in range(20)]
    for conn in crowd:
        assert admission.arrive(conn)  # silent, they do not count against the caps
    for conn in crowd[:5]:  # the others speak (without the token)
        assert admission.admit(conn)
    assert [c.evicted for c in crowd[:5]] == [True, True, False, False, False]
    assert not unread.evicted
    assert admission.admit(unread, proven=True)  # it speaks, with the token
    assert admission.is_proven(unread) and len(admission) == 1 + 3 + 15


def test_silent_connections_are_refused_while_young_then_the_oldest_makes_room() -> None:
    clock = Clock()
    admission = Admission(
        max_connections=8, max_unproven_per_client=2, max_silent=3, silent_grace_s=0.5, clock=clock
    )
    first, second, third = (Conn("127.0.0.1") for _ in range(3))
    for conn in (first, second, third):
        assert admission.arrive(conn)
        clock.now += 0.1
    late = Conn("127.0.0.2")
    assert not admission.arrive(late)  # all within their grace: the newcomer is refused
    assert admission.refused == 1 and not first.evicted
    clock.now += 0.3  # first is 0.6 s old now
    assert admission.arrive(late)
    assert first.evicted and not second.evicted and admission.evicted == 1
    admission.leave(second)
    assert admission.arrive(Conn("127.0.0.3")) and not third.evicted


def test_a_proven_connection_makes_room_for_itself_from_idle_or_streaming_ones() -> None:
    admission = Admission(max_connections=3, max_unproven_per_client=3)
    working, streaming, idle = Conn("127.0.0.1"), Conn("127.0.0.1", 5.0), Conn("127.0.0.1", 9.0)
    for conn in (working, streaming, idle):
        assert admission.admit(conn, proven=True)
    stranger = Conn("127.0.0.1", 0.0)
    assert not admission.admit(stranger)  # without the token: never at a proven one's cost
    assert not any(c.evicted for c in (working, streaming, idle))
    newcomer = Conn("127.0.0.1")
    assert admission.admit(newcomer, proven=True)
    assert streaming.evicted and not idle.evicted and not working.evicted  # the longest idle
    assert admission.evicted_proven == 1 and len(admission) == 3
    assert admission.admit(Conn("127.0.0.1"), proven=True) and idle.evicted
    assert not admission.admit(Conn("127.0.0.1"), proven=True)  # all at work: refused
    assert admission.refused == 2


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
        ({"max_silent": 0}, "max_silent must be at least 1"),
        ({"silent_grace_s": -1}, "silent_grace_s must be 0 or more"),
        ({"silent_grace_s": float("inf")}, "silent_grace_s must be 0 or more"),
    ],
)
def test_limits_that_cannot_work_are_refused(limits: dict[str, float], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        HttpLimits(**limits)  # type: ignore[arg-type]
