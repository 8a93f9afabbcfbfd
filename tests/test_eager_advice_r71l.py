"""The eager fix ``init_sharded`` and ``abstract_sharded`` advise, run as written.

A user's constructor that reads a value it computed (GenSBI's ``Flux1Params`` does: ``int(jnp.sum(...))`` in its
``__post_init__``) cannot be traced; the refusal offers building the model eagerly and placing it. That advice read
``shard_model(factory(), mesh, rule)``: followed literally it placed a model no name held (``shard_model`` returns
None, placing in place), and given a rule table, ``shard_model`` refused it. Now it names a code line that runs as
written, the function for a rule table, and where the constructor read the value.

In-process, 8 simulated CPU devices (conftest); a tiny module.
"""

import re
import warnings

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import mesh  # noqa: F401 (a fixture)


class ReadsComputed(nnx.Module):
    """Its width is computed with jnp and read with int(), as GenSBI's Flux1Params computes its hidden size."""

    def __init__(self, rngs):
        width = int(jnp.sum(jnp.array([4, 4])))  # a value the constructor computes, then reads
        self.up = nnx.Linear(4, width, rngs=rngs,
                             kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))


def factory():
    return ReadsComputed(nnx.Rngs(0))


@pytest.mark.parametrize("build", [gs.init_sharded, gs.abstract_sharded], ids=["init_sharded", "abstract_sharded"])
@pytest.mark.parametrize("rule, spec", [("tensor", P(None, "model")), ({"embed": "data", "mlp": "model"},
                                                                        P("data", "model"))], ids=["name", "table"])
def test_the_eager_fix_runs_as_written_and_places_the_model_by_the_rule(mesh, build, rule, spec):
    with pytest.raises(ValueError, match="reads a value it computed") as error:
        build(factory, mesh, rule)
    message = str(error.value)
    assert "in ReadsComputed.__init__ (" in message and "test_eager_advice_r71l.py:" in message, message
    function = "shard_model_by_table" if isinstance(rule, dict) else "shard_model"
    code = re.search(rf"model = factory\(\); {function}\(model, mesh, rule\)", message)
    assert code is not None, message
    scope = {"factory": factory, "mesh": mesh, "rule": rule, function: getattr(gs, function)}
    with warnings.catch_warnings(action="ignore"):
        exec(code.group(0), scope)  # the advice, as written
    kernel = scope["model"].up.kernel.get_value()
    assert kernel.shape == (4, 8) and kernel.sharding.is_equivalent_to(NamedSharding(mesh, spec), 2)
