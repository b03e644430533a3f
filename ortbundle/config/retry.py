"""How downloads retry: kept apart from the HTTP code so planning a build imports no HTTP stack."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    connect_timeout: float = 15.0
    read_timeout: float = 60.0
    # one download, all attempts together: a server that drips a byte a minute never trips the
    # read timeout, so the whole transfer has a deadline too
    deadline: float = 3600.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_delay * 4)
        backoff: float = min(self.max_delay, self.base_delay * (2**attempt))
        return backoff * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not crypto

    @property
    def timeout(self) -> tuple[float, float]:
        return (self.connect_timeout, self.read_timeout)
