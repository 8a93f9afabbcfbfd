"""A process the coordinator turns away (a ``process_id`` another process has, or none of 1..n-1) is told so at once
(REVIEW71B: its connection was closed without a word, so it retried until ``distributed.timeout_s`` and then said
"start process 0 there, or fix the address", which process 0 had done)."""

import socket
import threading

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator

REFUSED = ("refused distributed.process_id={rank}: another process has it, or it is not one of 1..2; give each "
           "process its own, numbered from 0")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _meet(address, rank, num_processes, timeout_s, outcomes):
    try:
        check_coordinator(address, rank, num_processes, timeout_s)
        outcomes.append((rank, "go"))
    except ConfigError as err:
        outcomes.append((rank, str(err)))


@pytest.mark.slow  # a coordinator and two processes as threads, and the coordinator's (short) timeout
@pytest.mark.parametrize("ranks", [(1, 1), (1, 5)], ids=["twin", "stray"])
def test_a_process_the_coordinator_turns_away_is_told_which_setting_to_fix(ranks):
    # process 0 of 3; process 2 never comes, so the coordinator ends at its timeout naming it and the one turned away
    address, served, joined = f"127.0.0.1:{_free_port()}", [], []
    threads = [threading.Thread(target=_meet, args=(address, 0, 3, 2, served))]
    threads += [threading.Thread(target=_meet, args=(address, rank, 3, 4, joined)) for rank in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads)
    refused = [(rank, said) for rank, said in joined if "refused distributed.process_id" in said]
    # one of the two is turned away, told at once (the old code: "could not join ... start process 0 there")
    assert len(refused) == 1 and refused[0][1].endswith(REFUSED.format(rank=refused[0][0]))
    assert refused[0][0] == (1 if ranks == (1, 1) else 5)
    (server_said,) = [said for _, said in served]
    assert "process(es) [2] of 3 did not reach" in server_said and f"process_id [{refused[0][0]}]" in server_said
