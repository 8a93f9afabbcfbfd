"""Data faults: non-finite simulations, held-out pairs left out, batch-size hints that go in circles.

Each test reproduces a case of issue 14 and checks the right value; every hint a message
gives is followed and the run (its data pipeline, or the whole run) must then start.
"""

import logging
import re

import jax
import numpy as np
import pytest

from faults_helpers import compose_tiny, hint, patch_task, run_tiny
from gensbi_sharding.harness import data as D
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding import nearest_batch_sizes
from gensbi_sharding.harness.pipeline import build_pipeline, check_batch_config
from gensbi_sharding.harness.registry import get_model
from gensbi_sharding.harness.train import make_step_functions
from gensbi_sharding.harness.validation import validation_loss
from gensbi_sharding import make_mesh

# Case 1: 3 NaN rows and 2 +inf rows among 500 simulations.
BAD = {3: np.nan, 100: np.nan, 400: np.nan, 7: np.inf, 250: np.inf}


@pytest.fixture(scope="module")
def mesh(devices):
    return make_mesh(model_axis=1)  # data-parallel size 8


# ------------------------------------------------------------------ case 1: non-finite simulations

@pytest.mark.slow
def test_non_finite_simulations_are_dropped_before_any_statistic(monkeypatch, caplog):
    made = patch_task(monkeypatch, BAD)
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        sims = D.load_task("two_moons", num_simulations=500, seed=0)
    simulated = made[-1].simulated[-1]
    finite = np.isfinite(simulated).all(axis=1)
    assert (~finite).sum() == 5 and sims.dropped_non_finite == 5
    # Exactly the finite rows are kept, in order, split into train and validation.
    np.testing.assert_array_equal(np.concatenate([sims.x_train, sims.x_val]), simulated[finite])
    assert (len(sims.x_train), len(sims.x_val), sims.val_pairs) == (445, 50, 50)
    np.testing.assert_allclose(sims.x_mean, simulated[finite][:445].mean(0), rtol=1e-5)
    for arr in (*sims.normalized("train"), *sims.normalized("val"), sims.normalize_x(sims.observation)):
        assert np.isfinite(arr).all()
    assert "dropped 5 simulation(s) of task 'two_moons' whose theta or x hold NaN or inf (of 500" in caplog.text


def test_non_finite_observation_is_an_error_naming_it(monkeypatch):
    patch_task(monkeypatch, {}, observation=[[np.nan, 0.1]])
    with pytest.raises(ValueError, match=r"observation 3 of task 'two_moons' holds non-finite values "
                                         r"\[nan, 0\.1.*choose another with data\.num_observation"):
        D.load_task("two_moons", num_simulations=50, num_observation=3)


@pytest.mark.slow
def test_no_finite_simulation_left_is_an_error(monkeypatch):
    patch_task(monkeypatch, {row: np.nan for row in range(20)})
    with pytest.raises(ValueError, match=r"20 of the 20 simulations of task 'two_moons' \(process 0\) "
                                         r"hold NaN or inf, leaving 0"):
        D.load_task("two_moons", num_simulations=20)


@pytest.mark.slow
def test_too_few_finite_pairs_for_one_batch_names_a_batch_that_fits(monkeypatch, mesh):
    patch_task(monkeypatch, {row: np.inf for row in range(40)})
    cfg = compose_tiny("data.num_simulations=60", "data.batch_size=24")
    check_batch_config(cfg.data, mesh, shards=1)  # 54 training pairs expected before simulating
    with pytest.raises(ConfigError) as err:
        build_pipeline(cfg.data, seed=0, mesh=mesh)
    assert "at most 18 (the 18 training pairs, after dropping 40 non-finite simulations)" in str(err.value)
    cfg.data.batch_size = int(hint(str(err.value), "data.batch_size"))
    assert cfg.data.batch_size == 16
    pipe = build_pipeline(cfg.data, seed=0, mesh=mesh)
    assert next(pipe.train_batches)["theta"].shape == (16, 2) and pipe.dropped_non_finite == 40


@pytest.mark.slow  # two end-to-end runs
def test_run_drops_non_finite_simulations_and_its_batch_hint_starts_the_run(monkeypatch, tmp_path, devices):
    patch_task(monkeypatch, BAD)
    # 500 simulations leave 450 training pairs before the drop, 445 after: 448 passes the first
    # check and fails the second, which names a size the 445 pairs can fill.
    failed = run_tiny(tmp_path / "a", "data.num_simulations=500", "data.batch_size=448")
    assert failed["status"] == "error"
    assert "at most 445 (the 445 training pairs, after dropping 5 non-finite simulations); " \
           "set data.batch_size=440" in failed["error"]
    assert failed["error"].count("data.batch_size=") == 2  # the value and the fix, nothing else
    metrics = run_tiny(tmp_path / "b", "data.num_simulations=500",
                       f"data.batch_size={hint(failed['error'], 'data.batch_size')}")
    assert metrics["status"] == "ok", metrics.get("error")
    assert metrics["non_finite_simulations"] == 5
    # 50 held-out pairs, fewer than one batch of 440: all of them are still evaluated.
    assert metrics["val_pairs"] == 50 and np.isfinite(metrics["final_val_loss"])
    assert np.isfinite(np.load(tmp_path / "b" / "train_losses.npz")["losses"]).all()


# ------------------------------------------------------------------ case 2: every held-out pair counts

@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 2])
def test_every_held_out_pair_is_in_a_validation_batch(mesh, shards):
    cfg = compose_tiny("data.num_simulations=1024", "data.batch_size=64")
    pipe = build_pipeline(cfg.data, seed=0, mesh=mesh, shards=shards)
    assert pipe.val_pairs == 102
    batches = [{k: np.asarray(v) for k, v in b.items()} for b in pipe.val_batches]
    assert [b["theta"].shape[0] for b in batches] == [64, 64]  # 102 pairs padded to 2 batches
    weights = np.concatenate([b["weight"] for b in batches])
    assert weights.sum() == 102 and set(np.unique(weights)) == {0.0, 1.0}
    real = np.concatenate([b["theta"] for b in batches])[weights == 1]
    if shards == 1:  # stored order: every validation pair exactly once
        np.testing.assert_array_equal(real, pipe.sims.normalized("val")[0])
    else:
        assert len({tuple(row) for row in real}) == 102


@pytest.mark.slow
def test_validation_loss_ignores_padding_rows(mesh):
    import optax
    from flax import nnx

    model = get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=8, depth=1)
    functions, state = make_step_functions(model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param), None)
    rng = np.random.default_rng(0)
    real = {"theta": rng.normal(size=(5, 2)).astype(np.float32), "x": rng.normal(size=(5, 2)).astype(np.float32)}
    weight = np.array([1, 1, 1, 1, 1, 0, 0, 0], np.float32)
    padded = {k: np.concatenate([v, np.zeros((3, 2), np.float32)]) for k, v in real.items()}
    garbage = {k: np.concatenate([v, np.full((3, 2), 1e3, np.float32)]) for k, v in real.items()}
    key = jax.random.key(0)
    loss_a, count = functions.eval_loss(state, {**padded, "weight": weight}, key)
    loss_b, _ = functions.eval_loss(state, {**garbage, "weight": weight}, key)
    assert float(count) == 5.0 and float(loss_a) == pytest.approx(float(loss_b), rel=1e-6)
    # Batches weigh by their real pairs: a batch of 5 and one of 8 average over 13 pairs.
    full = {**garbage, "weight": np.ones(8, np.float32)}
    got = validation_loss(functions, state, [{**padded, "weight": weight}, full], key)
    key_val = jax.random.fold_in(key, 0x7FFFFFFF)
    # Each row takes its own of 16 draws (its index among both batches' rows), not the same 8 in each batch.
    a = float(functions.eval_loss(state, {**padded, "weight": weight, "index": np.arange(8)}, key_val)[0])
    c = float(functions.eval_loss(state, {**full, "index": np.arange(8, 16)}, key_val)[0])
    assert got == pytest.approx((5 * a + 8 * c) / 13, rel=1e-6)


@pytest.mark.slow
def test_a_validation_of_very_many_draws_stops_at_its_first_batch_when_asked(mesh):
    # Was: the key of every draw was made before the first batch (train.val_draws=100000000: gigabytes and
    # minutes), where no stop request is asked, so SIGTERM waited for it.
    import time

    import optax
    from flax import nnx

    model = get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=8, depth=1)
    functions, state = make_step_functions(model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param), None)
    batch = {"theta": np.ones((8, 2), np.float32), "x": np.ones((8, 2), np.float32), "weight": np.ones(8, np.float32)}
    asked = []
    start = time.perf_counter()
    got = validation_loss(functions, state, [batch], jax.random.key(0), draws=10**9,
                          stop_requested=lambda: asked.append(1) or True)
    assert got is None and asked == [1] and time.perf_counter() - start < 10.0


# ------------------------------------------------------------------ case 5: one function decides a batch size

@pytest.mark.slow
@pytest.mark.parametrize("overrides, shards, first_hint", [
    (("data.batch_size=64",), 3, 72),  # must be a multiple of lcm(3 shards, 8 devices) = 24
    (("data.batch_size=63",), 3, 72),
    (("data.batch_size=66",), 3, 72),
    (("data.num_simulations=50", "data.batch_size=64"), 1, 40),  # 45 training pairs, multiples of 8
    (("data.num_simulations=50", "data.batch_size=45"), 1, 40),
    (("data.num_simulations=50", "data.batch_size=48"), 1, 40),
])
def test_batch_size_hint_fixes_every_constraint_at_once(mesh, overrides, shards, first_hint):
    cfg = compose_tiny(*overrides)
    with pytest.raises(ConfigError) as err:
        check_batch_config(cfg.data, mesh, shards=shards)
    message = str(err.value)
    assert message.startswith(f"data.batch_size={cfg.data.batch_size} cannot be used")
    assert "(one per process)" not in message  # one process, shards given explicitly
    assert int(hint(message, "data.batch_size")) == first_hint
    cfg.data.batch_size = first_hint  # follow the hint: no second error, and the data flows
    check_batch_config(cfg.data, mesh, shards=shards)
    pipe = build_pipeline(cfg.data, seed=0, mesh=mesh, shards=shards)
    assert next(pipe.train_batches)["theta"].shape == (first_hint, 2)


def test_a_shard_count_typed_by_hand_is_named_as_the_other_fix(mesh):
    # data.shards=5000 with batch 64 on 8 devices: the batch-size hint alone (5000) hides the likelier typo.
    cfg = compose_tiny("data.num_simulations=1000", "data.batch_size=64")
    with pytest.raises(ConfigError) as err:
        check_batch_config(cfg.data, mesh, shards=5000)
    assert "or keep data.batch_size=64 and set data.shards=64" in str(err.value), str(err.value)
    check_batch_config(cfg.data, mesh, shards=int(hint(str(err.value), "data.shards")))  # the hint holds
    with pytest.raises(ConfigError) as err:  # one shard per process (the default) is not the user's choice
        check_batch_config(cfg.data, mesh, shards=3, per_process=True)
    assert "data.shards" not in str(err.value)


@pytest.mark.slow
def test_a_budget_too_small_for_any_batch_names_the_budget_that_fits(mesh):
    cfg = compose_tiny("data.num_simulations=8", "data.batch_size=8")
    with pytest.raises(ConfigError) as err:
        check_batch_config(cfg.data, mesh, shards=1)
    assert "no batch size fits: one batch of 8 needs 8 training pairs per shard, but the smallest " \
           "shard holds 7" in str(err.value)
    cfg.data.num_simulations = int(hint(str(err.value), "data.num_simulations"))
    assert cfg.data.num_simulations == 9
    assert next(build_pipeline(cfg.data, seed=0, mesh=mesh).train_batches)["theta"].shape == (8, 2)



@pytest.mark.parametrize("overrides, shards, budget, batch, kept", [
    (("data.val_fraction=0.999",), 1, 7500, 8, 63500),  # 64 is a multiple of 8: its own budget named too
    (("data.num_simulations=1000",), 2000, 4000, 2000, None)])  # 64 no multiple of 2000: only the shard count
def test_a_budget_too_small_for_a_larger_batch_names_the_batch_at_that_budget(mesh, overrides, shards, budget, batch,
                                                                            kept):
    # Round 45: data.val_fraction=0.999 (batch 64, 8 devices) named "raise data.num_simulations to at least 7500",
    # which fills a batch of 8, not 64: typed as said, the run was refused again ("set data.batch_size=8").
    from gensbi_sharding.harness.job_check import job_problem

    cfg = compose_tiny(*overrides, "data.batch_size=64")
    with pytest.raises(ConfigError) as err:
        check_batch_config(cfg.data, mesh, shards=shards)
    message = str(err.value)
    assert f"raise data.num_simulations to at least {budget} and set data.batch_size={batch}" in message, message
    assert (f"or to at least {kept} to keep data.batch_size=64" in message) == (kept is not None), message
    if shards == 1:  # a sweep's check, before any job, says the same (was: "raise data.num_simulations", no number)
        sweep_refusal = job_problem(cfg)
        assert sweep_refusal.startswith("ConfigError: ")
        assert sweep_refusal.removeprefix("ConfigError: ") in message, sweep_refusal
    for simulations, batch_size in [(budget, batch)] + [(kept, 64)] * (kept is not None):
        cfg.data.num_simulations, cfg.data.batch_size = simulations, batch_size  # each as said: no second refusal
        check_batch_config(cfg.data, mesh, shards=shards)
        cfg.data.num_simulations -= shards  # and each the smallest that fits
        with pytest.raises(ConfigError):
            check_batch_config(cfg.data, mesh, shards=shards)

@pytest.mark.parametrize("spec, listed, batch, want", [
    ("dict", None, 64, "mesh.model_axis=3 (data-parallel size 2) or devices.cpu_count=4 (data-parallel size 4)"),
    ("auto", None, 64, "mesh=dict mesh.model_axis=3 (data-parallel size 2) or devices.cpu_count=4 (data-parallel "
                       "size 4)"),
    ("dict", [0, 1, 2, 3, 4, 5], 100, "mesh.model_axis=3 (data-parallel size 2)"),  # a list: cpu_count changes nothing
    ("dict", None, 100, "mesh.model_axis=3 (data-parallel size 2) or devices.cpu_count=5 (data-parallel size 5)")])
def test_a_batch_the_devices_do_not_split_names_the_meshes_that_keep_it(devices, spec, listed, batch, want):
    # Was: 6 devices (e.g. a run resumed on fewer) and data.batch_size=64 named only data.batch_size=66, though
    # the batch size, which the resumed run trained with, fits mesh.model_axis=3 or devices.cpu_count=4 as it is.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.hints import batch_size_problem

    six = make_mesh(jax.devices()[:6])
    cfg = compose_tiny(f"data.batch_size={batch}")
    mesh_cfg = OmegaConf.create({"spec": spec, "model_axis": 1, "devices": listed})
    with pytest.raises(ConfigError) as err:
        check_batch_config(cfg.data, six, shards=1, mesh_cfg=mesh_cfg)
    nearest = nearest_batch_sizes(batch, 6)[0]  # the one rule: the batch-size hint stays first
    assert str(err.value) == (f"data.batch_size={batch} cannot be used: the global batch size {batch} must be a "
                              f"multiple of 6 (it is split over the data-parallel size 6); set data.batch_size="
                              f"{nearest}; or keep data.batch_size={batch} on another mesh: {want}")
    if spec == "dict" and listed is None:  # the data stream's own check says the same
        with pytest.raises(ValueError) as raw:
            D.iterate_batches(np.zeros((700, 2)), np.zeros((700, 2)), batch_size=batch, seed=0, mesh=six)
        assert str(raw.value) == str(err.value)
    for size in map(int, re.findall(r"data-parallel size (\d+)", want)):  # each named mesh takes the batch
        assert batch_size_problem(batch, shards=1, data_parallel=size, train_rows=700) is None
    check_batch_config(cfg.data, make_mesh(jax.devices()[:6], model_axis=3), shards=1, mesh_cfg=mesh_cfg)
    check_batch_config(cfg.data, make_mesh(jax.devices()[:4]), shards=1, mesh_cfg=mesh_cfg)


def test_a_run_names_the_meshes_that_keep_its_batch(tmp_path, devices):
    metrics = run_tiny(tmp_path / "run", "data.batch_size=64", "mesh.devices=[0,1,2,3,4,5]")  # refused before data
    assert metrics["status"] == "error" and metrics["error"].endswith(
        "set data.batch_size=66; or keep data.batch_size=64 on another mesh: mesh.model_axis=3 (data-parallel size 2)")


def test_nearest_batch_sizes_table():
    assert nearest_batch_sizes(64, 24, 900) == (72, 48)
    assert nearest_batch_sizes(60, 24, 900) == (48, 72)  # tie: the smaller first
    assert nearest_batch_sizes(64, 8, 45) == (40,)
    assert nearest_batch_sizes(3, 8, 45) == (8,)
    assert nearest_batch_sizes(8, 8, 7) == ()
    assert nearest_batch_sizes(10, 4) == (8, 12) and nearest_batch_sizes(3, 4) == (4,)
    assert nearest_batch_sizes(16, 4) == (16,)
    assert nearest_batch_sizes(np.int64(10), 8) == (8, 16) and type(nearest_batch_sizes(np.int64(10), 8)[0]) is int
    for bad, error, name in (((8, 0), ValueError, "multiple=0"), ((8, -8), ValueError, "multiple=-8"),
                             ((-10, 8), ValueError, r"requested=-10 must be >= 1 \(a batch size, rows\), e\.g\."),
                             ((0, 8, 64), ValueError, "requested=0 must be >= 1"),  # were (8,), as if valid
                             ((10.5, 8), TypeError, "requested=10.5"), (("64", 8), TypeError, "requested='64'"),
                             ((64, 8.0), TypeError, "multiple=8.0"), ((10, 8, True), TypeError, "at_most=True")):
        with pytest.raises(error, match=name):
            nearest_batch_sizes(*bad)


@pytest.mark.parametrize("bad, fix", [((0, 6), "requested=6"), ((-4, 3, 12), "requested=3"), ((8, -6), "multiple=6"),
                                      ((8, 0), "multiple=1")])
def test_nearest_batch_sizes_refusal_gives_an_example_that_fits_the_arguments(bad, fix):
    # Was "e.g. requested=8" (or multiple=8) whatever was asked: requested=8 is no multiple of 6 nor of 3.
    with pytest.raises(ValueError, match=rf"must be >= 1 \(.*\), e\.g\. {fix}$"):
        nearest_batch_sizes(*bad)
    assert nearest_batch_sizes(*(int(fix.split("=")[1]) if n == fix.split("=")[0] else v
                                 for n, v in zip(("requested", "multiple", "at_most"), bad))) != ()  # the example works


# ------------------------------------------------------------------ case 5: other errors name their override

def test_model_axis_error_names_the_override_and_a_value_that_works(tmp_path, devices):
    metrics = run_tiny(tmp_path / "run", "mesh.model_axis=3")
    assert metrics["status"] == "error"
    assert "mesh.model_axis=3: 8 devices are not divisible by model_axis=3" in metrics["error"]
    assert make_mesh(model_axis=int(hint(metrics["error"], "mesh.model_axis"))).shape == {"data": 4, "model": 2}


@pytest.mark.parametrize("bad, model_axis, fix", [
    ("[0,0,1,2]", 1, "[0,1,2]"), ("[3,3,1,2,9]", 2, "[3,1]"), ("[9]", 1, "null")])
def test_mesh_devices_error_names_a_list_that_works(tmp_path, devices, bad, model_axis, fix):
    # Was "ValueError: device 0 appears twice in the mesh's device list; list each device once" (no override).
    from gensbi_sharding import resolve_mesh
    from gensbi_sharding.harness.hints import mesh_devices_problem

    metrics = run_tiny(tmp_path / "run", f"mesh.devices={bad}", f"mesh.model_axis={model_axis}")
    assert metrics["status"] == "error" and f"set mesh.devices={fix}" in metrics["error"], metrics["error"]
    kept = None if fix == "null" else [int(d) for d in fix.strip("[]").split(",")]
    assert mesh_devices_problem(kept, range(8), model_axis) is None
    mesh = resolve_mesh({"model_axis": model_axis, "devices": kept})  # the hint, followed, makes a mesh
    assert mesh.devices.size == (len(kept) if kept else 8)


@pytest.mark.slow
def test_model_hyperparameter_error_names_the_override(tmp_path, devices):
    metrics = run_tiny(tmp_path / "run", "model.width=0")
    assert metrics["status"] == "error"
    # Refused by the config check, before simulating (was the factory's "width must be a positive integer, got 0;
    # pass e.g. model.width=8", after the simulations).
    # run(cfg) from Python: the fix as the setting it sets (WORDS77B; was launch.py's "e.g. model.width=128")
    assert metrics["error"] == "ConfigError: model.width=0 must be >= 1; e.g. cfg.model.width=128", metrics["error"]
    assert "val_pairs" not in metrics  # no simulation ran
    width = int(re.search(r"e\.g\. cfg\.model\.width=(\d+)", metrics["error"]).group(1))
    from flax import nnx
    assert get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), width=width, depth=1) is not None


def test_only_keys_named_as_arguments_are_prefixed():
    from gensbi_sharding.harness.hints import overrides_named

    section = {"name": "mlp", "width": 0, "time_embed_dim": 3}
    with pytest.raises(ConfigError, match=r"^model\.time_embed_dim=3: time_embed_dim must be even; the name"):
        with overrides_named("model", section, ConfigError):
            raise ValueError("time_embed_dim must be even; the name of the layer is up")
    with pytest.raises(ValueError, match="^unrelated: the name"):  # no argument named: unchanged
        with overrides_named("model", section, ConfigError):
            raise ValueError("unrelated: the name")


def test_a_library_fix_is_written_as_an_override_not_a_python_literal():
    # Was: "mesh.devices=[]: make_mesh got an empty device list; pass mesh.devices=None ...": typed as
    # written, None is the string "None", which Hydra refuses for a list of ints.
    from gensbi_sharding.harness.hints import overrides_named

    with pytest.raises(ConfigError) as err:
        with overrides_named("mesh", {"spec": "dict", "model_axis": 1, "devices": []}, ConfigError):
            raise ValueError("devices=[]: make_mesh got an empty device list; pass devices=None for all devices")
    assert str(err.value) == ("mesh.devices=[]: mesh.devices=[]: make_mesh got an empty device list; pass "
                              "mesh.devices=null for all devices")
    with pytest.raises(ConfigError) as err:
        with overrides_named("model", {"qkv_bias": None}, ConfigError):
            raise ValueError("qkv_bias=None is not a bool; pass qkv_bias=True or qkv_bias=False")
    assert str(err.value) == ("model.qkv_bias=null: model.qkv_bias=null is not a bool; pass model.qkv_bias=true or "
                              "model.qkv_bias=false")


@pytest.mark.slow
def test_an_empty_device_list_names_the_override_that_works(tmp_path, devices):
    metrics = run_tiny(tmp_path / "run", "mesh.devices=[]")
    assert metrics["status"] == "error" and metrics["error"].endswith("pass mesh.devices=null for all devices")
    assert run_tiny(tmp_path / "fixed", "mesh.devices=null")["status"] == "ok"


@pytest.mark.parametrize("mesh, batch, want", [
    ((), 64, "mesh.model_axis=3 (data-parallel size 2) or devices.cpu_count=4 (data-parallel size 4)"),
    (("mesh=auto",), 64, "mesh=dict mesh.model_axis=3 (data-parallel size 2) or devices.cpu_count=4 (data-parallel "
                         "size 4)"),
    (("mesh.devices=[0,1,2,3,4,5]",), 100, "mesh.model_axis=3 (data-parallel size 2)")])
def test_the_check_before_a_runs_folder_names_the_meshes_that_keep_its_batch(mesh, batch, want):
    # Was: devices.cpu_count=6 data.batch_size=64 (a resume on fewer devices) said only "set data.batch_size=66"
    # before the run's folder, the run's "or keep data.batch_size=64 on another mesh: ..." (docs/harness.md) unsaid
    from gensbi_sharding.harness.refusal import fix_of
    from gensbi_sharding.harness.job_check import job_problem

    problem = job_problem(compose_tiny(*mesh, "devices.cpu_count=6", f"data.batch_size={batch}"))
    assert problem == (f"ConfigError: data.batch_size={batch} cannot be used: the global batch size {batch} must be a "
                       f"multiple of 6 (it is split over the data-parallel size 6); set data.batch_size="
                       f"{nearest_batch_sizes(batch, 6)[0]}; or keep data.batch_size={batch} on another mesh: {want}")
    assert fix_of(problem) == f"data.batch_size={nearest_batch_sizes(batch, 6)[0]}"  # the fix kept as data
