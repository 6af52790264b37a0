"""`Schedule`: when each of a vehicle's slots (a message, the model's tick, the error frames)
is next due.

Slot `i` is due at `base + k * period` for its k-th time: multiples, not sums, so simulated
time lands on the database's periods exactly however long the run. Slots of the same period
start together and stay together (the same base, the same multiples), so they are kept as one
group: a 300-message bus with a dozen periods costs a dozen heap operations per instant,
not one per frame. Slots due at the same instant come out in slot order, whichever group
they are in.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["Schedule"]


class Schedule:
    """The due times of slots `0 .. len(periods) - 1`, every one of them due at `start`."""

    __slots__ = ("_base", "_count", "_group_of", "_heap", "_members", "_periods", "_times")

    def __init__(self, periods: Sequence[float], start: float) -> None:
        groups: dict[float, list[int]] = {}
        for slot, period in enumerate(periods):
            groups.setdefault(float(period), []).append(slot)
        self._periods = list(groups)
        self._members = [tuple(slots) for slots in groups.values()]
        self._group_of = [0] * len(periods)
        for group, slots in enumerate(self._members):
            for slot in slots:
                self._group_of[slot] = group
        self._base = [start] * len(groups)
        self._count = [0] * len(groups)
        self._times = [0] * len(groups)  # how often each group was due
        self._heap = [(start, group) for group in range(len(groups))]
        heapq.heapify(self._heap)

    def next_due(self) -> float | None:
        """When the next slot is due (None: no slot at all)."""
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> Sequence[int]:
        """The slots due by `now`, in the order of their due times and then of their
        numbers; each is scheduled again for its next multiple after `now` (a late slot is
        due once, not in a burst: its schedule slips instead)."""
        heap = self._heap
        if not heap or heap[0][0] > now:
            return ()
        out: list[int] = []
        while heap and heap[0][0] <= now:
            due, group = heapq.heappop(heap)
            groups = [group]
            while heap and heap[0][0] == due:  # other groups due at the same instant
                groups.append(heapq.heappop(heap)[1])
            if len(groups) == 1 and not out and (not heap or heap[0][0] > now):
                self._again(group, now)
                return self._members[group]  # the common case: one group, no copy
            members = [slot for g in groups for slot in self._members[g]]
            out.extend(sorted(members) if len(groups) > 1 else members)
            for g in groups:
                self._again(g, now)
        return out

    def times(self) -> list[int]:
        """How many times each slot has been due (`due` returned it)."""
        times = self._times
        return [times[group] for group in self._group_of]

    def _again(self, group: int, now: float) -> None:
        self._times[group] += 1
        count = self._count[group] = self._count[group] + 1
        period = self._periods[group]
        following = self._base[group] + count * period
        if following <= now:
            self._base[group], self._count[group] = now, 1
            following = now + period
        heapq.heappush(self._heap, (following, group))
