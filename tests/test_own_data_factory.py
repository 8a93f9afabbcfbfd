"""A data set of one's own (a factory returning ``SimulationData``, docs/gensbi_models.md): what it returns checked
before training, its shards over processes checked, its held-out pairs and statistics counted over processes.
"""

import dataclasses
import warnings

import numpy as np
import pytest


def test_z_score_statistics_over_processes_are_those_of_one_process_holding_every_row(monkeypatch):
    # Was, on 2 real processes (jax.distributed, gloo; x ~ 1000 +- 1): std [1.0308, 0.9354, 0.9354] for the rows'
    # [1.0083, 0.9790, 0.9984], 2-6 % off: the all-gather places the float64 sums on devices, which without
    # jax_enable_x64 hold float32, and the sum of squares minus the squared mean cancelled. Every multi-process run
    # normalised so, and (round 46) every data.shards above the process count. The all-gather is stood in for by
    # what it does with each process's values: placed on a device, then stacked (two processes, alike).
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.simulation_data import global_stats

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather",
                        lambda x, **_: np.stack([np.asarray(jax.device_put(x))] * 2))
    rows = (1000.0 + np.random.default_rng(0).standard_normal((1000, 3))).astype(np.float32)
    (dropped,), (mean, std) = global_stats([3], [rows], 2)
    assert dropped == 6
    np.testing.assert_array_equal(mean, rows.mean(0, dtype=np.float64).astype(np.float32))
    np.testing.assert_array_equal(std, rows.std(0, dtype=np.float64).astype(np.float32))


def _shards_of_mine(*, size, seed_of):
    """A data set of one's own whose shard ``process_index`` holds ``size(num_simulations, index, count)`` pairs,
    drawn from the seed stream ``(seed, seed_of(index))``."""
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import SimulationData, global_stats

    def factory(*, num_simulations, val_fraction, seed, process_index, process_count, x_transform, **_):
        n = size(num_simulations, process_index, process_count)
        rng = np.random.default_rng([seed, seed_of(process_index)])
        theta = rng.normal(size=(n, 2)).astype(np.float32)
        x = (theta + 0.1 * rng.normal(size=(n, 2))).astype(np.float32)
        n_train, _ = split_sizes(n, val_fraction)
        _, (tm, ts), (xm, xs) = global_stats([], [theta[:n_train], x[:n_train]], process_count)
        return SimulationData("mine", theta[:n_train], x[:n_train], theta[n_train:], x[n_train:],
                              observation=np.zeros(2, np.float32), reference_samples=np.zeros((0, 2), np.float32),
                              theta_mean=tm, theta_std=ts, x_mean=xm, x_std=xs, x_transform=x_transform)
    return factory


def test_a_data_factory_whose_last_shard_takes_the_remainder_trains(request):
    # Typed: data=mine data.num_simulations=1031 data.shards=4, the factory giving each shard num_simulations //
    # process_count pairs and the last one the remainder too (260), every pair of the budget simulated once. Was:
    # "returned 260 pairs for one of 4 shards ... more than its share of 258: it ignores process_count".
    from faults_helpers import registered

    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    def last_takes_rest(n, index, count):
        return n // count + (n % count if index == count - 1 else 0)

    registered(request, "data", "mine", _shards_of_mine(size=last_takes_rest, seed_of=lambda index: index))
    cfg = DataConfig(name="mine", num_simulations=1031, batch_size=64, theta_transform="none", shards=4)
    assert build_pipeline(cfg, seed=0, mesh=None, shards=4).val_pairs == 3 * 26 + 26  # split_sizes(257 / 260, 0.1)


def test_a_data_factory_giving_two_later_shards_the_same_pairs_is_refused(request):
    # Typed: data.shards=3, the factory seeding by min(process_index, 1): shards 1 and 2 the very same pairs, shard
    # 0 its own. Was: trained (only shard 0's pairs were compared with the others').
    from faults_helpers import registered

    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mine", _shards_of_mine(size=lambda n, index, count: n // count,
                                                        seed_of=lambda index: min(index, 1)))
    cfg = DataConfig(name="mine", num_simulations=1026, batch_size=60, theta_transform="none", shards=3)
    with pytest.raises(ConfigError, match=r"the same simulations for shards 1 and 2 of 3: it ignores process_index"):
        build_pipeline(cfg, seed=0, mesh=None, shards=3)


def _one_shard(seed):
    from gensbi_sharding.harness.simulation_data import SimulationData

    rows = np.random.default_rng(seed).standard_normal((8, 2)).astype(np.float32)
    zeros, ones = np.zeros(2, np.float32), np.ones(2, np.float32)
    return SimulationData("mine", rows[:6], rows[:6] + 1, rows[6:], rows[6:] + 1, observation=zeros,
                          reference_samples=np.zeros((0, 2), np.float32), theta_mean=zeros, theta_std=ones,
                          x_mean=zeros, x_std=ones)


def test_a_data_factory_that_ignores_process_index_over_processes_is_refused(monkeypatch):
    # Typed: distributed=local with 2 processes, data=mine, the factory drawing with a seed of its own whatever
    # process_index says: each process one shard, the very same pairs. Was: trained, every process on the same
    # pairs (only the shards of one process were compared). The all-gather is stood in for by what it does here:
    # the other process's words, alike, stacked after this one's.
    import jax
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_shards

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda words, **_: np.stack([words, words]))
    with pytest.raises(ConfigError, match=r"the same simulations for shards 0 and 1 of 2: it ignores process_index"):
        check_shards([_one_shard(0)], "mine", num_simulations=16, shards=2)


def test_a_refusal_on_another_process_ends_this_one_at_the_shards_all_gather_naming_it(monkeypatch):
    # distributed=local, 2 processes: process 1's shard refused (here: its NaN), process 0's fine. Was: process 1
    # ended; process 0 waited for it in the shards' all-gather until distributed.heartbeat_s, then both died by
    # SIGABRT and the job's error named no refusal. Stood in for: process 0's row, then process 1's as it gathers it.
    import jax
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness import own_data
    from gensbi_sharding.harness.config import ConfigError

    bad = _one_shard(1)
    bad.theta_train[0, 0] = np.nan
    with pytest.raises(ConfigError) as refused:  # process 1's own, in one process: as it always was
        own_data.agreed_shards(lambda: [own_data.check_factory_result(bad, "mine")], "mine", num_simulations=16,
                               shards=2)
    theirs = str(refused.value)
    said = f"CConfigError: {theirs}".encode()  # process 1's row: no digest (no shard), then its refusal's bytes
    text = np.zeros(own_data._TEXT_BYTES, np.uint8)
    text[:len(said)] = np.frombuffer(said, np.uint8)
    row_1 = np.concatenate([np.zeros(4, np.uint32), text.view(np.uint32)])[None]
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda rows, **_: np.stack([rows, row_1]))
    with pytest.raises(ConfigError) as ours:
        own_data.agreed_shards(lambda: [_one_shard(0)], "mine", num_simulations=16, shards=2)
    assert str(ours.value) == f"{theirs} (process 1 of 2: its data shards)"
    assert theirs.startswith("data=mine's factory returned theta_train with NaN or inf in 1 row(s) of 6")


def test_a_data_factorys_float64_values_beyond_float32_are_named_so_not_as_nan_or_inf():
    # A factory returning float64 x ~ 1e39 (finite). Was: "returned x_train with NaN or inf in 6 row(s) of 6: drop
    # those simulations ... count them in dropped_non_finite" -- the infinities were the float32 cast's, not its own.
    import dataclasses

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_factory_result

    good = _one_shard(0)
    huge = dataclasses.replace(good, x_train=np.full((6, 2), 1e39))
    with pytest.raises(ConfigError, match=r"^data=mine's factory returned x_train with values beyond float32's range "
                                          r"\(e\.g\. 1e\+39; the largest is 3\.4e\+38\), which SimulationData holds: "
                                          r"rescale them in the factory$"):
        check_factory_result(huge, "mine")
    assert check_factory_result(dataclasses.replace(good, x_train=np.full((6, 2), 1e38)), "mine").x_train[0, 0] == (
        np.float32(1e38))


def test_a_fixed_size_data_set_read_whole_is_refused_naming_num_simulations_and_the_fix_trains(request):
    # Typed: data=mine, a factory reading a file of 2,000 pairs whole (split by process_index / process_count),
    # data.num_simulations left at 1000. Was: "returned 2000 pairs for one of 1 shards ...: it ignores process_count"
    # -- one shard, and process_count honoured. Now num_simulations is named, and the fix it names trains.
    from faults_helpers import registered

    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    registered(request, "data", "mine", _shards_of_mine(size=lambda n, index, count: 2000 // count,
                                                        seed_of=lambda index: index))
    cfg = DataConfig(name="mine", num_simulations=1000, batch_size=64, theta_transform="none")
    with pytest.raises(ConfigError, match=r"returned 2000 pairs for a shard of data\.num_simulations=1000 over 1 "
                                          r"shard\(s\), more than a share holds \(1000\): it ignores num_simulations "
                                          r"or process_count; .* \(a data set of a fixed size: set "
                                          r"data\.num_simulations to its size, and give each shard its "
                                          r"process_index-th share\)$"):
        build_pipeline(cfg, seed=0, mesh=None)
    cfg = DataConfig(name="mine", num_simulations=2000, batch_size=64, theta_transform="none")
    assert build_pipeline(cfg, seed=0, mesh=None).val_pairs == 200


def _own(**change):
    """A data set of one's own (docs/gensbi_models.md): a factory returning a SimulationData, with ``change``
    applied to it (a field -> a value, or a callable of the good SimulationData for what to return instead)."""
    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import SimulationData, global_stats

    def factory(*, num_simulations, val_fraction, seed, process_index, process_count, x_transform, **_):
        rng = np.random.default_rng([seed, process_index])
        n = num_simulations // process_count
        theta = rng.normal(size=(n, 2)).astype(np.float32)
        x = (theta + 0.1 * rng.normal(size=(n, 2))).astype(np.float32)
        n_train, _ = split_sizes(n, val_fraction)
        _, (tm, ts), (xm, xs) = global_stats([], [theta[:n_train], x[:n_train]], process_count)
        good = SimulationData("mine", theta[:n_train], x[:n_train], theta[n_train:], x[n_train:],
                              observation=np.zeros(2, np.float32), reference_samples=np.zeros((0, 2), np.float32),
                              theta_mean=tm, theta_std=ts, x_mean=xm, x_std=xs, x_transform=x_transform)
        if "returns" in change:
            return change["returns"](good)
        return dataclasses.replace(good, **{k: v(good) for k, v in change.items()})
    return factory


def _as_mine(request, factory):
    """Register ``factory`` as data set ``mine`` as a user does (``@register_data``), replacing one this test
    registered before; unregistered when the test ends."""
    from gensbi_sharding.harness import registry

    if "mine" in registry.data_names():
        registry.unregister("data", "mine")
    else:
        request.addfinalizer(lambda: "mine" in registry.data_names() and registry.unregister("data", "mine"))
    registry.register_data("mine")(factory)


def _nan_row(field):
    def put(good):
        value = getattr(good, field).copy()
        value[3, 0] = np.nan
        return value
    return put


# (what the factory returns, what the old code did, words the refusal now holds)
CASES = [
    ({"returns": lambda g: {"theta": g.theta_train, "x": g.x_train}},
     "AttributeError: 'dict' object has no attribute 'dropped_non_finite'", "returned dict, not a SimulationData"),
    ({"theta_train": lambda g: g.theta_train[:, 0]},
     "ValueError: operands could not be broadcast together with shapes (922,) (2,)", "theta_train of shape (922,)"),
    ({"x_train": lambda g: g.x_train[:-3]},
     "ValueError: theta and x must be 2-D with the same number of rows (from iterate_batches)",
     "theta_train of 922 rows and x_train of 919"),
    ({"x_train": _nan_row("x_train")},
     "FloatingPointError: training diverged: mean loss nan ... lower train.learning_rate",
     "x_train with NaN or inf in 1 row(s) of 922: drop those simulations"),
    ({"theta_val": _nan_row("theta_val")}, "val loss nan, the best checkpoint never chosen",
     "theta_val with NaN or inf in 1 row(s)"),
    ({"x_std": lambda g: np.zeros(2, np.float32)}, "every batch inf / nan (z-scored by a std of 0)",
     "x_std with entries <= 0"),
    ({"theta_val": lambda g: g.theta_val[:0], "x_val": lambda g: g.x_val[:0]},
     "trained 'best_val=not yet' to the end: best_val_loss null, no best checkpoint, nothing said",
     "no held-out pairs (theta_val, x_val empty) for data.val_fraction=0.1"),
    ({"observation": lambda g: np.zeros(5, np.float32)}, "trained, an observation of 5 values for x of 2 kept",
     "observation of shape (5,): give (2,)"),
    ({"x_val": lambda g: g.x_val[:, :1]}, "ValueError: operands could not be broadcast (at validation)",
     "x_val of 1 columns but x_train of 2"),
    ({"x_transform": lambda g: "none", "x_train": lambda g: np.abs(g.x_train) + 1, "x_val": lambda g: np.abs(g.x_val) + 1},
     "trained on x untransformed while the run and its metrics.json said data.x_transform=log",
     "returned x_transform='none' for data.x_transform=log"),
]


@pytest.mark.parametrize("change,old,refusal", CASES, ids=[c[2].split(":")[0][:30] for c in CASES])
def test_what_a_data_factory_of_ones_own_returns_is_checked_before_training(request, change, old, refusal):
    # Typed: @register_data("mine") on a factory returning the wrong thing, then python launch.py experiment=quick
    # data=mine eval.enabled=false (with data.x_transform=log for the last case). Was (``old``): an error far from
    # its cause, or silently wrong training. Now: one ConfigError naming the factory, the field and the fix, raised
    # where the data is built, before any model or checkpoint.
    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    _as_mine(request, _own(**change))
    log = "x_transform" in change
    cfg = DataConfig(name="mine", num_simulations=1024, batch_size=64, theta_transform="none",
                     x_transform="log" if log else "none")
    with pytest.raises(ConfigError) as err:
        build_pipeline(cfg, seed=0, mesh=None)
    assert str(err.value).startswith("data=mine's factory returned "), str(err.value)
    assert refusal in str(err.value), (old, str(err.value))


def test_a_good_data_factory_of_ones_own_still_trains_and_log_x_applies(request):
    # The check passes what the docs describe, dim 1 too, and a factory that honours data.x_transform=log.
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    one = {k: (lambda g, k=k: getattr(g, k)[:, :1]) for k in ("theta_train", "theta_val")}
    one.update(theta_mean=lambda g: g.theta_mean[:1], theta_std=lambda g: g.theta_std[:1],
               x_train=lambda g: np.abs(g.x_train) + 1, x_val=lambda g: np.abs(g.x_val) + 1,
               x_mean=lambda g: np.log(np.abs(g.x_train) + 1).mean(0), x_std=lambda g: np.log(np.abs(g.x_train) + 1).std(0))
    _as_mine(request, _own(**one))
    pipe = build_pipeline(DataConfig(name="mine", num_simulations=1024, batch_size=64, theta_transform="none",
                                     x_transform="log"), seed=0, mesh=None)
    batch = next(pipe.train_batches)
    assert batch["theta"].shape == (64, 1) and batch["x"].shape == (64, 2)
    assert np.isfinite(batch["x"]).all() and abs(float(batch["x"].mean())) < 0.5  # z-scored in log space


def test_the_dry_run_of_a_data_set_of_ones_own_checks_its_factory_alike(request):
    # Typed: python launch.py dry_run=true data=mine, the factory returning a dict. Was: "AttributeError: 'dict'
    # object has no attribute 'dim_theta'" from the dry run's reading of the task's dimensions.
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.dry_run import own_data_dims

    _as_mine(request, _own(returns=lambda g: (g.theta_train, g.x_train)))
    cfg = compose_tiny("data.name=mine", "data.theta_transform=none", "dry_run=true")
    with pytest.raises(ConfigError, match="data=mine's factory returned tuple, not a SimulationData"):
        own_data_dims(cfg)


def test_the_dry_run_of_a_data_set_that_needs_a_budget_reads_its_dims_at_the_runs_budget(request):
    # Typed: python launch.py dry_run=true data=mine data.num_simulations=768, the factory refusing fewer than 100
    # simulations. Was: "[ERROR] ValueError: need at least 100 simulations, got 10": the dry run's own budget, which
    # the user never asked for, and no dry run possible. Now its dims are read at the run's budget; a budget the
    # factory refuses still fails with the factory's own words, naming the run's number.
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.dry_run import own_data_dims

    asked = []

    def picky(**kw):
        asked.append(kw["num_simulations"])
        if kw["num_simulations"] < 100:
            raise ValueError(f"need at least 100 simulations, got {kw['num_simulations']}")
        return _own(theta_train=lambda g: g.theta_train[:, :1], theta_val=lambda g: g.theta_val[:, :1],
                    theta_mean=lambda g: g.theta_mean[:1], theta_std=lambda g: g.theta_std[:1])(**kw)

    _as_mine(request, picky)
    cfg = compose_tiny("data.name=mine", "data.theta_transform=none", "dry_run=true")
    assert own_data_dims(cfg) == (1, 2) and asked == [10, 768]
    cfg.data.num_simulations = 50
    with pytest.raises(ValueError, match="need at least 100 simulations, got 50$"):
        own_data_dims(cfg)


def test_a_data_factory_returning_lists_or_other_dtypes_trains_as_its_float32_arrays(request):
    # Typed: a factory building SimulationData from Python lists (theta.tolist(), ...). Was: "TypeError: unsupported
    # operand type(s) for -: 'list' and 'list'" from normalize_theta. Now the arrays are taken as NumPy float32, as
    # SimulationData holds them: the batches equal those of the same factory returning float32 arrays.
    from gensbi_sharding.harness.config import DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline
    from gensbi_sharding.harness.simulation_data import STAT_FIELDS

    cfg = DataConfig(name="mine", num_simulations=1024, batch_size=64, theta_transform="none")
    batches = {}
    fields = ("theta_train", "x_train", "theta_val", "x_val", "observation", *STAT_FIELDS)
    for kind, convert in (("arrays", None), ("lists", lambda v: v.tolist()), ("float64", lambda v: v.astype(float))):
        change = {} if convert is None else {f: (lambda g, f=f: convert(getattr(g, f))) for f in fields}
        _as_mine(request, _own(**change))
        pipe = build_pipeline(cfg, seed=0, mesh=None)
        assert pipe.sims.theta_train.dtype == np.float32 and pipe.sims.x_std.dtype == np.float32, kind
        batches[kind] = next(pipe.train_batches)
    for kind in ("lists", "float64"):
        for key in ("theta", "x"):
            np.testing.assert_array_equal(batches[kind][key], batches["arrays"][key])


@pytest.mark.parametrize("ignores", ["process_count", "process_index"])
def test_a_data_factory_that_ignores_its_shard_is_refused(request, ignores):
    # Typed: python launch.py experiment=quick data=mine data.shards=2 eval.enabled=false (or distributed=local with
    # 2 processes), the factory simulating num_simulations pairs whatever process_count says, or drawing with a seed
    # of its own whatever process_index says. Was: trained, "val loss ... over 204 pairs" of a budget of 1024
    # simulations holding 102 (each shard simulated the whole budget), or both shards the very same pairs.
    from gensbi_sharding.harness.config import ConfigError, DataConfig
    from gensbi_sharding.harness.pipeline import build_pipeline

    good = _own()

    def careless(**kw):
        if ignores == "process_count":
            return good(**{**kw, "num_simulations": kw["num_simulations"] * kw["process_count"]})
        return good(**{**kw, "process_index": 0})

    _as_mine(request, careless)
    cfg = DataConfig(name="mine", num_simulations=1024, batch_size=64, theta_transform="none", shards=2)
    with pytest.raises(ConfigError, match=f"it ignores (num_simulations or )?{ignores}"):
        build_pipeline(cfg, seed=0, mesh=None, shards=2)
    _as_mine(request, good)  # the same factory, honouring both: 2 x 51 held-out pairs
    assert build_pipeline(cfg, seed=0, mesh=None, shards=2).val_pairs == 102


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


@pytest.mark.slow
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
