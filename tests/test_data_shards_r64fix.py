"""Many data shards in one process: each shard's simulation reuses the compiled simulator (round 64).

Was: ``load_task`` built and jitted a new row-by-row simulator for every call, so each data shard compiled it
anew (~0.37 s); ``data.shards=1000``, which the batch-size refusal itself advises, sat in step [3/7] for minutes.
"""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import pytest

from gensbi_sharding.harness.data import load_task

REPO = Path(__file__).resolve().parents[1]


def _traced_and_compiled(call):
    """The programs JAX traces or compiles while ``call()`` runs (its compile events, not their timings)."""
    events = []

    def listener(event, duration, **kwargs):
        if event in ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/backend_compile_duration"):
            events.append((event.rsplit("/", 1)[-1], kwargs.get("fun_name")))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        call()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return events


@pytest.mark.slow
@pytest.mark.parametrize("name", ["two_moons", "slcp"])
def test_further_shards_of_a_task_trace_and_compile_nothing(name):
    def shard(index):
        with warnings.catch_warnings():  # emulated shards in one process: statistics of this shard only
            warnings.simplefilter("ignore", UserWarning)
            return load_task(name, num_simulations=40, process_index=index, process_count=10, seed=1)

    first = shard(0)  # may compile: the first simulation of this task in the process
    later = _traced_and_compiled(lambda: [shard(i) for i in range(1, 4)])
    assert later == []  # was: the simulator traced and compiled again for each shard
    again = shard(0)  # the cached program gives the very same pairs
    assert (again.theta_train == first.theta_train).all() and (again.x_train == first.x_train).all()
    assert not (shard(1).x_train[:2] == first.x_train[:2]).all()  # another shard, other pairs


@pytest.mark.slow
def test_the_advice_to_raise_the_budget_for_a_thousand_shards_runs_when_pasted(tmp_path):
    # The refusal's own advice (data.shards=1000 -> 2000 simulations, batch 1000) ran >5 min in step [3/7] (1000
    # compiles of the simulator); now it trains and ends ok well inside the bound
    args = ["experiment=quick", "eval.enabled=false", "data.shards=1000"]
    refused = subprocess.run([sys.executable, str(REPO / "launch.py"), *args, "data.num_simulations=256",
                              f"hydra.run.dir={tmp_path / 'refused'}"], capture_output=True, text=True, timeout=120)
    said = refused.stdout + refused.stderr
    advice = re.search(r"raise data\.num_simulations to at least (\d+) and set data\.batch_size=(\d+)", said)
    assert refused.returncode != 0 and advice, said
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), *args,
                          f"data.num_simulations={advice.group(1)}", f"data.batch_size={advice.group(2)}",
                          f"hydra.run.dir={tmp_path / 'pasted'}"], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "[7/7] outputs: written" in ran.stdout + ran.stderr


@pytest.mark.slow
def test_shards_share_one_read_only_copy_of_the_reference_samples():
    # Was: each shard read the task's bz2 CSV again (~13 ms) and held a copy of its own (10000 x dim_theta each)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        first, second = (load_task("two_moons", num_simulations=40, process_index=i, process_count=10)
                         for i in (0, 1))
    assert first.reference_samples is second.reference_samples and first.reference_samples.shape == (10000, 2)
    assert not first.reference_samples.flags.writeable  # shared: a change in place would reach every shard
