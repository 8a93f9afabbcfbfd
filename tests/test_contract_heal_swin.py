"""Our vocabulary and placements equal the installed heal_swin_nnx's (the cross-repo contract).

heal-swin-nnx is a test dependency, installed by the README's test command: this
test runs, it never skips.
"""

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from heal_swin_nnx import sharding as reference
from jax.sharding import PartitionSpec as P

import gensbi_sharding as ours


def test_constants_are_equal():
    assert ours.LOGICAL_AXES == reference.LOGICAL_AXES
    assert ours.RULES == reference.RULES
    assert list(ours.RULES) == list(reference.RULES)
    assert ours.MODEL_AXIS == reference.MODEL_AXIS


@pytest.mark.parametrize("names", [("embed", "mlp"), ("heads",), (None, "vocab"), ()])
def test_annotations_are_equal(names):
    assert ours.axes(*names) == reference.axes(*names)
    init = nnx.initializers.ones
    shape = (4,) * len(names)
    ours_var = nnx.Param(ours.partitioned(init, names)(None, shape))
    theirs_var = nnx.Param(reference.partitioned(init, names)(None, shape))
    assert ours_var.get_metadata() == theirs_var.get_metadata()


class Sample(nnx.Module):
    """A sample model both implementations can place (no duplicate mesh axes)."""

    def __init__(self, make_axes, make_partitioned, rngs):
        init = nnx.initializers.lecun_normal()
        self.embed = nnx.Embed(16, 8, embedding_init=make_partitioned(init, ("vocab", "embed")),
                               rngs=rngs)
        self.up = nnx.Linear(8, 32, kernel_init=make_partitioned(init, ("embed", "mlp")), rngs=rngs)
        self.qkv = nnx.Param(jnp.ones((8, 4, 2)), **make_axes("embed", "heads", None))
        self.odd = nnx.Param(jnp.ones((6, 3)), **make_axes("embed", "mlp"))
        self.io = nnx.Param(jnp.ones((8, 2)), **make_axes("in", "out"))
        self.norm = nnx.LayerNorm(8, rngs=rngs)


@pytest.mark.parametrize("rule", ["replicated", "fsdp", "tensor"])
@pytest.mark.parametrize("model_axis", [1, 2, 4])
@pytest.mark.fast_cases(3)
def test_placements_are_equal(rule, model_axis):
    mesh = ours.make_mesh(model_axis=model_axis)
    reference_mesh = reference.make_mesh(model_axis=model_axis)
    assert mesh.devices.tolist() == reference_mesh.devices.tolist()
    assert mesh.axis_names == reference_mesh.axis_names
    mine = Sample(ours.axes, ours.partitioned, nnx.Rngs(0))
    theirs = Sample(reference.axes, reference.partitioned, nnx.Rngs(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.shard_model(mine, mesh, rule)
        reference.shard_model(theirs, reference_mesh, rule)
    mine_shardings, their_shardings = ours.sharding_of(mine), reference.sharding_of(theirs)
    assert mine_shardings.keys() == their_shardings.keys()
    ndims = {"/".join(map(str, path)): var.get_value().ndim
             for path, var in nnx.to_flat_state(nnx.state(theirs))}
    for path, sharding in their_shardings.items():
        ndim = ndims[path]
        assert mine_shardings[path].is_equivalent_to(sharding, ndim), (path, mine_shardings[path], sharding)
    assert ours.batch_axes(mesh) == reference.batch_axes(reference_mesh)
    assert ours.batch_size_divisor(mesh) == reference.batch_size_divisor(reference_mesh)


class TwoOnOneAxis(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.ones((8, 4)), **ours.axes("mlp", "heads"))  # both on "model" under tensor


class OneAnnotated(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.ones((8, 4)), **ours.axes("embed", "mlp"))


class PythonScalar(nnx.Module):
    def __init__(self):
        self.w, self.scale = nnx.Param(jnp.ones((8, 4))), nnx.Param(2.0)


@pytest.mark.parametrize("model, axes, error, placed, readme", [
    (TwoOnOneAxis, ("data", "model"), "DuplicateSpecError", {"w": P()}, "`DuplicateSpecError` there"),
    (OneAnnotated, ("dp", "tp"), "KeyError", {"w": P()}, "heal_swin_nnx's `KeyError: 'model'`"),
    (PythonScalar, ("data", "model"), "TypeError", {"w": P(), "scale": 2.0}, "`nnx.Param(2.0)`"),
])
def test_where_the_contract_raises_ours_places_and_the_readme_says_so(model, axes, error, placed, readme):
    # The README said "this package is that contract, exactly"; these three raise there and place here.
    mesh = jax.make_mesh((4, 2), axes, axis_types=(jax.sharding.AxisType.Auto,) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as raised:
            reference.shard_model(model(), mesh, "tensor")
        mine = model()
        ours.shard_model(mine, mesh, "tensor")
    assert type(raised.value).__name__ == error
    got = {path: getattr(v, "sharding", v) for path, v in
           (("/".join(map(str, p)), var.get_value()) for p, var in nnx.to_flat_state(nnx.state(mine)))}
    assert {k: v.spec if isinstance(v, jax.sharding.NamedSharding) else v for k, v in got.items()} == placed
    assert readme in " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
