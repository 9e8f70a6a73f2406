"""Per-client rate limiting (Requirement 11.7): a token bucket per client key.

Pure logic over an injected clock, so tests drive time instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memory_core.errors import RateLimitedError

__all__ = ["RateLimiter"]

# Forget idle clients so a long-running HTTP server does not grow without bound.
_MAX_CLIENTS = 10_000


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass
class RateLimiter:
    """``per_minute`` calls per client, with bursts up to ``burst`` (default: a tenth of a minute's
    allowance, at least 10 so ten parallel calls from one agent pass). ``per_minute=0`` disables it.
    """

    per_minute: int
    burst: int | None = None
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    @property
    def capacity(self) -> float:
        if self.burst is not None:
            return float(self.burst)
        return float(max(10, self.per_minute // 10))

    def check(self, client: str) -> None:
        """Take one call from ``client``'s bucket.

        Raises:
            RateLimitedError: the bucket is empty; ``retry_after`` says when one call is allowed.
        """
        if self.per_minute <= 0:
            return
        now = self.clock()
        rate = self.per_minute / 60.0
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) >= _MAX_CLIENTS:
                self._buckets.clear()
            bucket = self._buckets[client] = _Bucket(self.capacity, now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        retry_after = round((1.0 - bucket.tokens) / rate, 2)
        raise RateLimitedError(
            f"rate limit of {self.per_minute} calls per minute reached for this client (429)",
            retry_after=retry_after,
            hint=f"retry after {retry_after:.2f} s, or raise server.rate_limit_per_minute "
            "(MEMOIR_SERVER__RATE_LIMIT_PER_MINUTE; 0 turns the limit off)",
        )
