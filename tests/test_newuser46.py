"""Round 46: a new user, following the README and docs/*.md in a fresh clone, added a data set of their own.

Each test names what was typed, what happened, and checks what happens now.
"""

import warnings

import numpy as np


def _my_simulator(*, num_simulations, val_fraction, seed, process_index, process_count, **_):
    """A data set of one's own as docs/gensbi_models.md describes it: a SimulationData, val_pairs left out."""
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import SimulationData, global_stats

    rng = np.random.default_rng([seed, process_index])
    n = num_simulations // process_count
    theta = rng.normal(size=(n, 2)).astype(np.float32)
    x = (theta + 0.1 * rng.normal(size=(n, 2))).astype(np.float32)
    n_train, _ = split_sizes(n, val_fraction)
    _, (theta_mean, theta_std), (x_mean, x_std) = global_stats([], [theta[:n_train], x[:n_train]], process_count)
    return SimulationData("mygauss", theta[:n_train], x[:n_train], theta[n_train:], x[n_train:],
                          observation=np.zeros(2, np.float32), reference_samples=np.zeros((0, 2), np.float32),
                          theta_mean=theta_mean, theta_std=theta_std, x_mean=x_mean, x_std=x_std)


def test_a_data_set_of_ones_own_counts_its_held_out_pairs(request):
    # Typed: @register_data("mygauss") on the factory above, conf/data/mygauss.yaml, then python launch.py
    # experiment=quick data=mygauss eval.enabled=false. Was: "val loss 1.6409 over 0 pairs" on the console and
    # val_pairs 0 in metrics.json, for the 102 held-out pairs the validation had just used (SimulationData's
    # val_pairs defaulted to 0, a count only load_task set).
    from faults_helpers import registered
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mygauss", _my_simulator)  # as a user does: @register_data("mygauss")
    cfg = DataConfig(name="mygauss", num_simulations=1024, batch_size=64, theta_transform="none")
    one_shard = build_pipeline(cfg, seed=0, mesh=None)
    assert one_shard.val_pairs == len(one_shard.sims.theta_val) == 102
    two_shards = build_pipeline(cfg, seed=0, mesh=None, shards=2)  # emulated shards: summed over both
    assert two_shards.val_pairs == 2 * 51
    assert sum(w.sum() for w in (b["weight"] for b in two_shards.val_batches)) == 102  # the pairs validated


def test_a_data_set_of_ones_own_has_a_dry_run(devices, request):
    # Typed: python launch.py dry_run=true data=mygauss (the factory above registered, conf/data/mygauss.yaml).
    # Was: "[ERROR] ValueError: unknown sbibm task 'mygauss'; registered here: two_moons, ..." at [2/7], for a data
    # set the registry knew: the dry run read its dimensions from sbibm's tasks only.
    from faults_helpers import compose_tiny

    import gensbi_sharding as gs
    from faults_helpers import registered
    from gensbi_sharding.harness.dry_run import dry_run_metrics
    from gensbi_sharding.harness.rule_config import rule_table

    registered(request, "data", "mygauss", _my_simulator)
    cfg = compose_tiny("data.name=mygauss", "data.theta_transform=none", "eval.enabled=false", "dry_run=true")
    rule_name, table = rule_table(cfg.rule)
    metrics = dry_run_metrics(cfg, gs.make_mesh(devices, model_axis=2), rule_name, table)
    state = metrics["dry_run"]["state"]
    assert state["param_count"] == sum(int(np.prod(s)) for s in _mlp_shapes(cfg, dim_theta=2, dim_x=2))
    assert metrics["step_memory_bytes_per_device"] > 0


def _mlp_shapes(cfg, *, dim_theta, dim_x):
    """The shapes of the harness's mlp's parameters for a task of these dimensions, built by its factory."""
    import jax
    from flax import nnx

    from gensbi_sharding.harness.registry import get_model

    settings = {k: v for k, v in cfg.model.items() if k not in ("name", "init", "dtype", "param_dtype")}
    model = get_model("mlp")(dim_theta=dim_theta, dim_x=dim_x, rngs=nnx.Rngs(0), partition_axis=None, **settings)
    return [leaf.shape for leaf in jax.tree.leaves(nnx.state(model, nnx.Param))]


def test_a_mesh_given_by_its_axes_sizes_is_refused_naming_the_spec_that_builds_it(devices):
    # Typed, a JAX user's mesh as Mesh.shape reads: gs.resolve_mesh({"data": 2, "model": 4}). Was only "unknown mesh
    # spec key 'data'; accepted keys: ('devices', 'model_axis')", leaving the user to work out model_axis (and which
    # devices give a (2, 2) mesh on 8).
    import ast

    import pytest

    import gensbi_sharding as gs

    for spec, shape in [({"data": 2, "model": 4}, (2, 4)), ({"data": 2, "model": 2}, (2, 2)), ({"data": 4}, (4, 2)),
                        ({"model": 8}, (1, 8)), ({"data": 2, "model": 2, "devices": [4, 5, 6, 7]}, (2, 2))]:
        with pytest.raises(ValueError, match="unknown mesh spec key") as err:
            gs.resolve_mesh(spec)
        assert " write " in str(err.value), str(err.value)
        fix = ast.literal_eval(str(err.value).partition(" write ")[2])
        mesh = gs.resolve_mesh(fix)
        assert (mesh.shape["data"], mesh.shape["model"]) == shape, (spec, fix)
        if "devices" in spec:
            assert [d.id for d in mesh.devices.flat] == spec["devices"]
    with pytest.raises(ValueError) as err:  # no mesh of these sizes on 8 devices: the rule, no spec to copy
        gs.resolve_mesh({"data": 4, "model": 4})
    assert str(err.value).endswith("(the axes' sizes are not keys: a mesh spec gives model_axis, the data axis "
                                   "taking the rest of the 8 devices)")


def _two_processes_alike_but_their_shards(x, **_):
    """An all-gather over two stand-in processes holding the same statistics but other shards: the shards' digests
    (the one 2-d all-gather, a row of the digests, then the bytes of a refusal: zeros, none) differ on process 1, as
    a factory honouring process_index gives."""
    x = np.asarray(x)
    return np.stack([x, np.where(x != 0, ~x, 0) if x.ndim == 2 else x])


def test_a_data_set_of_ones_own_counts_every_processes_held_out_pairs(request, monkeypatch):
    # Typed: python launch.py distributed=local distributed.local_processes=2 experiment=quick data=mygauss
    # eval.enabled=false. Was: "val loss 1.4677 over 51 pairs", process 0's own, of the 102 validated: the count was the
    # factory's val_pairs, which one of one's own leaves out or counts per process. Two processes are stood in for
    # here by JAX's process count and an all-gather that returns each process's values (both processes alike).
    import jax
    from jax.experimental import multihost_utils

    from faults_helpers import registered
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mygauss", _my_simulator)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", _two_processes_alike_but_their_shards)
    pipe = build_pipeline(DataConfig(name="mygauss", num_simulations=1024, batch_size=64, theta_transform="none"),
                          seed=0, mesh=None)
    assert len(pipe.sims.theta_val) == 51 and pipe.val_pairs == 102


def test_several_shards_per_process_share_one_set_of_statistics(request, monkeypatch):
    # Typed: python launch.py distributed=local distributed.local_processes=2 experiment=quick data.shards=4. Was: each
    # shard z-scored by its own statistics (only one process's shards were ever combined), so the processes fed
    # differently normalised batches, and the run failed at its checkpoint: "AssertionError: <class 'numpy.ndarray'>
    # passed to device_put is not the same on each process" (and "val loss ... over 26 pairs" of 104). Two processes
    # stood in for as above: both hold the same two shards, so every process's statistics are those two's.
    import jax
    from jax.experimental import multihost_utils

    from faults_helpers import registered
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mygauss", _my_simulator)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", _two_processes_alike_but_their_shards)
    cfg = DataConfig(name="mygauss", num_simulations=1024, batch_size=64, theta_transform="none", shards=4)
    pipe = build_pipeline(cfg, seed=0, mesh=None, shards=cfg.shards)  # as the run passes data.shards
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "process_count=4 but JAX runs 2": each shard alone, as asked
        own = [_my_simulator(num_simulations=1024, val_fraction=0.1, seed=0, process_index=s, process_count=4)
               for s in (0, 1)]
    for field, rows in (("theta", "theta_train"), ("x", "x_train")):
        both = np.concatenate([getattr(part, rows) for part in own])
        np.testing.assert_allclose(getattr(pipe.sims, f"{field}_mean"), both.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(getattr(pipe.sims, f"{field}_std"), both.std(0), rtol=1e-5)
    assert pipe.val_pairs == 2 * (26 + 26)  # both processes' two shards of 256
