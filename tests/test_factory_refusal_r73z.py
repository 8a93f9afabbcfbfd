"""``init_sharded``/``abstract_sharded`` given a model built already (not a factory) name the user's own class and
``shard_model``, not the harness's ``make_mlp``, which a user of the library alone does not have (USER73B)."""

import pytest
from flax import nnx

import gensbi_sharding as gs


@pytest.mark.parametrize("build", [gs.init_sharded, gs.abstract_sharded])
def test_a_built_model_is_told_to_pass_a_factory_of_its_own_class_or_shard_model(build):
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError) as refused:
        build(model, gs.make_mesh(model_axis=1), "fsdp")
    said = str(refused.value)
    assert said == ("factory must be a zero-argument callable building the module, got a Linear built already: pass "
                    "lambda: Linear(...) to build it sharded, or place this one with shard_model(model, mesh, rule)")
    assert "make_mlp" not in said


def test_something_else_uncallable_is_shown_a_factory_of_a_model_of_ones_own():
    with pytest.raises(ValueError, match=r"got a int; pass e\.g\. lambda: MyModel\(rngs=nnx\.Rngs\(0\)\)$"):
        gs.init_sharded(3, gs.make_mesh(model_axis=1), "fsdp")
