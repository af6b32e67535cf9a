"""A signal raised while a stage waits on its threads stops the calls not yet started (``parallel``, ``replay``)."""

import threading
import time

import pytest

from skillopt_sleep.parallel import map_parallel


class _Stop(BaseException):
    pass


def test_a_base_exception_while_waiting_cancels_the_queued_calls(monkeypatch):
    started: list[int] = []
    lock = threading.Lock()

    def slow(item: int) -> int:
        with lock:
            started.append(item)
        time.sleep(0.2)
        return item

    import skillopt_sleep.parallel as parallel

    real_wait = parallel.wait

    def interrupted_wait(*args, **kwargs):
        time.sleep(0.05)  # the first two calls are running
        raise _Stop()

    monkeypatch.setattr(parallel, "wait", interrupted_wait)
    with pytest.raises(_Stop):
        map_parallel(slow, list(range(20)), workers=2)
    monkeypatch.setattr(parallel, "wait", real_wait)
    assert len(started) <= 4  # the two running calls (and at most one more per worker), never all twenty
