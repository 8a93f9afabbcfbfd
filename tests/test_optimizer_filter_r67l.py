"""``init_optimizer_sharded``'s ``wrt``: a callable that cannot be an nnx filter is refused by name, the model kept.

Found by round 67's fuzzer: wrt=mesh (a Mesh is callable, as a context decorator) or wrt=lambda: True passed the
filter check, then Flax called it with (path, value): "TypeError: ContextDecorator.__call__() takes 2 positional
arguments but 3 were given", from inside Flax, naming neither wrt nor a filter.
"""

import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from library_helpers import Annotated


@pytest.mark.parametrize("bad", ["mesh", "no_arguments", "nested"])
def test_a_callable_wrt_that_cannot_take_path_and_value_is_named_and_the_fix_builds(devices, bad):
    mesh = gs.make_mesh(model_axis=2)
    model = Annotated()
    gs.shard_model(model, mesh, "tensor")
    held = model.kernel.get_value()
    wrt = {"mesh": mesh, "no_arguments": lambda: True, "nested": [nnx.Param, (lambda path: True,)]}[bad]
    with pytest.raises(TypeError, match=r"^wrt=.* holds .*, a callable that cannot take \(path, value\) as an nnx "
                                        r"filter does \(.*\): pass e\.g\. nnx\.Param, or a def keep\(path, value\)"):
        gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor", wrt=wrt)
    assert model.kernel.get_value() is held  # nothing placed anew

    def keep(path, value):  # the advice, followed
        return isinstance(value, nnx.Param) and path[-1] == "kernel"

    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor", wrt=keep)
    moments = nnx.state(optimizer.opt_state)
    kept = {"/".join(map(str, path)) for path, _ in nnx.to_flat_state(moments)}
    assert any(k.endswith("kernel") for k in kept) and not any(k.endswith("bias") for k in kept), kept
    mu = next(v for p, v in nnx.to_flat_state(moments) if p[-1] == "kernel")
    np.testing.assert_array_equal(mu.get_value(), np.zeros((8, 4)))
    assert mu.get_value().sharding.spec == held.sharding.spec
