"""What a placement costs: bytes per device, read from the arrays' addressable shards.

Built on the contract only; never imports the harness.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import jax
from flax import nnx

from gensbi_sharding.sharding import _is_array, _path_str

__all__ = ["bytes_per_device", "partition_specs"]


def bytes_per_device(tree: Any) -> dict[int, int]:
    """Bytes held on each addressable device by the array leaves of ``tree``.

    ``tree`` may be any pytree or NNX graph node. Returns ``{device id: bytes}``;
    a replicated leaf counts fully on every device, a split leaf only its shard.
    NumPy leaves live on the host and count nowhere.
    """
    if isinstance(tree, (nnx.Module, nnx.Optimizer)) or hasattr(tree, "__nnx_repr__"):
        tree = nnx.state(tree)
    totals: dict[int, int] = defaultdict(int)
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.Array):
            for shard in leaf.addressable_shards:
                totals[shard.device.id] += shard.data.nbytes
    return dict(sorted(totals.items()))


def partition_specs(node: Any) -> dict[str, str]:
    """``{"a/b/c": "PartitionSpec(...)"}`` for every array state leaf of an NNX node."""
    out = {}
    for path, var in nnx.to_flat_state(nnx.state(node)):
        value = var.get_value()
        if _is_array(value):
            sharding = getattr(value, "sharding", None)
            out[_path_str(path)] = str(getattr(sharding, "spec", "host"))
    return out
