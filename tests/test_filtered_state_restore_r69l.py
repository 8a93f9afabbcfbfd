"""A state saved filtered, CheckpointWriter.save(step, nnx.state(model, nnx.Param), key), restored into the whole
model's target was told "Build the model with the hyperparameters it was saved with", which changes nothing: the same
model is refused again. Now the refusal says the checkpoint holds only the target's nnx.Param variables and names the
target filtered alike, which restores pasted; a model with a layer more is told of its hyperparameters as before."""

import jax
import numpy as np
import pytest
from flax import nnx

from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, restore


class Net(nnx.Module):
    def __init__(self, rngs, depth=1):
        self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(depth)])
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)


@pytest.mark.parametrize("saved_filter, said", [
    (nnx.Param, "only the target's nnx.Param variables (a filtered state saved, e.g. nnx.state(model, nnx.Param)): "
                "restore into the target filtered alike, nnx.filter_state(abstract_state_for(model, mesh, rule), "
                "nnx.Param)"),
    (nnx.Any(nnx.Param, nnx.BatchStat), "only the target's nnx.BatchStat and nnx.Param variables (a filtered state "
     "saved, e.g. nnx.state(model, nnx.Any(nnx.BatchStat, nnx.Param))): restore into the target filtered alike, "
     "nnx.filter_state(abstract_state_for(model, mesh, rule), nnx.Any(nnx.BatchStat, nnx.Param))"),
])
def test_a_filtered_save_names_the_filtered_target(tmp_path, saved_filter, said):
    model = Net(nnx.Rngs(0))
    with CheckpointWriter(tmp_path) as writer:
        writer.save(3, nnx.state(model, saved_filter), jax.random.key(0))
    fresh = Net(nnx.Rngs(1))
    with pytest.raises(ValueError) as refused:
        restore(tmp_path, abstract_state_for(fresh, None))
    assert said in str(refused.value), str(refused.value)
    assert str(refused.value).endswith("then nnx.update(model, restored.state); or save the whole nnx.state(model)")
    kept = eval(str(refused.value).split("mesh, rule), ")[1].split("), then")[0], {"nnx": nnx})  # the filter named
    nnx.update(fresh, restore(tmp_path, nnx.filter_state(abstract_state_for(fresh, None), kept)).state)
    np.testing.assert_array_equal(fresh.layers[0].kernel.get_value(), model.layers[0].kernel.get_value())


def test_a_layer_more_is_still_told_of_hyperparameters(tmp_path):
    with CheckpointWriter(tmp_path) as writer:
        writer.save(3, nnx.state(Net(nnx.Rngs(0)), nnx.Param), jax.random.key(0))
    with pytest.raises(ValueError) as refused:
        restore(tmp_path, nnx.filter_state(abstract_state_for(Net(nnx.Rngs(1), depth=2), None), nnx.Param))
    assert "layers/1/kernel: missing from the checkpoint" in str(refused.value)
    assert "Build the model with the hyperparameters it was saved with" in str(refused.value)
    assert "filtered" not in str(refused.value)
