"""``describe`` and ``bytes_per_device`` count an array once where two variables (or two leaves) hold it.

Tied weights (one ``nnx.Param`` as two attributes) were already counted once (``nnx.state`` holds it once). Two
variables wrapping one ``jax.Array`` (``nnx.Param(x)`` twice, e.g. an EMA copy started from the weights) counted it
twice: 2 x 256 KB per device where the device holds 256 KB. In-process, 8 simulated CPU devices (conftest).
"""

import jax
import jax.numpy as jnp
from flax import nnx

import gensbi_sharding as gs

ONE = 256 * 256 * 4  # one float32 (256, 256) array


class _Tied(nnx.Module):
    def __init__(self):
        self.a = nnx.Param(jnp.ones((256, 256)))
        self.b = self.a  # one variable, two attributes


class _Wrapped(nnx.Module):
    def __init__(self, x):
        self.a, self.b = nnx.Param(x), nnx.Param(x)  # two variables, one array


def test_an_array_two_variables_hold_is_counted_once():
    x = jax.device_put(jnp.ones((256, 256)), jax.devices()[0])
    for model in (_Tied(), _Wrapped(x)):
        assert gs.bytes_per_device(model) == {0: ONE}
        report = gs.describe(model, None)
        assert report.bytes_per_device == {0: ONE}
        assert report.max_bytes_per_device == ONE
    assert gs.bytes_per_device({"a": x, "b": x, "c": jnp.ones((256, 256), device=jax.devices()[0])}) == {0: 2 * ONE}
    report = gs.describe(_Wrapped(x), None)  # each variable's own row still shows its bytes
    assert [v.max_device_bytes for v in report.variables] == [ONE, ONE]


def test_two_arrays_alike_are_counted_twice():
    model = _Wrapped(jnp.ones((256, 256)))
    model.b = nnx.Param(jnp.ones((256, 256)))  # equal values, two buffers
    assert gs.bytes_per_device(model) == {0: 2 * ONE}
    assert gs.describe(model, None).bytes_per_device == {0: 2 * ONE}
