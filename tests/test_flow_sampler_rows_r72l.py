"""FlowSampler's ``batch_size`` takes what the harness's one integer check takes (session 72, REVIEW72A): a bool was
taken as one row at a time (``isinstance(True, int)``), a NumPy integer refused."""

import numpy as np
import pytest

from gensbi_sharding.harness.flow_sampler import FlowSampler


def sampler(batch_size):
    return FlowSampler(lambda *a: None, rows=100, num_steps=2, mesh=None, batch_size=batch_size)


@pytest.mark.parametrize("batch_size", [True, False, 2.0, "8", 0])
def test_a_batch_size_that_is_no_row_count_is_refused(batch_size):
    with pytest.raises(ValueError, match=rf"batch_size={batch_size!r}: rows integrated at once, an int >= 1"):
        sampler(batch_size)


def test_a_numpy_integer_batch_size_is_taken_as_its_int():
    block = sampler(np.int64(8)).block
    assert block == 8 and type(block) is int
