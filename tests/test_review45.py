"""Round 45's own fixes reviewed: valid input one of its new checks refused. A variable annotated with a
PartitionSpec (Flax takes one as ``sharding``) and a nested ``wrt`` filter tuple, both valid Flax.

In-process, 8 simulated CPU devices (conftest); tiny models."""

import jax
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs


def _annotated_by_a_partition_spec() -> nnx.Linear:
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), P(None, "mlp"), eager_sharding=False)
    return nnx.Linear(4, 8, kernel_init=init, rngs=nnx.Rngs(0))


def test_a_partition_spec_annotation_is_planned_by_its_entries(devices):
    # Was (round 45's 'a bare 5 is one odd entry'): a PartitionSpec, no Sequence in this JAX, read as one entry,
    # the kernel replicated with "annotation entry P(None, 'mlp') (P) is no logical axis name".
    mesh = gs.make_mesh(model_axis=2)
    model = _annotated_by_a_partition_spec()
    assert gs.logical_axes_of(model.kernel) == (None, "mlp")
    assert gs.partition_spec_for(P(None, "mlp"), (4, 8), "tensor", mesh) == (P(None, "model"), None)
    plan = gs.plan_shardings(model, mesh, "tensor")
    assert plan.specs["kernel"] == P(None, "model") and "kernel" not in plan.fallbacks
    gs.shard_model(model, mesh, "tensor")  # in place
    assert model.kernel.get_value().sharding.spec == P(None, "model")
    # A bare int stays one odd entry, a fallback naming it (round 45's fix kept).
    assert gs.partition_spec_for(5, (8,), "tensor", mesh)[0] == P()


def test_init_optimizer_sharded_takes_a_nested_filter_tuple(devices):
    # Was (round 45's wrt check): TypeError "wrt=... must be an nnx filter" for (nnx.Param, (nnx.BatchStat,)),
    # which Flax reads as Any(Param, Any(BatchStat)); a nested non-filter is still refused.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(4, 8, rngs=nnx.Rngs(0))
    gs.shard_model(model, mesh, "replicated")
    for wrt in [(nnx.Param, (nnx.BatchStat,)), [nnx.Param, [nnx.BatchStat, "tag"]]]:
        optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "replicated", wrt=wrt)
        assert isinstance(optimizer, nnx.Optimizer)
        counts = jax.tree.leaves(nnx.state(optimizer.opt_state))
        assert sorted(leaf.shape for leaf in counts if leaf.ndim) == [(4, 8), (4, 8), (8,), (8,)]
    try:
        gs.init_optimizer_sharded(model, optax.adam(1e-3), "replicated", wrt=(nnx.Param, (3,)))
    except TypeError as err:
        assert str(err).startswith("wrt=(") and "must be an nnx filter" in str(err)
    else:
        raise AssertionError("a nested 3 was taken as a filter")


class _Batch(nnx.Pytree):  # a batch container as Flax suggests one: plain arrays, no nnx.Variable
    def __init__(self, theta, x):
        self.theta, self.x = nnx.data(theta), nnx.data(x)


def test_an_nnx_pytree_of_plain_arrays_is_placed_as_a_batch(devices):
    # Was (round 45's Module refusal): TypeError "batch <root> is an NNX _Batch, which this would copy (shared
    # variables untied)" for a container holding no variable; placed as any pytree before, as now. A Module inside
    # it is still refused.
    import numpy as np

    mesh = gs.make_mesh(model_axis=2)
    batch = _Batch(np.arange(16, dtype=np.float32).reshape(8, 2), np.ones((8, 3), np.float32))
    placed = gs.shard_batch(batch, mesh)
    assert isinstance(placed, _Batch) and placed.theta.sharding.spec == P("data")
    np.testing.assert_array_equal(np.asarray(placed.theta), batch.theta)
    assert gs.replicate(batch, mesh).x.sharding.is_fully_replicated
    assert gs.shard_sample_init(batch, mesh).x.sharding.spec == P("data")
    holding = _Batch(np.ones((8, 2), np.float32), nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    try:
        gs.shard_batch(holding, mesh)
    except TypeError as err:
        assert str(err).startswith("batch <root> is an NNX _Batch, which this would copy")
    else:
        raise AssertionError("a container holding a Linear was copied")


def test_the_continue_hint_of_a_run_started_from_python_works_as_written(tmp_path):
    # Was (round 45's run(cfg) hint): "run(cfg) with cfg.train.resume='auto' and cfg.output_dir='<folder>'", and
    # cfg.output_dir = ... on the config compose gives (as launch.py's, no output_dir set) raised
    # ConfigAttributeError "Key 'output_dir' not in 'Config'": output_dir is no field of the schema.
    import ast

    import pytest
    from faults_helpers import compose_tiny
    from omegaconf import open_dict
    from omegaconf.errors import ConfigAttributeError

    from gensbi_sharding.harness.run_folder import output_dir
    from gensbi_sharding.harness.sweep_hints import continue_command

    folder = tmp_path / "my run's"
    hint = continue_command(folder)
    assert hint == f"run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(folder)!r} set in omegaconf.open_dict(cfg)"
    named = ast.literal_eval(hint.split("cfg.output_dir=", 1)[1].removesuffix(" set in omegaconf.open_dict(cfg)"))
    cfg = compose_tiny()
    with pytest.raises(ConfigAttributeError):
        cfg.output_dir = named  # as the hint said before
    with open_dict(cfg):  # as it says now
        cfg.train.resume, cfg.output_dir = "auto", named
    assert output_dir(cfg) == folder and cfg.train.resume == "auto"


def test_maybe_save_at_a_step_not_due_still_names_a_bad_state_key_info_or_a_closed_writer(tmp_path, devices):
    # Was: round 45 made save() check its arguments before its no-op at the last saved step; maybe_save(step, ...) at
    # a step not due returned False for any state, key or info, or a closed writer, until its first due step.
    import jax.numpy as jnp
    import pytest

    from gensbi_sharding.checkpoint import CheckpointWriter

    state, key = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0))), jax.random.key(0)
    writer = CheckpointWriter(tmp_path / "ck", every=10, async_save=False)
    assert writer.maybe_save(3, state, key, info={"best_step": 3}) is False  # valid and not due: nothing written
    for bad_state, bad_key, bad_info, error, message in [
            (None, key, None, TypeError, r"^state=None must be an nnx\.State"),
            (state, jnp.zeros(2), None, TypeError, r"must be a typed JAX PRNG key"),
            (state, key, {"when": object()}, ValueError, r"^info=.* must be JSON-serialisable")]:
        with pytest.raises(error, match=message):
            writer.maybe_save(3, bad_state, bad_key, info=bad_info)
    assert writer.maybe_save(10, state, key) is True and writer.steps() == [10]
    writer.close()
    with pytest.raises(RuntimeError, match="is closed; open a new one to save"):
        writer.maybe_save(11, state, key)
    assert writer.steps() == [10]
