"""Run one function over a list of items on a few threads (the step's reflect and merge calls, dreaming)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

_Item = TypeVar("_Item")
_Out = TypeVar("_Out")


def map_parallel(function: Callable[[_Item], _Out], items: list[_Item], workers: int) -> list[_Out]:
    """``[function(item) for item in items]`` with at most ``workers`` threads; results in item order.

    The first exception (in item order among those raised) is re-raised after the calls not yet started are
    cancelled, so a fatal backend error or an exhausted budget stops the stage. A ``BaseException`` raised while
    waiting (a signal handler's) cancels every call not yet started and propagates at once.
    """
    if len(items) <= 1 or workers <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="parallel") as pool:
        futures = [pool.submit(function, item) for item in items]
        try:
            done, not_done = wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:  # a signal (``interrupts.Interrupted``): drop the queued calls, let running ones end
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        failed = [future for future in futures if future in done and future.exception() is not None]
        if failed:
            for future in not_done:
                future.cancel()
            raise failed[0].exception()  # type: ignore[misc]
        return [future.result() for future in futures]
