"""The explicit-mode rendezvous (``harness/rendezvous.py``): a process the coordinator turns away is told why and
which setting to fix, at once (session 71: its connection was closed without a word, so it retried until
``distributed.timeout_s`` and then said "start process 0 there, or fix the address", which process 0 had done). Turned
away: a ``process_id`` another process has or none of 1..n-1 (REVIEW71B), another ``distributed.num_processes`` than
process 0's (REVIEW71C: the count was not sent, so process_id=1 of 4 met a coordinator of 2 and was let through, and
process_id=3 of 4 was told "it is not one of 1..3"), and a twin that comes after process 0 met the others."""

import threading

import pytest

from faults_helpers import free_port
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator


def _meet(address, rank, num_processes, timeout_s, outcomes):
    """``check_coordinator`` in a thread: ``(rank, "go" or the refusal)`` appended to ``outcomes``."""
    try:
        check_coordinator(address, rank, num_processes, timeout_s)
        outcomes.append((rank, "go"))
    except ConfigError as err:
        outcomes.append((rank, str(err)))


REFUSED = ("refused distributed.process_id={rank}: another process has it, or it is not one of 1..2; give each "
           "process its own, numbered from 0")


@pytest.mark.slow  # a coordinator and two processes as threads, and the coordinator's (short) timeout
@pytest.mark.parametrize("ranks", [(1, 1), (1, 5)], ids=["twin", "stray"])
def test_a_process_the_coordinator_turns_away_is_told_which_setting_to_fix(ranks):
    # process 0 of 3; process 2 never comes, so the coordinator ends at its timeout naming it and the one turned away
    address, served, joined = f"127.0.0.1:{free_port()}", [], []
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


@pytest.mark.slow  # a coordinator and a process as threads, and the coordinator's (short) timeout
@pytest.mark.parametrize("rank", [1, 3])
def test_a_process_of_another_count_is_told_both_counts(rank):
    address, served, joined = f"127.0.0.1:{free_port()}", [], []
    threads = [threading.Thread(target=_meet, args=(address, 0, 2, 1, served)),
               threading.Thread(target=_meet, args=(address, rank, 4, 3, joined))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads)
    joined, served = [said for _, said in joined], [said for _, said in served]
    assert joined == [f"process 0 at distributed.coordinator_address={address} refused distributed.process_id={rank}: "
                      "it runs distributed.num_processes=2, this process 4; give every process the same "
                      "distributed.num_processes"]
    (server_said,) = served
    assert "process(es) [1] of 2 did not reach" in server_said
    assert server_said.endswith(f"(refused: process_id {rank} of 4: started with another distributed.num_processes)")


@pytest.mark.slow  # a coordinator as a thread, and the late process's (short) timeout
def test_a_late_twin_is_told_its_process_id_may_be_given_twice():
    address, outcomes = f"127.0.0.1:{free_port()}", []
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
