"""Small in-process helpers of the API: a rate limiter and a TTL cache.

The rate limiter counts fixed windows per key: requests per client address and minute (public
queries, logins), failed logins per account name and ``login_failure_window_s``. Good for one
``pontual serve`` process; behind several workers or a proxy pool each process counts on its
own (the effective limit is then per process: ``--workers 4`` lets 4 times as many failed
logins per account through), and a restart forgets every count.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class RateLimiter:
    """Count requests per key in fixed windows of ``window_s`` seconds."""

    def __init__(
        self, *, limit: int, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[float, int]] = {}

    def hit(self, key: str) -> float | None:
        """Count one request of ``key``; return None if allowed, else seconds until allowed."""
        now = self._clock()
        with self._lock:
            start, count = self._windows.get(key, (now, 0))
            if now - start >= self.window_s:
                start, count = now, 0
            if count >= self.limit:
                return max(0.0, start + self.window_s - now)
            self._windows[key] = (start, count + 1)
            if len(self._windows) > 100_000:  # forget stale windows now and then
                self._windows = {
                    k: v for k, v in self._windows.items() if now - v[0] < self.window_s
                }
            return None

    def undo(self, key: str) -> None:
        """Give back one hit of ``key``'s current window (an attempt that is not to count)."""
        with self._lock:
            window = self._windows.get(key)
            if window is not None and window[1] > 0:
                self._windows[key] = (window[0], window[1] - 1)

    @staticmethod
    def retry_after(seconds: float) -> str:
        """Return the ``Retry-After`` header value (whole seconds, at least 1)."""
        return str(max(1, math.ceil(seconds)))


class TtlCache(Generic[V]):
    """Values by key for ``ttl_s`` seconds (thread-safe; at most ``max_items`` kept)."""

    def __init__(
        self,
        *,
        ttl_s: float,
        max_items: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_items = max_items
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[str, tuple[float, V]] = {}

    def get(self, key: str) -> V | None:
        """Return the value of ``key`` if stored less than ``ttl_s`` ago, else None."""
        with self._lock:
            hit = self._items.get(key)
        if hit is None or self._clock() - hit[0] >= self.ttl_s:
            return None
        return hit[1]

    def put(self, key: str, value: V) -> None:
        """Store ``value`` under ``key`` from now."""
        now = self._clock()
        with self._lock:
            if len(self._items) >= self.max_items:
                self._items = {k: v for k, v in self._items.items() if now - v[0] < self.ttl_s}
                if len(self._items) >= self.max_items:
                    self._items.clear()
            self._items[key] = (now, value)
