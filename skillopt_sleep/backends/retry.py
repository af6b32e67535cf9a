"""The retry policy every backend uses for a transient failure (one place for the tenacity set-up).

``max_retries`` retries after the first attempt; the wait before retry n is exponential from ``backoff_base_s``
seconds (base, 2 x base, 4 x base, ...) capped at ``backoff_max_s``, plus up to ``backoff_base_s`` of random
jitter; the last exception is re-raised once the retries are spent.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random


def retrying(*, retry_when: Callable[[BaseException], bool], max_retries: int, backoff_base_s: float,
             backoff_max_s: float) -> Retrying:
    """Return a tenacity ``Retrying`` that retries an attempt while ``retry_when(exception)`` is true."""
    return Retrying(
        stop=stop_after_attempt(max(0, int(max_retries)) + 1),
        wait=wait_exponential(multiplier=backoff_base_s, max=backoff_max_s) + wait_random(0, backoff_base_s),
        retry=retry_if_exception(retry_when),
        reraise=True,
    )
