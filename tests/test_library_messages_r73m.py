"""One check, one text: ``plan_shardings``/``Plan`` refusing a non-mesh name what they accept (an AbstractMesh too),
and ``shard_model``/``shard_model_by_table`` refusing a non-node with ``check_node``'s words plus their hint.

Before: "mesh must be a jax.sharding.Mesh, got 'auto'" from a function that accepts an AbstractMesh; and
"shard_model places NNX graph nodes ..." (its own check) where every other function says "... takes an NNX graph
node ...". In-process, 8 simulated CPU devices (conftest).
"""

import jax.numpy as jnp
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs


def test_plan_shardings_refusal_names_the_abstract_mesh_it_accepts():
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    with pytest.raises(TypeError, match=r"^mesh must be a jax\.sharding\.Mesh or AbstractMesh, got 'auto'; build one "
                                        r"with make_mesh"):
        gs.plan_shardings(model, "auto", "replicated")
    with pytest.raises(TypeError, match=r"^mesh must be a jax\.sharding\.Mesh or AbstractMesh, got None"):
        gs.Plan(None, "replicated", {}, {})
    plan = gs.plan_shardings(model, gs.make_mesh(model_axis=2).abstract_mesh, "replicated")  # what the words offer
    assert plan.specs == {"bias": P(), "kernel": P()}


@pytest.mark.parametrize("caller", ["shard_model", "shard_model_by_table"])
def test_shard_model_refuses_a_non_node_with_check_nodes_words_and_its_hint(caller):
    mesh = gs.make_mesh(model_axis=2)
    call = getattr(gs, caller)
    rule = "replicated" if caller == "shard_model" else gs.resolve_rule("replicated").table
    with pytest.raises(TypeError) as refused:
        call({"a": jnp.ones(8)}, mesh, rule)
    said = str(refused.value)
    assert said.startswith(f"{caller} takes an NNX graph node (a Module, nnx.Optimizer, nnx.State, or a tuple or "
                           "dict of them), got dict "), said
    assert said.endswith("no NNX node: keep other values (a step count, arrays) out of it; for a pytree of arrays "
                         "use shard_batch or replicate"), said
