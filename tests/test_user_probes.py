"""Faults found by using the library as its users do (8 simulated CPU devices), each pinned here.

A model holding Python or NumPy scalar variables (a counter, a flag), which ``init_sharded`` keeps as values, saved
by ``CheckpointWriter`` and restored onto another mesh and rule through every target ``abstract_state_for`` builds;
``partition_specs`` and ``bytes_per_device`` of an abstract model; ``constrain`` and ``compiled_report`` given the wrong thing.
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding import checkpoint


class WithScalars(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(8, 16, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"))
        self.count = nnx.Variable(5)
        self.rate = nnx.Variable(2.5)
        self.flag = nnx.Variable(True)
        self.scale = nnx.Variable(np.float32(1.5))


def build():
    return WithScalars(nnx.Rngs(0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory, devices):
    mesh = gs.make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental-rule notice
        model = gs.init_sharded(build, mesh, "fsdp")
    model.count.set_value(7)  # a value the fresh model does not hold
    model.rate.set_value(0.25)
    model.flag.set_value(False)
    model.scale.set_value(np.float32(3.0))
    folder = tmp_path_factory.mktemp("scalars")
    with checkpoint.CheckpointWriter(folder) as writer:
        writer.save(4, nnx.state(model), jax.random.key(0))
    return folder, model


@pytest.mark.parametrize("target", ["factory", "model", "abstract"])
@pytest.mark.parametrize("where", ["tensor on 2x2", "no mesh"])
def test_scalar_variables_restore_as_saved_through_every_target(saved, target, where):
    # Was a ValueError either way: "saved () int64, target () int32 ... Build the model with the
    # hyperparameters saved" for a factory (nnx.eval_shape made the scalars int32/float32 arrays), and
    # "restore target state/count is int without a sharding" for a built or abstract model.
    folder, model = saved
    mesh = gs.make_mesh(jax.devices()[:4], model_axis=2) if where != "no mesh" else None
    node = {"factory": build, "model": build(),
            "abstract": gs.abstract_sharded(build, None if mesh is None else mesh, "tensor", warn=False)}[target]
    restored = checkpoint.restore(folder, checkpoint.abstract_state_for(node, mesh, "tensor"))
    state = restored.state
    got = {name: state[name].get_value() for name in ("count", "rate", "flag", "scale")}
    assert got == {"count": 7, "rate": 0.25, "flag": False, "scale": np.float32(3.0)}
    assert [type(v) for v in got.values()] == [int, float, bool, np.float32]
    kernel = state["up"]["kernel"].get_value()
    np.testing.assert_array_equal(np.asarray(kernel), np.asarray(model.up.kernel.get_value()))
    if mesh is not None:
        assert state["up"]["kernel"].get_value().sharding.spec == jax.sharding.PartitionSpec(None, "model")


def test_abstract_state_for_keeps_scalars_of_a_factory(devices):
    mesh = gs.make_mesh(model_axis=2)
    for where in (mesh, None):
        target = checkpoint.abstract_state_for(build, where, "fsdp")
        assert (target["count"].get_value(), target["scale"].get_value()) == (5, np.float32(1.5))
        assert isinstance(target["up"]["kernel"].get_value(), jax.ShapeDtypeStruct)


def test_abstract_state_for_names_itself_when_the_factory_returns_no_node():
    with pytest.raises(TypeError, match=r"abstract_state_for \(what the factory returned\).*got int 3"):
        checkpoint.abstract_state_for(lambda: 3, None)


def test_partition_specs_reads_an_abstract_model(devices):
    # Was {}: only concrete arrays were read, so a dry run's abstract_sharded model reported no placement at all.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(build, mesh, "tensor", warn=False)
    assert gs.partition_specs(abstract) == {"up/bias": "P()", "up/kernel": "P(None, 'model')"}
    # nnx.eval_shape: no shardings, the scalars abstract too.
    assert set(gs.partition_specs(nnx.eval_shape(build)).values()) == {"unplaced"}
    placed = gs.init_sharded(build, mesh, "tensor", warn=False)
    assert gs.partition_specs(placed) == gs.partition_specs(abstract)


@pytest.mark.parametrize("names, example", [(None, "('batch', None)"), (3, "('batch', None)"), ("batch", "('batch',)")])
def test_constrain_names_not_a_sequence_is_a_clear_error(devices, names, example):
    # None (or a number) was a bare TypeError from len(): "object of type 'NoneType' has no len()".
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=rf"activation names {names!r} must be a sequence.*e\.g\. {re.escape(example)}"):
        gs.constrain(jnp.ones((8, 4)), names, gs.PartitionAxis(), mesh)


@pytest.mark.parametrize("given, fix", [
    (lambda: jax.jit(lambda x: x).lower(np.ones(2)), "got Lowered; call its .compile()"),
    (lambda: jax.jit(lambda x: x), "got PjitFunction; pass jax.jit(f).lower(*args).compile()"),
    (lambda: (lambda x: x), "got function; pass jax.jit(f).lower(*args).compile()")])
def test_compiled_report_names_the_fix_that_fits_what_it_got(given, fix):
    # Every refusal said "(a Lowered: call .compile())", a plain function and a jitted one too.
    with pytest.raises(ValueError, match=re.escape(f"expected a compiled program, {fix}")):
        gs.compiled_report(given())


def test_bytes_per_device_reads_an_abstract_model(devices):
    # Was {}: the module promises bytes "of a state (abstract too: nothing allocated)", but only jax.Array counted.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(build, mesh, "tensor", warn=False)
    placed = gs.init_sharded(build, mesh, "tensor", warn=False)
    # up/kernel (8, 16) float32 split in 2 over "model": 256 B; up/bias (16,) replicated: 64 B.
    assert gs.bytes_per_device(abstract) == gs.bytes_per_device(placed) == {d: 320 for d in range(8)}
    assert gs.bytes_per_device(nnx.eval_shape(build)) == {}
