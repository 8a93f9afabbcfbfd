"""Every process of a multi-process job makes the same stop checks: JAX's preemption sync point counts them."""

import jax
import pytest
from jax.experimental import multihost_utils

from faults_helpers import compose_tiny
from gensbi_sharding.harness import run as run_module


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_each_process_of_a_later_multirun_job_asks_the_sync_point_alike(tmp_path, monkeypatch, mode):
    # From a multirun's second job on JAX is started when run() begins: was, process 0 alone asked the sync point
    # at the folder's claim (explicit mode), its count one ahead of the others', so on a stop it would halt a
    # check earlier than they do.
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(run_module, "run_steps", lambda *args: {})  # the checks before the job's steps only
    asked = {}
    for process in (0, 1):
        calls = asked[process] = []
        monkeypatch.setattr(multihost_utils, "reached_preemption_sync_point", lambda n, c=calls: c.append(n) or False)
        run_module.run(compose_tiny(f"distributed.mode={mode}", f"distributed.process_id={process}",
                                    output_dir=tmp_path / "run"))
    assert asked[0] == asked[1] == [1]
