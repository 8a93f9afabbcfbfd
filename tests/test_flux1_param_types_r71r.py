"""flux1_params from Python takes the NumPy values it took before r71m ran check_model on its keywords (r71r).

r71m built an OmegaConf section of the keywords for check_model; OmegaConf refuses a np.dtype or a NumPy scalar
(UnsupportedValueType), so ``dtype=np.dtype("float32")``, which compute_dtype and GenSBI take, and a
``theta=np.int64(...)`` failed with OmegaConf's words, and ``dtype=jnp.float32`` lost its ValueError naming
``model.dtype``.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

pytest.importorskip("gensbi")

from gensbi_sharding.harness.models.flux1 import flux1_params  # noqa: E402

SMALL = dict(dim_theta=2, dim_x=2, num_heads=2, depth=1, depth_single_blocks=1, axes_dim=[4, 0])


@pytest.mark.parametrize("given, field, value", [
    (dict(dtype=np.dtype("float32")), "dtype", jnp.float32),
    (dict(param_dtype=jnp.dtype("bfloat16")), "param_dtype", jnp.bfloat16),
    (dict(theta=np.int64(1000), id_embedding_strategy=["rope1d", "rope1d"]), "theta", 1000),
    (dict(mlp_ratio=np.float32(2.0)), "mlp_ratio", 2.0),
])
def test_numpy_values_are_taken(given, field, value):
    params = flux1_params(rngs=nnx.Rngs(0), **SMALL, **given)
    assert getattr(params, field) == value


def test_a_dtype_class_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"^model\.dtype=<class 'jax\.numpy\.float32'> is not one of float32"):
        flux1_params(rngs=nnx.Rngs(0), **SMALL, dtype=jnp.float32)
