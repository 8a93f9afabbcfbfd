"""describe, bytes_per_device, sharding_of and partition_specs of a state whose arrays a jitted step donated reported
them as placed and holding their bytes (describe: "per device max 576 B"), memory jax.live_arrays no longer holds,
while shard_model and shard_batch refused the same arrays. Now each refuses them as those do, naming the leaf and
the fix, which works."""

import jax
import pytest
from flax import nnx

import gensbi_sharding as gs


@pytest.mark.parametrize("read", ["describe", "bytes_per_device", "sharding_of", "partition_specs"])
def test_a_donated_state_is_refused_naming_the_fix(read):
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, rngs=nnx.Rngs(0))
    gs.shard_model(model, mesh, "replicated")
    step = jax.jit(lambda state: jax.tree.map(lambda x: 2 * x, state), donate_argnums=0)
    new = step(nnx.state(model))
    assert model.kernel.get_value().is_deleted()  # no longer among jax.live_arrays(): its memory is freed
    call = {"describe": lambda node: gs.describe(node, mesh)}.get(read, getattr(gs, read))
    with pytest.raises(RuntimeError) as refused:
        call(model)
    assert str(refused.value) == ("bias (shape (16,)) was deleted: donated to a jitted step (donate_argnums) or "
                                  ".delete()d; pass the arrays the step returned, e.g. state = step(state) then "
                                  "nnx.update(model, state)")
    nnx.update(model, new)  # the fix named
    assert call(model)
    assert gs.bytes_per_device(nnx.state(model)) == {d: (16 + 8 * 16) * 4 for d in range(8)}
