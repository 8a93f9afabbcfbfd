"""The library broken with odd-but-valid input, round 49: an optimizer state holding inf outside the known sentinels
(a user's running max) refused once saved as a plain dict; NumPy's longdouble (float128) told to "pass numbers" or
to keep it out of the state, when the fix is a cast, and as a NumPy scalar in a batch kept unplaced.

In-process, 8 simulated CPU devices (conftest); tiny arrays."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, restore


class _RunningMax(NamedTuple):
    largest: dict  # the largest update seen per parameter: -inf before the first
    bound: jax.Array  # [inf, 1.0]: inf in an array that is not all inf


def _running_max() -> optax.GradientTransformation:
    def init(params):
        return _RunningMax(jax.tree.map(lambda p: jnp.full(p.shape, -jnp.inf, p.dtype), params),
                           jnp.array([jnp.inf, 1.0]))

    def update(updates, state, params=None):
        return updates, state._replace(largest=jax.tree.map(jnp.maximum, state.largest, updates))

    return optax.GradientTransformation(init, update)


def test_an_optimizer_state_holding_inf_anywhere_is_saved_and_restored_as_is_in_every_form(tmp_path, devices):
    # Was: saved as nnx.state(optimizer) (OptState variables), yet as a plain dict (nnx.to_pure_dict) refused,
    # "the train state at step 2 is not finite (3 array(s) hold NaN or inf, e.g. opt/opt_state/1/bound, ...)".
    mesh = gs.make_mesh(model_axis=2)
    build = lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0))  # noqa: E731
    tx = lambda: optax.chain(optax.adam(1e-3), _running_max())  # noqa: E731
    model = gs.init_sharded(build, mesh)
    optimizer = gs.init_optimizer_sharded(model, tx())
    pure = lambda: {"model": nnx.to_pure_dict(nnx.state(model)),  # noqa: E731
                    "opt": nnx.to_pure_dict(nnx.state(optimizer))}
    with CheckpointWriter(tmp_path / "checkpoints", keep=3, async_save=False) as writer:
        assert writer.save(1, {"model": nnx.state(model), "opt": nnx.state(optimizer)}, jax.random.key(0))
        assert writer.save(2, pure(), jax.random.key(0))
        # NaN in the optimizer's state, or inf in the model's, is still refused in the plain form too.
        optimizer.opt_state[1].bound[...] = jnp.array([jnp.nan, 1.0])
        with pytest.raises(FloatingPointError, match=r"step 3 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"opt/opt_state/1/bound\)"):
            writer.save(3, pure(), jax.random.key(0))
        optimizer.opt_state[1].bound[...] = jnp.array([jnp.inf, 1.0])
        model.bias[...] = model.bias[...].at[0].set(jnp.inf)
        with pytest.raises(FloatingPointError, match=r"step 3 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"model/bias\)"):
            writer.save(3, pure(), jax.random.key(0))
        assert writer.steps() == [1, 2]
    target = abstract_state_for(lambda: {"model": build(), "opt": nnx.Optimizer(build(), tx(), wrt=nnx.Param)}, mesh)
    for step in (1, 2):
        state = restore(tmp_path / "checkpoints" / str(step), target).state["opt"]["opt_state"][1]
        assert np.all(np.asarray(state["largest"]["kernel"][...]) == -np.inf)
        assert np.asarray(state["bound"][...]).tolist() == [np.inf, 1.0]


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="np.longdouble is float64 here: JAX holds it")
def test_numpy_longdouble_is_told_to_cast_wherever_it_is_refused(devices, tmp_path):
    # Was: "pass numbers (e.g. integer codes ...)" as a batch leaf (it is numbers) and "keep other data as a plain
    # attribute of the Module" as a variable's value (it is a model's number); a NumPy longdouble scalar in a batch was
    # kept unplaced, failing in the jitted step. The fix is a cast.
    mesh = gs.make_mesh(model_axis=2)
    cast = r"which no JAX array holds: cast it to float64, x\.astype\(np\.float64\) \(placed as float32"
    for leaf in (np.ones(8, np.longdouble), np.longdouble(1.5)):
        with pytest.raises(TypeError, match=rf"leaf \['x'\] \(shape {re_shape(leaf)}\) has dtype float128, {cast}"):
            gs.shard_batch({"x": leaf}, mesh)
        # The cast told goes through: an array placed (as float32), a scalar kept as it is, as every NumPy scalar.
        assert gs.shard_batch({"x": leaf.astype(np.float64)}, mesh)["x"].dtype == (jnp.float32 if leaf.ndim else
                                                                                   np.float64)
    with pytest.raises(TypeError, match=r"\['x'\] \(shape \(8,\)\) has dtype complex256, which no JAX array holds: "
                                        r"cast it to complex128, x\.astype\(np\.complex128\)"):
        gs.replicate({"x": np.ones(8, np.clongdouble)}, mesh)

    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones(4))
            self.scale = nnx.Variable(np.longdouble(1.5))

    told = r"must be an array \(JAX or NumPy\) or a Python/NumPy number or bool: cast it to float64, x\.astype"
    with pytest.raises(TypeError, match=rf"^init_sharded: scale holds longdouble of dtype float128; .*{told}"):
        gs.init_sharded(Model, mesh)
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=rf"^CheckpointWriter\.save: scale holds longdouble .*{told}"):
            writer.save(1, Model(), jax.random.key(0))


def re_shape(leaf: np.ndarray) -> str:
    """``leaf``'s shape as a regular expression."""
    return str(leaf.shape).replace("(", r"\(").replace(")", r"\)")


def _abstract_on(mesh, spec):
    """A Linear's state as ``jax.ShapeDtypeStruct`` leaves placed at ``spec`` on ``mesh``'s ``AbstractMesh``."""
    state = nnx.state(nnx.Linear(8, 4, rngs=nnx.Rngs(0)))
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(
        a.shape, a.dtype, sharding=jax.sharding.NamedSharding(mesh.abstract_mesh, spec if a.ndim == 2 else P())),
        state)


def test_a_state_on_an_abstract_mesh_is_counted_on_the_concrete_mesh_given_else_refused_naming_it(devices):
    # Was: describe(state, mesh), describe(state, None) and bytes_per_device(state) all raised JAX's
    # "_device_assignment is not implemented for `jax.sharding.AbstractMesh`", naming no variable and no fix.
    mesh = gs.make_mesh(model_axis=2)
    abstract = _abstract_on(mesh, P("data", "model"))
    placed = jax.tree.map(lambda s: jax.device_put(jnp.zeros(s.shape, s.dtype),
                                                   jax.sharding.NamedSharding(mesh, s.sharding.spec)), abstract)
    report, expected = gs.describe(abstract, mesh), gs.describe(placed, mesh)
    assert report.bytes_per_device == expected.bytes_per_device
    assert report.placements == expected.placements == {"bias": "P()", "kernel": "P('data', 'model')"}
    assert max(report.bytes_per_device.values()) == 4 * 4 + 16  # a (2, 2) float32 shard of the kernel + the bias
    for call in (lambda: gs.describe(abstract, None), lambda: gs.bytes_per_device(abstract),
                 lambda: gs.describe(abstract, gs.make_mesh(model_axis=4))):  # none, or another layout
        with pytest.raises(ValueError, match=r"^bias\S* is placed on an abstract mesh \{'data': 4, 'model': 2\}"
                                             r".*pass its concrete mesh: describe\(node, mesh\)"):
            call()


def test_a_state_of_jax_typeof_values_is_refused_naming_the_variable_not_reported_empty(devices):
    # Was: describe skipped jax.typeof's ShapedArray leaves (a report of 0 leaves, 0 B) and bytes_per_device returned
    # {}: its sharding lists Explicit mesh axes only, so a kernel split over Auto axes would read replicated.
    mesh = gs.make_mesh(model_axis=2)
    placed = jax.tree.map(lambda s: jax.device_put(jnp.zeros(s.shape, s.dtype), jax.sharding.NamedSharding(
        mesh, s.sharding.spec)), _abstract_on(mesh, P("data", "model")))
    typed = jax.tree.map(jax.typeof, placed)
    for call in (lambda: gs.describe(typed, mesh), lambda: gs.describe(typed, None), lambda: gs.bytes_per_device(typed)):
        with pytest.raises(TypeError, match=r"^bias\S* is float32\[4\] \(jax.typeof's\).*pass the arrays, or "
                                            r"jax.ShapeDtypeStruct leaves"):
            call()
    assert gs.describe(placed, mesh).n_leaves == 2  # the arrays themselves: counted
