"""``check_batch_divisible`` given a batch size (an int) instead of a batch, and the one wording of the batch-size
advice (``check_batch_divisible`` and ``shard_batch`` alike).

Before: ``check_batch_divisible(6, mesh, "train")`` returned None (an int is a pytree of no rows: nothing checked);
``check_batch_divisible`` said "nearest valid batch sizes: 4 or 8" where ``shard_batch`` said "use 4 or 8 rows
(pad_for_mesh(6, mesh) ...)". In-process, 8 simulated CPU devices (conftest).
"""

import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("size", [6, np.int64(6), 8])
def test_a_batch_size_is_refused_naming_it_and_nearest_batch_sizes(size):
    mesh = gs.make_mesh(model_axis=2)  # data-parallel size 4
    with pytest.raises(TypeError, match=r"^check_batch_divisible takes the batch \(a pytree of arrays\), got the "
                                        rf"number {int(size)}; for a batch size, nearest_batch_sizes\({int(size)}, "
                                        r"batch_size_divisor\(mesh\)\) lists the valid ones$"):
        gs.check_batch_divisible(size, mesh, "train")
    assert gs.nearest_batch_sizes(6, gs.batch_size_divisor(mesh)) == (4, 8)  # what the message sends the user to
    gs.check_batch_divisible(np.ones((8, 2)), mesh, "train")  # a batch still passes


def test_check_batch_divisible_and_shard_batch_give_one_advice():
    mesh = gs.make_mesh(model_axis=2)
    fix = "use 4 or 8 rows (pad_for_mesh(6, mesh) returns the rows to pad to and the real ones, (8, 6): mask the " \
          "padding out of a mean)"
    with pytest.raises(ValueError) as checked:
        gs.check_batch_divisible({"x": np.ones((6, 2))}, mesh, "train")
    assert str(checked.value) == ("train batch size 6 is not divisible by the data-parallel size 4 (mesh axes "
                                  f"('data',)); {fix}")
    with pytest.raises(ValueError) as placed:
        gs.shard_batch({"x": np.ones((6, 2))}, mesh)
    assert str(placed.value) == ("batch leaf ['x'] (shape (6, 2)) has leading size 6, not divisible by the "
                                 f"data-parallel size 4; {fix}")
