"""LIBUSER71's three findings: ``constrain`` without a mesh warns when its PartitionAxis names mesh axes; a replicated
spec reads ``P()`` however it came; docs/library.md tells how to pin moments a plain jitted step may move.
In-process, 8 simulated CPU devices (conftest)."""

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.rules import ShardingFallbackWarning


def test_constrain_without_an_active_mesh_warns_naming_the_fix_when_partition_axis_names_mesh_axes():
    # Was silent: in jit the output sat on one device though pa splits over ('data', 'model')
    pa, x = gs.PartitionAxis.for_rule("tensor", gs.make_mesh(model_axis=2)), jnp.arange(32.0).reshape(8, 4)
    with pytest.warns(ShardingFallbackWarning) as caught:
        y = jax.jit(lambda v: gs.constrain(v, ("batch", "heads"), pa))(x)
    (said,) = [str(w.message) for w in caught if issubclass(w.category, ShardingFallbackWarning)]
    assert "('data', 'model')" in said and "mesh=mesh" in said and "mesh_context(mesh)" in said
    assert y.sharding.is_fully_replicated and (y == x).all()  # still the documented no-op
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # outside jit x itself comes back, on one device as it was: nothing hidden
        assert gs.constrain(x, ("batch", "heads"), pa) is x


def test_constrain_in_jit_without_a_mesh_stays_silent_when_partition_axis_splits_nothing():
    x, pa = jnp.ones((8, 4)), gs.PartitionAxis(batch_axis=None, head_axis=None, generation_head_axis=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for given in (pa, None):
            assert (jax.jit(lambda v, p=given: gs.constrain(v, ("batch", "heads"), p))(x) == x).all()


class _Up(nnx.Module):
    def __init__(self, rngs):
        init = nnx.initializers.zeros_init()
        self.kernel = nnx.Param(nnx.with_partitioning(init, ("embed", "mlp"))(rngs.params(), (8, 4)))
        self.bias = nnx.Param(nnx.with_partitioning(init, ("mlp",))(rngs.params(), (4,)))
        self.scale = nnx.Param(jnp.ones((4,)))  # no annotation


def test_a_replicated_spec_reads_P_of_nothing_however_it_came():
    # Was P(None) for bias (its "mlp" mapped to None under fsdp) beside P() for scale (no annotation): a grep for
    # "P()" missed it
    mesh = gs.make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fsdp is experimental; scale unannotated
        model = gs.init_sharded(lambda: _Up(nnx.Rngs(0)), mesh, "fsdp")
    specs = gs.partition_specs(model)
    assert specs == {"bias": "P()", "kernel": "P('data', None)", "scale": "P()"}
    text = str(gs.describe(model, mesh))
    assert "P(None)" not in text and "P('data', None)" in text


def test_library_docs_say_how_to_pin_moments_a_plain_jitted_step_may_move():
    page = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text()
    said = page.split("a plain `nnx.jit` step (no `out_shardings`)", 1)
    assert len(said) == 2, "the sentence on small optimizer moments is missing"
    assert "out_shardings" in said[1][:500] and "place((model, optimizer), plan)" in said[1][:500]
