"""``init_sharded`` given what is no concrete mesh: refused by name before the factory runs, with a fix that works.

Found by round 67's fuzzer: an AbstractMesh passed the plan (plan_shardings takes one) and then failed inside JAX,
"ValueError: AbstractMesh does not implement local_devices", naming neither the argument nor abstract_sharded.
"""

import numpy as np
import pytest
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import Annotated


def test_init_sharded_given_an_abstract_mesh_names_it_and_abstract_sharded_which_takes_it(devices):
    mesh = AbstractMesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    calls = []

    def factory():
        calls.append(1)
        return Annotated()

    with pytest.raises(TypeError, match=r"^init_sharded places arrays, so it needs a concrete jax.sharding.Mesh, "
                                        r"got AbstractMesh\('data': 4, 'model': 2.*abstract_sharded\(factory, mesh, "
                                        r"rule\)"):
        gs.init_sharded(factory, mesh, "tensor")
    assert calls == []  # refused before tracing the constructor
    abstract = gs.abstract_sharded(factory, mesh, "tensor")  # the advice, followed
    assert abstract.kernel.get_value().sharding.spec == P(None, "model")
    assert abstract.kernel.get_value().shape == (8, 4)


def test_init_sharded_given_no_mesh_at_all_says_none_is_accepted_before_tracing(devices):
    calls = []

    def factory():
        calls.append(1)
        return Annotated()

    with pytest.raises(TypeError, match=r"^mesh must be a jax.sharding.Mesh or None, got 'auto'; build one"):
        gs.init_sharded(factory, "auto", "fsdp")
    assert calls == []
    model = gs.init_sharded(factory, gs.resolve_mesh("auto"), "replicated")
    assert isinstance(model.kernel.get_value().sharding, NamedSharding)
    np.testing.assert_array_equal(model.kernel.get_value(), np.arange(32.0).reshape(8, 4))
