"""Checkpoint calls under a JAX transformation (``restore``, ``CheckpointWriter.save/maybe_save/due`` in
``jax.jit``, ``nnx.jit``, ``jax.vmap``): one RuntimeError naming the call and the fix, nothing written.

Before: ``restore`` under ``jax.jit`` called a GOOD checkpoint "damaged ... start without it"; ``save`` raised Orbax's
"TypeHandler lookup failed" and left a ``<step>.orbax-checkpoint-tmp`` folder; ``maybe_save`` JAX's
ConcretizationTypeError; ``save`` under ``nnx.jit`` an AttributeError ("'sharding' ... on traced array").
In-process, 8 simulated CPU devices (conftest); a tiny Linear.
"""

import jax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, restore

TRACED = r"called under a JAX transformation \(jax\.jit, nnx\.jit, jax\.vmap, \.\.\.\)"


def _factory():
    return nnx.Linear(4, 2, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(_factory, mesh, "replicated")
    directory = tmp_path_factory.mktemp("ckpt") / "checkpoints"
    with CheckpointWriter(directory) as writer:
        writer.save(1, nnx.state(model), jax.random.key(0))
    return directory, mesh, model


@pytest.mark.parametrize("transform", ["jax.jit", "jax.vmap"])
def test_restore_under_a_transformation_is_refused_naming_the_fix_not_a_damaged_checkpoint(saved, transform):
    directory, mesh, model = saved
    target = abstract_state_for(model, mesh, "replicated")
    call = lambda x: (restore(directory / "1", target), x)[1]  # noqa: E731
    wrapped = jax.jit(call) if transform == "jax.jit" else jax.vmap(call)
    with pytest.raises(RuntimeError, match=rf"^restore {TRACED}: it reads files .*restore before the step function, "
                                           r"nnx\.update\(model, restore\(path, abstract_state_for"):
        wrapped(jax.numpy.ones(2))
    assert restore(directory / "1", target).step == 1  # the checkpoint was good all along


@pytest.mark.parametrize("call", ["save", "maybe_save", "due"])
@pytest.mark.parametrize("transform", ["jax.jit", "nnx.jit", "jax.vmap"])
def test_the_writer_under_a_transformation_is_refused_naming_the_call_and_nothing_is_written(saved, tmp_path,
                                                                                            call, transform):
    _, _, model = saved
    directory = tmp_path / "checkpoints"
    with CheckpointWriter(directory, every=2) as writer:
        def step(m, s):
            args = (s,) if call == "due" else (s, nnx.state(m), jax.random.key(0))
            getattr(writer, call)(*args)
            return s

        if transform == "nnx.jit":
            run = lambda: nnx.jit(step)(model, 2)  # noqa: E731
        elif transform == "jax.jit":
            run = lambda: jax.jit(lambda s: step(model, s))(2)  # noqa: E731
        else:
            run = lambda: jax.vmap(lambda s: step(model, s))(jax.numpy.array([2, 4]))  # noqa: E731
        with pytest.raises(RuntimeError, match=rf"^CheckpointWriter\.{call} {TRACED}: it writes files once per call"
                                               r".*after the jitted step returns, writer\.maybe_save\(int\("):
            run()
        assert writer.steps() == []
        assert writer.save(2, nnx.state(model), jax.random.key(0))  # the same call outside the trace saves
    assert sorted(p.name for p in directory.iterdir()) == ["2"]  # no <step>.orbax-checkpoint-tmp left
