"""A process given a ``process_id`` another already has, started after process 0 met all the others, finds the
coordinator's port closed: it is told that a twin is one cause (review of 30aac792: it was told only "start process 0
there, or fix the address", which process 0 had done)."""

import socket
import threading

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # a coordinator as a thread, and the late process's (short) timeout
def test_a_late_twin_is_told_its_process_id_may_be_given_twice():
    address, outcomes = f"127.0.0.1:{_free_port()}", []
    coordinator = threading.Thread(target=lambda: outcomes.append(check_coordinator(address, 0, 2, 5)))
    coordinator.start()
    check_coordinator(address, 1, 2, 5)  # the first process 1 meets process 0, which then closes its port
    coordinator.join(timeout=10)
    assert not coordinator.is_alive() and outcomes == [None]
    with pytest.raises(ConfigError) as refused:
        check_coordinator(address, 1, 2, 1)
    assert str(refused.value).endswith(
        "(Connection refused): start process 0 there, or fix the address (where process 0 runs, it met its 1 "
        "other(s) already: is distributed.process_id=1 given to two processes?)")
