"""API throttling as a client sees it from API Priority and Fairness: under load, 429 with `Retry-After`.

The real server queues a request its priority level cannot seat and rejects it once the queue is full or the wait
too long (staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go): status 429, header
`Retry-After: <seconds>` (at least 1, growing while rejections go on), a plain-text body written by `http.Error`
("Too many requests, please try again later.") — not a JSON Status. Here "load" is a token bucket: `burst`
requests at once, refilled at `qps`; a request finding it empty gets that answer. Off unless switched on:
`cluster.throttle = Throttle(qps=2, burst=4)` (or `build_cluster(throttle=...)`).
"""

from __future__ import annotations

import math
import threading
import time

MESSAGE = b"Too many requests, please try again later.\n"  # http.Error appends the newline


class Throttle:
    def __init__(self, qps: float, burst: int = 1) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"throttle needs qps > 0 and burst >= 1, got qps={qps}, burst={burst}")
        self.qps, self.burst = float(qps), int(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()
        self.admitted = 0
        self.rejected = 0

    def admit(self) -> int | None:
        """None: serve the request. Else the `Retry-After` seconds to answer with (whole seconds, >= 1)."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                self.admitted += 1
                return None
            self.rejected += 1
            return max(1, math.ceil((1.0 - self._tokens) / self.qps))
