"""``init_sharded``'s check of the values a factory builds from no traced array names the leaf inside a pytree value
(``c/p``), as ``shard_model``'s check does, not only the variable (REVIEW73A F5: it said ``c (shape (3,))``)."""

import numpy as np
import pytest
from flax import nnx

import gensbi_sharding as gs


class Block(nnx.Module):
    def __init__(self):
        self.a = nnx.Param(np.ones((16, 8), np.float32))
        self.c = nnx.Variable({"p": np.ones(3) * 1e300, "q": np.ones(2)})


def test_a_value_float32_cannot_hold_is_named_by_its_leaf_in_a_pytree_value():
    with pytest.raises(ValueError, match=r"^init_sharded: c/p \(shape \(3,\)\) holds 1e\+300"):
        gs.init_sharded(Block, gs.make_mesh(model_axis=2), "fsdp")
