"""A factory that cannot be called with no arguments (a class needing them, a one-argument lambda, a mesh passed
first) is refused by name before tracing, by abstract_state_for as by init_sharded and abstract_sharded.

Found by round 67's fuzzer: abstract_state_for(nnx.Linear, mesh) raised the call's own "TypeError: Linear.__init__()
missing 2 required positional arguments" from inside Flax, and abstract_state_for(mesh, ...) "ContextDecorator.
__call__() missing 1 required positional argument: 'func'", naming neither the factory nor the fix; init_sharded
and abstract_sharded checked this, and told a mesh passed first to "bind them: lambda: factory(...)".
"""

import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import abstract_state_for
from library_helpers import AxesBlock

CALLS = {"abstract_state_for": abstract_state_for, "init_sharded": gs.init_sharded,
         "abstract_sharded": gs.abstract_sharded}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
@pytest.mark.parametrize("factory, named", [(nnx.Linear, "'Linear'"), (lambda rngs: AxesBlock(rngs), "'<lambda>'")])
def test_a_factory_taking_arguments_is_refused_by_name_and_binding_them_builds(devices, call, factory, named):
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=rf"^factory {named} must be callable with no arguments \(missing a required "
                                         r"argument: '\w+'\); bind them: lambda: factory\(\.\.\.\)$"):
        call(factory, mesh, "tensor")
    built = call(lambda: AxesBlock(nnx.Rngs(0)), mesh, "tensor")  # the advice, followed
    kernel = built["up"]["kernel"] if call is abstract_state_for else built.up.kernel
    assert kernel.get_value().sharding.spec == P(None, "model")


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_mesh_passed_as_the_factory_is_told_the_order(devices, call):
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=r"^factory is a mesh, Mesh\(axis_sizes=\(4, 2\).*: the factory goes first, "
                                         r"the mesh second, e\.g\. \(lambda: Model\(rngs=nnx\.Rngs\(0\)\), mesh, "
                                         r"rule\)$"):
        call(mesh, mesh, "tensor")
