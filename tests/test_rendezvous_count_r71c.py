"""A process started with another ``distributed.num_processes`` than process 0 is turned away at the rendezvous,
told both counts (review of 30aac792: the count was not sent, so process_id=1 of 4 met a coordinator of 2 and was let
through to ``jax.distributed.initialize``, and process_id=3 of 4 was told "it is not one of 1..3", a range holding
3, since the range came from its own count)."""

import socket
import threading

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _meet(address, rank, num_processes, timeout_s, outcomes):
    try:
        check_coordinator(address, rank, num_processes, timeout_s)
        outcomes.append("go")
    except ConfigError as err:
        outcomes.append(str(err))


@pytest.mark.slow  # a coordinator and a process as threads, and the coordinator's (short) timeout
@pytest.mark.parametrize("rank", [1, 3])
def test_a_process_of_another_count_is_told_both_counts(rank):
    address, served, joined = f"127.0.0.1:{_free_port()}", [], []
    threads = [threading.Thread(target=_meet, args=(address, 0, 2, 1, served)),
               threading.Thread(target=_meet, args=(address, rank, 4, 3, joined))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads)
    assert joined == [f"process 0 at distributed.coordinator_address={address} refused distributed.process_id={rank}: "
                      "it runs distributed.num_processes=2, this process 4; give every process the same "
                      "distributed.num_processes"]
    (server_said,) = served
    assert "process(es) [1] of 2 did not reach" in server_said
    assert server_said.endswith(f"(refused: process_id {rank} of 4: started with another distributed.num_processes)")
