"""The tiny discrete-event core under the fleet simulator: a time heap and generator processes.

A process is a generator that yields what it waits for: a number (minutes), a `Signal` (resumes
with the value it is fired with) or a `SpareRequest` (resumes with a spare node id once one is
free). No per-minute ticking: the clock jumps from event to event.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from functools import partial
from typing import Any

Process = Generator[Any, Any, None]


class Signal:
    """Something processes wait on; `fire(value)` resumes every waiter with `value`."""

    __slots__ = ("_waiters", "_clock")

    def __init__(self, clock: Clock) -> None:
        self._waiters: list[Process] = []
        self._clock = clock

    def fire(self, value: Any = None) -> None:
        waiters, self._waiters = self._waiters, []
        for proc in waiters:
            self._clock.at(self._clock.now, partial(self._clock.resume, proc, value))


class Clock:
    """Event heap with deterministic tie-breaking (insertion order), so a seed fixes the run."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.spare_requests: Callable[[Process], None] | None = None

    def at(self, when: float, action: Callable[[], None]) -> None:
        if when < self.now:
            raise ValueError(f"event scheduled in the past ({when:.3f} < {self.now:.3f})")
        heapq.heappush(self._heap, (when, next(self._seq), action))

    def after(self, delay: float, action: Callable[[], None]) -> None:
        self.at(self.now + delay, action)

    def spawn(self, proc: Process) -> None:
        self.resume(proc, None)

    def resume(self, proc: Process, value: Any) -> None:
        try:
            wanted = proc.send(value)
        except StopIteration:
            return
        if isinstance(wanted, (int, float)):
            if wanted < 0:
                raise ValueError(f"a process asked to wait a negative time ({wanted})")
            self.after(float(wanted), lambda: self.resume(proc, None))
        elif isinstance(wanted, Signal):
            wanted._waiters.append(proc)
        elif isinstance(wanted, SpareRequest):
            assert self.spare_requests is not None, "no spare pool attached to this clock"
            self.spare_requests(proc)
        else:
            raise TypeError(f"a process yielded {wanted!r}; expected minutes, a Signal or a SpareRequest")

    def run_until(self, horizon: float, after_event: Callable[[], None] | None = None) -> None:
        heap = self._heap
        while heap and heap[0][0] <= horizon:
            when, _, action = heapq.heappop(heap)
            self.now = when
            action()
            if after_event is not None:
                after_event()
        self.now = horizon


class SpareRequest:
    """Yielded by a process that needs a warm spare; it resumes with the node id."""

    __slots__ = ()


TAKE_SPARE = SpareRequest()


class Resource:
    """A pool of `capacity` workers (on-call engineers); `yield res.acquire()` waits for one, FIFO."""

    def __init__(self, clock: Clock, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a resource needs at least one worker, got {capacity}")
        self._clock, self.free = clock, capacity
        self._queue: list[Signal] = []

    def acquire(self) -> Signal:
        sig = Signal(self._clock)
        if self.free > 0:
            self.free -= 1
            self._clock.at(self._clock.now, lambda: sig.fire(None))
        else:
            self._queue.append(sig)
        return sig

    def release(self) -> None:
        if self._queue:
            self._queue.pop(0).fire(None)
        else:
            self.free += 1
