"""benchmarks/step_overhead.py swaps which step is timed first every block, as shard_model.py swaps its trials."""

import pytest

from faults_helpers import REPO, load_benchmark


def _script(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its cli_args
    return load_benchmark("step_overhead")


@pytest.mark.slow  # imports the script's JAX, Flax and harness modules: ~1.9 s alone on 2 cores
def test_step_overhead_swaps_which_step_goes_first_every_block(monkeypatch):
    # Was: the harness's step always ran first in each block, the hand-written one after it on a machine it had just
    # warmed; the median of blocks keeps such a bias.
    script = _script(monkeypatch)
    order = []

    def timer(name, seconds):
        def time_it():
            order.append(name)
            return seconds
        return time_it

    ours, hand = script.alternate(timer("harness", 1.0), timer("hand", 2.0), 4)
    assert order == ["harness", "hand", "hand", "harness", "harness", "hand", "hand", "harness"]
    assert (ours, hand) == ([1.0] * 4, [2.0] * 4)
