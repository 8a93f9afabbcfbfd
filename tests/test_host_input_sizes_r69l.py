"""host_to_global_array's refusal of rows its mesh cannot split said "pass a multiple of 4 per process", naming no
size, where the README promises that every batch-size message names its sizes (shard_batch's: "use 4 or 8 rows").
Now it names the nearest valid sizes, which are taken."""

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from gensbi_sharding import host_to_global_array, make_mesh


@pytest.mark.parametrize("partition, rows, sizes", [("data", 6, "4 or 8"), ("full", 6, "8"), ("data", 1, "4")])
def test_rows_no_multiple_of_the_shards_name_the_nearest_sizes(partition, rows, sizes):
    mesh = make_mesh(model_axis=2)
    with pytest.raises(ValueError) as refused:
        host_to_global_array(np.zeros((rows, 3), np.float32), partition=partition, mesh=mesh)
    assert str(refused.value).endswith(f"; pass {sizes} rows per process"), str(refused.value)
    spec = P(("data",) if partition == "data" else ("data", "model"))
    for size in map(int, sizes.split(" or ")):
        placed = host_to_global_array(np.zeros((size, 3), np.float32), partition=partition, mesh=mesh)
        assert placed.shape == (size, 3) and placed.sharding.spec == spec
