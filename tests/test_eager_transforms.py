"""The library's refusals under an eager ``jax.grad`` or ``jax.vmap`` (no jit anywhere): each names the transformation
the caller is under, never ``jax.jit`` alone, and its fix; the same calls outside still work."""

import warnings

import jax
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from library_helpers import mesh  # noqa: F401 (a fixture)

UNDER = "under a JAX transformation (jax.jit, jax.grad, ...)"


def _model(mesh):
    model = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
    gs.shard_model(model, mesh, "replicated")
    return model


CALLS = {  # what each call raises under the transformation: its error type and its message's start
    "describe": (lambda m, mesh: gs.describe(m, mesh), TypeError, f"bias is a traced array {UNDER}, placed nowhere"),
    "sharding_of": (lambda m, mesh: gs.sharding_of(m), TypeError, f"bias is a traced array {UNDER}, placed nowhere"),
    "init_sharded": (lambda m, mesh: gs.init_sharded(lambda: nnx.Linear(4, 4, rngs=nnx.Rngs(0)), mesh), ValueError,
                     f"init_sharded was called {UNDER}: call it outside"),
    "mesh_context": (lambda m, mesh: gs.mesh_context(mesh).__enter__(), ValueError,
                     f"mesh_context {UNDER}: JAX sets a mesh outside them only; enter it around the call"),
    "host_to_global_array": (lambda m, mesh: gs.host_to_global_array(np.ones((8, 2), np.float32)), ValueError,
                             f"host_to_global_array was called {UNDER}: it runs outside them"),
    "shard_model": (lambda m, mesh: gs.shard_model(m, mesh), ValueError, "shard_model got bias as a traced array: it "
                    "places a model outside jax.jit and nnx.jit and every other JAX transformation (jax.grad, "),
    "init_optimizer_sharded": (lambda m, mesh: gs.init_optimizer_sharded(m, optax.adam(1e-3)), ValueError,
                               "init_optimizer_sharded got bias as a traced array: call it outside every JAX "
                               "transformation (jax.jit, nnx.jit, jax.grad, "),
}


READ_THE_MODEL = {"describe", "sharding_of", "shard_model", "init_optimizer_sharded"}  # under vmap it stays placed


@pytest.mark.parametrize("name, transform", [(name, transform) for name in CALLS for transform in ("grad", "vmap")
                                             if transform == "grad" or name not in READ_THE_MODEL])
@pytest.mark.fast_cases(3)
def test_a_call_under_an_eager_transformation_names_it_not_jit(mesh, name, transform):  # noqa: F811
    # Was: describe/sharding_of "(inside jax.jit or nnx.jit)"; init_sharded and mesh_context JAX's "`set_mesh` can
    # only be used outside of `jax.jit`"; host_to_global_array "runs outside jax.jit"; shard_model and
    # init_optimizer_sharded "outside jax.jit and nnx.jit": no jit there (an eager grad's arrays are tracers too).
    call, error_type, start = CALLS[name]
    model, seen = _model(mesh), []

    def loss(model, x):
        with pytest.raises(error_type) as error, warnings.catch_warnings(action="ignore"):
            call(model, mesh)
        seen.append(str(error.value))
        return (model.kernel[...] * x).sum()

    if transform == "grad":
        nnx.grad(loss)(model, np.float32(1))
    else:
        nnx.vmap(loss, in_axes=(None, 0))(model, np.ones(2, np.float32))
    assert seen and seen[0].startswith(start), seen
    with warnings.catch_warnings(action="ignore"), gs.mesh_context(mesh):  # outside: no refusal
        call(model, mesh)
