"""One more run for a slow test whose processes JAX's coordination service aborted (pytest-rerunfailures).

CI failed once on a two-process test whose processes both ended in JAX's "stopped sending heartbeats" abort: on a
loaded 2-core machine one process starved past ``distributed.heartbeat_s`` (reproduced by freezing a process 25 s:
the same words and last frames). Such a failure runs once more; any other failure fails at once, a second abort
fails too, and pytest's summary counts each rerun ("1 rerun"). Only slow tests are marked (every multi-process test
is slow): pytest-rerunfailures asks its xdist controller twice per test it may rerun, which took the 3,650 fast tests
from 2:16 to 3:54 when every test was.
"""

from __future__ import annotations

import pytest

ABORT_WORDS = ["stopped sending heartbeats", "JAX distributed service detected fatal errors", "PThread::ThreadFn"]


def add_abort_reruns(items: list) -> None:
    """Mark each slow test of ``items`` ``flaky(reruns=1, only_rerun=ABORT_WORDS)``."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=ABORT_WORDS))


def pytest_collection_modifyitems(items):
    """As a plugin (``-p abort_reruns``): tests/conftest.py calls ``add_abort_reruns`` itself."""
    add_abort_reruns(items)
