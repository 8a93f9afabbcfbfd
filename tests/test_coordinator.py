"""The distributed coordinator: an unreachable one is a recorded error naming it; a missing peer and a foreign
address name the address; processes meet at the coordinator before JAX joins them.
"""

import json
import socket
import threading
import time

import pytest

from faults_helpers import run_tiny
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_unreachable_coordinator_is_a_recorded_error_naming_it(tmp_path, devices):
    address = f"127.0.0.1:{_free_port()}"  # nobody listens there
    metrics = run_tiny(tmp_path / "run", "distributed.mode=explicit", f"distributed.coordinator_address={address}",
                       "distributed.num_processes=2", "distributed.process_id=1", "distributed.timeout_s=1")
    assert metrics["status"] == "error"
    assert f"process 1 could not join the coordinator at distributed.coordinator_address={address} within " \
           "distributed.timeout_s=1 s (Connection refused)" in metrics["error"]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["error"] == metrics["error"]


@pytest.mark.slow
def test_missing_peer_and_foreign_address_are_errors_naming_the_address():
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(ConfigError, match=rf"process\(es\) \[1, 2\] of 3 did not reach the coordinator at "
                                          rf"distributed.coordinator_address={address} within "
                                          r"distributed.timeout_s=0.5 s"):
        check_coordinator(address, 0, 3, 0.5)
    with pytest.raises(ConfigError, match=r"coordinator_address=192\.0\.2\.1:1234 \(.*\): give an address "
                                          "of this host and a free port"):
        check_coordinator("192.0.2.1:1234", 0, 2, 0.5)  # TEST-NET-1: never this machine's


@pytest.mark.slow
def test_processes_meet_at_the_coordinator_before_jax_joins_them():
    address, errors = f"127.0.0.1:{_free_port()}", []

    def peer(rank):
        try:
            check_coordinator(address, rank, 3, 20)
        except ConfigError as err:
            errors.append(err)

    peers = [threading.Thread(target=peer, args=(rank,)) for rank in (1, 2)]
    for thread in peers:  # the peers start first: they retry until process 0 listens
        thread.start()
    time.sleep(0.5)
    check_coordinator(address, 0, 3, 20)
    for thread in peers:
        thread.join(timeout=20)
    assert errors == [] and not any(thread.is_alive() for thread in peers)
