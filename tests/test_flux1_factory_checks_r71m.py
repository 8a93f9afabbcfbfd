"""make_flux1 / flux1_params from Python run the same checks as a model=flux1 section (r71m).

Before: a value check_model refuses in the harness reached GenSBI from Python and failed deep inside it, naming
no setting (axes_dim=[0,0]: ZeroDivisionError; mlp_ratio=-1: a TypeError about broadcasting shapes), or built
a model whose velocity is NaN everywhere (theta=0 with rope1d ids), though the docstring promises a ValueError
naming the model.<field> override.
"""

import jax.numpy as jnp
import pytest
from flax import nnx

pytest.importorskip("gensbi")

from gensbi_sharding.harness.models.flux1 import flux1_params, make_flux1  # noqa: E402

SMALL = dict(dim_theta=2, dim_x=2, num_heads=2, depth=1, depth_single_blocks=1, axes_dim=[4, 0])


@pytest.mark.parametrize("bad, named", [
    (dict(theta=0, id_embedding_strategy=["rope1d", "rope1d"]), "model.theta=0"),
    (dict(mlp_ratio=-1.0), "model.mlp_ratio=-1.0"),
    (dict(axes_dim=[0, 0]), "model.axes_dim=[0,0]"),
])
def test_make_flux1_refuses_what_the_harness_refuses_naming_the_field(bad, named):
    with pytest.raises(ValueError, match=r"must"):
        try:
            make_flux1(rngs=nnx.Rngs(0), **{**SMALL, **bad})
        except ValueError as err:
            assert named in str(err), str(err)
            raise


@pytest.mark.slow  # builds and calls a Flux1 (compiles it): seconds on 2 cores
def test_flux1_params_still_builds_a_valid_model_and_it_runs():
    params = flux1_params(rngs=nnx.Rngs(0), **SMALL)
    assert (params.num_heads, params.depth, params.depth_single_blocks) == (2, 1, 1)
    model = make_flux1(rngs=nnx.Rngs(0), **SMALL)
    # Jitted, as a run calls it: one program, at less CPU than compiling each of its ops on its own (op by op)
    out = nnx.jit(lambda model, *inputs: model(*inputs))(model, jnp.ones((3, 2)), jnp.ones((3, 2)), jnp.full((3,), 0.5))
    assert out.shape == (3, 2) and bool(jnp.isfinite(out).all())
