"""Round 46b: GenSBI's models and a data set of one's own, tried as users do (brief r46-faults2).

Each test names what was typed, what happened, and checks what happens now.
"""

import dataclasses

import numpy as np
import pytest


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
    from gensbi_sharding.harness.dry_run import _own_data_dims

    _as_mine(request, _own(returns=lambda g: (g.theta_train, g.x_train)))
    cfg = compose_tiny("data.name=mine", "data.theta_transform=none", "dry_run=true")
    with pytest.raises(ConfigError, match="data=mine's factory returned tuple, not a SimulationData"):
        _own_data_dims(cfg)


def test_a_sweeps_summary_shows_each_jobs_held_out_loss(tmp_path, monkeypatch):
    # Typed: python launch.py -m experiment=quick model=simformer rule=fsdp,tensor mesh.model_axis=2
    # eval.enabled=false (as every data set of one's own runs). Was: each job's console ended "train loss 1.9944 ...,
    # val loss 2.0873 over 77 pairs", but sweep_summary.md/.csv held speed and memory only, C2ST blank: nothing
    # there said how well any job trained.
    import csv
    import json

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import plots
    from gensbi_sharding.harness.summary import write_summary

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)  # no matplotlib here
    for job, (rule, val, train) in enumerate((("fsdp", 2.0872653, 1.99437898), ("tensor", 2.5, 2.4))):
        (tmp_path / str(job) / ".hydra").mkdir(parents=True)
        OmegaConf.save(OmegaConf.create(["experiment=quick", f"rule={rule}"]),
                       tmp_path / str(job) / ".hydra" / "overrides.yaml")
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(
            {"status": "ok", "config": {"dry_run": False}, "mesh_shape": [4, 2], "c2st": None, "wall_s": 3.3,
             "best_val_loss": val, "final_train_loss": train}))
    summary = write_summary(tmp_path, ["rule"])
    header, _, *lines = summary.text.splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in (header, *lines)]
    column = cells[0].index("best val loss")
    assert [row[column] for row in cells[1:]] == ["2.0873", "2.5000"]
    rows = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert [(r["best_val_loss"], r["final_train_loss"]) for r in rows] == [("2.087265", "1.994379"),
                                                                          ("2.500000", "2.400000")]


def test_the_dry_run_of_a_data_set_that_needs_a_budget_reads_its_dims_at_the_runs_budget(request):
    # Typed: python launch.py dry_run=true data=mine data.num_simulations=768, the factory refusing fewer than 100
    # simulations. Was: "[ERROR] ValueError: need at least 100 simulations, got 10": the dry run's own budget, which
    # the user never asked for, and no dry run possible. Now its dims are read at the run's budget; a budget the
    # factory refuses still fails with the factory's own words, naming the run's number.
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.dry_run import _own_data_dims

    asked = []

    def picky(**kw):
        asked.append(kw["num_simulations"])
        if kw["num_simulations"] < 100:
            raise ValueError(f"need at least 100 simulations, got {kw['num_simulations']}")
        return _own(theta_train=lambda g: g.theta_train[:, :1], theta_val=lambda g: g.theta_val[:, :1],
                    theta_mean=lambda g: g.theta_mean[:1], theta_std=lambda g: g.theta_std[:1])(**kw)

    _as_mine(request, picky)
    cfg = compose_tiny("data.name=mine", "data.theta_transform=none", "dry_run=true")
    assert _own_data_dims(cfg) == (1, 2) and asked == [10, 768]
    cfg.data.num_simulations = 50
    with pytest.raises(ValueError, match="need at least 100 simulations, got 50$"):
        _own_data_dims(cfg)


def test_a_sweeps_plot_without_c2st_shows_the_held_out_loss(tmp_path, monkeypatch):
    # The same sweep (eval.enabled=false): sweep_summary.png's third panel was "C2ST (0.5 = perfect)" with "n/a" for
    # every job. Now that panel is the best validation loss, one bar per job of its value; a scored sweep keeps C2ST.
    from gensbi_sharding.harness import plots

    from matplotlib.figure import Figure

    made, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: made.append(fig) or save(fig, *a, **k))

    def row(job, rule, **metrics):
        return {"job": job, "overrides": {"rule": rule}, "metrics": {
            "status": "ok", "param_bytes_per_device": 8000, "opt_bytes_per_device": 16000, "median_step_s": 0.016,
            **metrics}}

    plots.plot_sweep([row(0, "fsdp", best_val_loss=2.087), row(1, "tensor", best_val_loss=2.5)], ["rule"],
                     tmp_path / "a.png")
    last = made[-1].axes[2]
    assert last.get_title() == "best validation loss"
    assert sorted(round(p.get_height(), 3) for p in last.patches) == [2.087, 2.5]
    plots.plot_sweep([row(0, "fsdp", best_val_loss=2.087, c2st=0.6), row(1, "tensor", best_val_loss=2.5)], ["rule"],
                     tmp_path / "b.png")
    assert made[-1].axes[2].get_title() == "C2ST (0.5 = perfect)"


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
