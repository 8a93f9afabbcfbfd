"""Sampling a trained run's posterior at your own observation (``harness.own_observation``, ``sample.py``).

The end-to-end tests train one tiny run (8 steps, evaluated at sbibm observation 1) and sample its folder at
observation 1 given as a file: the draws are the run's own. The refusals come before any model is built.
"""

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from faults_helpers import run_tiny, saved_checkpoint
from library_helpers import lose_step_metadata, steps_with_the_newest_unconfirmed
from gensbi_sharding.harness import own_observation, state
from gensbi_sharding.harness.memory_check import check_draw_fits
from gensbi_sharding.harness.observation_input import check_observation, far_from_training
from gensbi_sharding.harness.own_observation import load_observation, main, sample_posterior
from gensbi_sharding.harness.posterior import noise_seed

NOISE_1 = noise_seed(0, 1)  # the noise of the tiny run's (seed 0) observation 1


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory, devices):
    """A tiny run's folder, evaluated at observation 1 (128 samples, seed 0: noise seed noise_seed(0, 1)); only
    read."""
    out = tmp_path_factory.mktemp("own") / "run"
    assert run_tiny(out, "eval.enabled=true")["status"] == "ok"
    return out


@pytest.fixture(scope="module")
def observation_1(tmp_path_factory):
    from gensbi_sharding.harness.tasks import get_task, observation

    path = tmp_path_factory.mktemp("x") / "x_o.npy"
    np.save(path, observation(get_task("two_moons"), 1)[None])  # a (1, dim_x) row, as sbibm stores it
    return path


@pytest.mark.slow  # trains a run
def test_samples_at_observation_1_are_the_runs_own(evaluated_run, observation_1, tmp_path, caplog):
    run_samples = np.load(evaluated_run / "posterior_samples.npz")["samples"]
    assert run_samples.shape == (128, 2)
    details = {}
    # The run drew observation k with noise_seed(seed, k); the defaults (num_samples, ode_steps) are its eval.*.
    samples = sample_posterior(evaluated_run, observation_1, seed=NOISE_1, details=details)
    assert samples.dtype == np.float32 and samples.shape == (128, 2)
    # The run sampled on its 8-device mesh, this on one device: the same noise and weights, rounding apart.
    np.testing.assert_allclose(samples, run_samples, rtol=0, atol=1e-4)
    assert details["step"] == 8 and details["seed"] == NOISE_1 and 0 < details["acceptance"] <= 1
    with np.load(evaluated_run / "posterior_samples.npz") as run:  # the same weights, recorded alike (was: no weights)
        assert (details["step"], details["weights"], details["checkpoint_step"]) == (
            int(run["step"]), run["weights"].item(), int(run["checkpoint_step"]))
        assert int(run["noise_seed"]) == NOISE_1  # recorded: the --seed that draws them again
    assert not np.allclose(sample_posterior(evaluated_run, observation_1, seed=2, num_samples=128), run_samples)
    # An x_o the run never trained near (observation 1 in other units) is named; observation 1 is not.
    assert not [r for r in caplog.records if "standard deviations" in r.getMessage()]
    sample_posterior(evaluated_run, 10 * np.load(observation_1), num_samples=16)
    far = [r.getMessage() for r in caplog.records if "standard deviations" in r.getMessage()]
    assert len(far) == 1 and far[0].startswith("x_o[0] = -6.39671 lies ") and "task 'two_moons'" in far[0], far

    out = tmp_path / "mine.npz"
    before = sorted(p.name for p in evaluated_run.iterdir())
    assert main([str(evaluated_run), str(observation_1), "--seed", str(NOISE_1), "--num-samples", "16", "--out",
                 str(out)]) == 0  # the noise_seed the run's file records, as docs/harness.md pastes it
    saved = np.load(out)
    # The stream's first rows (another batch size: XLA may round the last bit otherwise).
    np.testing.assert_allclose(saved["samples"], samples[:16], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(saved["observation"], np.load(observation_1)[0])
    assert sorted(p.name for p in evaluated_run.iterdir()) == before  # the run's folder untouched
    with pytest.raises(SystemExit):  # never overwritten
        main([str(evaluated_run), str(observation_1), "--out", str(out)])
    assert np.load(out)["samples"].shape == (16, 2)


@pytest.mark.slow  # trains a run (shared)
def test_every_record_names_the_weights_step_and_compute_dtype_its_samples_came_from(evaluated_run, observation_1,
                                                                                        tmp_path, capsys):
    """Was: metrics.json's C2ST named no weights nor step (only posterior_samples.npz did), and the npz recorded the
    compute ``dtype`` for flux1 and simformer only (mlp, transformer: no field), sample.py's output for no model."""
    metrics = json.loads((evaluated_run / "metrics.json").read_text())
    with np.load(evaluated_run / "posterior_samples.npz") as run:
        recorded = (run["weights"].item(), int(run["step"]), run["dtype"].item())
    assert recorded == ("EMA at the best validation step", 8, "float32")
    assert (metrics["c2st_weights"], metrics["c2st_step"]) == recorded[:2] and metrics["best_step"] == 8
    out = tmp_path / "mine.npz"
    assert main([str(evaluated_run), str(observation_1), "--num-samples", "1", "--out", str(out)]) == 0
    with np.load(out) as saved:
        assert (saved["weights"].item(), int(saved["step"]), saved["dtype"].item()) == recorded
        assert saved["samples"].shape == (1, 2)
    # One sample is named as one (was "1 posterior samples of theta")
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("1 posterior sample of theta (dim 2) at x_o ")


@pytest.mark.slow  # reads the trained run's checkpoint
@pytest.mark.parametrize("x_o, message", [
    ([0.1, 0.2, 0.3], "x_o has shape (3,), but the run's task 'two_moons' has dim_x=2: give a (2,) vector"),
    ([[0.1, 0.2], [0.3, 0.4]], "x_o has shape (2, 2): 2 observations, but a posterior is drawn at one"),
    ([0.1, float("nan")], "x_o holds non-finite values at index [1] ([nan])"),
])
def test_a_bad_observation_is_refused_before_the_model_is_built(evaluated_run, monkeypatch, x_o, message):
    def never(*args, **kwargs):
        raise AssertionError("the model was built before x_o was checked")

    monkeypatch.setattr(state, "build_state", never)
    with pytest.raises(ValueError) as err:
        sample_posterior(evaluated_run, np.asarray(x_o))
    assert message in str(err.value)


@pytest.mark.slow  # reads the trained run's checkpoint
def test_a_num_samples_beyond_memory_is_refused_before_the_model_is_built(evaluated_run, monkeypatch):
    monkeypatch.setattr(state, "build_state", lambda *a, **k: pytest.fail("built the model"))
    with pytest.raises(ValueError, match=r"num_samples=10,000,000,000,000 needs over 1280000.0 GB to draw, the host has "
                       r".* available: pass under [\d,]+ \(a lower bound"):
        sample_posterior(evaluated_run, np.zeros(2), num_samples=10**13)


def test_check_draw_fits_names_the_largest_bound():
    check_draw_fits(1000, 4, available=128_000)  # 1000 x 4 dims x 4 bytes x 8 copies: fits exactly
    with pytest.raises(ValueError, match=r"num_samples=1,001 needs over .* pass under 1,000 \(a lower bound"):
        check_draw_fits(1001, 4, available=128_000)


@pytest.mark.parametrize("x_transform, x_o, named", [
    ("none", [0.5, -3.0], None), ("none", [9.9, 19.9], None),  # within 10 of their standard deviations
    ("none", [0.5, 30.0], "x_o[1] = 30 lies 15.0 standard deviations from the mean of the run's training "
     "simulations; at most 1/15.0^2"),
    ("none", [-12.0, 30.0], "x_o[1] = 30 lies 15.0 standard deviations from the mean of the run's training "
     "simulations (2 of x_o's 2 values lie over 10)"),
    ("log", [np.e ** 11, 1.0], "x_o[0] = 59874.1 lies 11.0 standard deviations from the mean of the run's training "
     "simulations (of log x: data.x_transform=log)"),
])
def test_an_observation_far_from_the_training_simulations_is_named(x_transform, x_o, named, caplog):
    # Was: sampled without a word (under data.theta_transform=support every draw lands in the prior all the same).
    statistics = {"x_mean": [0.0, 0.0], "x_std": [1.0, 2.0], "theta_mean": [0.0], "theta_std": [1.0]}
    with caplog.at_level("WARNING", logger="gensbi_sharding"):
        why = far_from_training(np.asarray(x_o, np.float32), statistics, x_transform, "sir")
    if named is None:
        assert why is None and not caplog.records
    else:
        assert why.startswith(named) and why.endswith("check that x_o is data of task 'sir' in the simulator's "
                                                      "raw units"), why
        assert [r.getMessage() for r in caplog.records] == [why]


@pytest.mark.parametrize("size, theirs", [
    (8, "; 8 values are what slcp observes: if x_o is their data, sample a run trained on it"),
    (10, "; 10 values are what gaussian_linear, gaussian_linear_uniform, sir, bernoulli_glm observe: if x_o is their "
         "data, sample a run trained on it"),
    (3, ""),  # no task's
])
def test_an_observation_of_another_task_s_size_names_the_tasks_it_fits(size, theirs):
    # Was: only "x_o has shape (8,), but the run's task 'two_moons' has dim_x=2", for slcp's observation given.
    with pytest.raises(ValueError) as err:
        check_observation(np.ones(size), dim_x=2, x_transform="none", task="two_moons")
    assert str(err.value) == (f"x_o has shape ({size},), but the run's task 'two_moons' has dim_x=2: give a (2,) "
                              f"vector or a (1, 2) row{theirs}")


def test_log_transform_refuses_non_positive_data():
    with pytest.raises(ValueError, match=r"x_o\[1\] = -2 .*data.x_transform=log, which needs every value > 0"):
        check_observation(np.array([1.0, -2.0, 3.0]), dim_x=3, x_transform="log", task="lotka_volterra")
    x_o = check_observation(np.array([[1.0, 2.0, 3.0]]), dim_x=3, x_transform="log", task="lotka_volterra")
    assert x_o.dtype == np.float32 and x_o.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("x_o, dtype", [(np.array([0.1 + 2j, -0.2]), " (dtype complex128)"),
                                        (np.array(["0.1", "0.2"]), " (dtype <U3)"), ([[1.0, 2.0], [3.0]], ""),
                                        (np.array([True, False]), " (dtype bool)"), ([True, False], " (dtype bool)"),
                                        (np.array([1.0, 2.0], object), " (dtype object)"),
                                        (np.array(["2026-12-04", "2026-12-05"], "datetime64[D]"), " (dtype datetime64[D])")])
def test_values_not_real_numbers_are_refused_naming_their_dtype_not_converted(tmp_path, x_o, dtype):
    # was: complex lost its imaginary part (NumPy's ComplexWarning only), strings were parsed as floats, a bool
    # array was conditioned on as 1.0/0.0 (also through check_observation alone); no message named the dtype
    fix = ", e.g. x_o.astype(float) where 1/0 are the values measured" if dtype == " (dtype bool)" else ""
    for check in (load_observation, lambda x: check_observation(x, dim_x=2, x_transform="none", task="two_moons")):
        with pytest.raises(ValueError) as err:
            check(x_o)
        assert str(err.value) == f"x_o={x_o!r}{dtype} is not an array of real numbers: give a (dim_x,) vector of floats{fix}"
    assert load_observation(np.array([1, 0], np.int64)).tolist() == [1.0, 0.0]
    if isinstance(x_o, np.ndarray) and x_o.dtype != object:  # from a file, the file is named
        np.save(tmp_path / "x_o.npy", x_o)
        with pytest.raises(ValueError) as err:
            load_observation(tmp_path / "x_o.npy")
        assert str(err.value) == f"observation file {tmp_path / 'x_o.npy'}: x_o={x_o!r}{dtype} is not an array of real " \
                                 f"numbers: give a (dim_x,) vector of floats{fix}"


def test_the_run_folder_given_as_observation_names_the_order(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"observation file '.*' is a folder \(.*\), not a .npy file: the "
                       r"order is sample.py <run folder> <x_o.npy>"):
        load_observation(tmp_path)


def test_a_pipe_given_as_observation_is_named_as_one_not_read(tmp_path):
    # Was: "does not exist" for a named pipe that does (and a read of it would wait for a writer).
    import os

    os.mkfifo(tmp_path / "x_o.npy")
    with pytest.raises(FileNotFoundError, match=r"^observation file '.*x_o.npy' is not a regular file \(a pipe or "
                       r"device\): save your observation with numpy.save\('x_o.npy', x_o\) and pass that file$"):
        load_observation(tmp_path / "x_o.npy")


def test_a_missing_observation_files_fix_saves_the_file_the_command_names(tmp_path, monkeypatch):
    # Was: 'sample.py <run> outputs/x_o.npy' (the README's command) before the README's np.save line was run said
    # "save your observation with numpy.save('x_o.npy', x_o) and pass that file": saved so, in the current folder,
    # the same command was refused again.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as err:
        load_observation(os.path.join("outputs", "x_o.npy"))
    assert str(err.value) == (f"observation file 'outputs/x_o.npy' does not exist (resolved to {tmp_path}/outputs/"
                              "x_o.npy); save your observation with numpy.save('outputs/x_o.npy', x_o) and pass that "
                              "file")


def test_a_missing_observation_file_is_named_before_the_run_folder_is_read(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"observation file '.*nope.npy' does not exist .*numpy.save"):
        sample_posterior(tmp_path / "no_run", tmp_path / "nope.npy")
    (tmp_path / "notes.txt").write_text("1 2")
    with pytest.raises(ValueError, match=r"not a .npy file \(text\?.*np.save\('.*notes_x_o.npy', np.loadtxt\('.*notes.txt'\)\)"):
        load_observation(tmp_path / "notes.txt")
    (tmp_path / "x.csv").write_text("0.5,-1\n")  # numpy's own message spoke of pickled data and allow_pickle
    with pytest.raises(ValueError, match=r"np.loadtxt\('.*x.csv', delimiter=','\)\)") as err:
        load_observation(tmp_path / "x.csv")
    assert "pickle" not in str(err.value)
    np.save(tmp_path / "bad.npy", np.array([1.0, 2.0]))
    (tmp_path / "bad.npy").write_bytes((tmp_path / "bad.npy").read_bytes()[:20])  # cut off: numpy's error kept
    with pytest.raises(ValueError, match=r"bad.npy is not a .npy array numpy can read"):
        load_observation(tmp_path / "bad.npy")


@pytest.mark.parametrize("metrics, why", [
    (None, "Sampling needs a trained run's saved weights"),
    ({"status": "ok", "dry_run": {}}, "it holds a dry run (dry_run=true saves no checkpoint)"),
    ({"status": "preempted"}, "its run (status preempted) saved no complete checkpoint"),
    # Was: "... saved no complete checkpoint ...: pass the folder of a run that trained": it is one, stopped early.
    # <run>: the folder sampled, whose run recorded it (a made-up folder reads as one moved since: r76g)
    ({"status": "interrupted", "error": "interrupted by Ctrl-C (SIGINT); continue with: python launch.py "
      "hydra.run.dir=<run>"}, ": its run was stopped (interrupted) before its first checkpoint; continue it, python "
     "launch.py hydra.run.dir=<run>, and sample this folder once it has saved one"),
])
def test_a_run_folder_without_checkpoints_is_refused(tmp_path, metrics, why):
    with pytest.raises(FileNotFoundError, match=r"run folder '.*gone' does not exist \(resolved to .*\): pass"):
        sample_posterior(tmp_path / "gone", np.zeros(2))
    if metrics is not None:
        (tmp_path / "metrics.json").write_text(json.dumps(metrics).replace("<run>", str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="has no checkpoint to sample") as err:
        sample_posterior(tmp_path, np.zeros(2))
    assert why.replace("<run>", str(tmp_path)) in str(err.value)


def test_a_run_whose_step_lost_its_orbax_metadata_is_not_called_one_that_never_trained(tmp_path):
    # Was: "... (step 5: cut short, no commit recorded); ...; its run (status ok) saved no complete checkpoint in
    # <run>/checkpoints. Sampling needs a trained run's saved weights: pass the folder of a run that trained", of a run
    # that trained and saved step 5, whose step metadata was deleted (or left out of a copy) since.
    import jax
    from flax import nnx

    from gensbi_sharding.checkpoint import CheckpointWriter, find_checkpoint

    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        writer.save(5, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    lose_step_metadata(tmp_path / "checkpoints" / "5")
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "ok"}))
    for given in (tmp_path, tmp_path / "checkpoints", tmp_path / "checkpoints" / "5"):
        with pytest.raises(FileNotFoundError) as found:
            find_checkpoint(given)
        assert "(step 5: its items are there, but not Orbax's step metadata" in str(found.value) or str(
            found.value).startswith(f"{given} is not a complete checkpoint (its items are there, but not Orbax's")
        with pytest.raises(FileNotFoundError) as err:
            sample_posterior(given, np.zeros(2))
        # was == f"...: {found.value}", which pinned training's "start without it" for the step folder given
        assert str(err.value) == f"run folder {str(given)!r} has no checkpoint to sample: " + (
            str(found.value) if given.name != "5" else found.value.reason + ": pass the folder of a run that saved a "
            "complete step, or, if its run is still training, sample it after its first save")


def test_a_step_cut_short_without_a_complete_one_beside_it_gets_a_samplers_fix_not_trainings(tmp_path):
    # Was: "... .../checkpoints holds no complete step: start without it. Sampling needs a trained run's saved
    # weights: pass the folder of a run that trained", the library's resume advice, which means nothing to a sampler.
    import shutil

    import jax
    from flax import nnx

    from gensbi_sharding.checkpoint import CheckpointWriter

    with CheckpointWriter(tmp_path / "run" / "checkpoints", async_save=False) as writer:
        writer.save(5, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    folder = tmp_path / "cut" / "checkpoints"
    shutil.copytree(tmp_path / "run" / "checkpoints" / "5" / "arrays", folder / "7" / "arrays")
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(folder / "7", np.zeros(2))
    assert str(err.value) == (f"run folder {str(folder / '7')!r} has no checkpoint to sample: {folder / '7'} is not a "
                              "complete checkpoint (Orbax recorded no commit: the save was cut short); "
                              f"{folder} holds no complete step: pass the folder of a run that saved a complete step, "
                              "or, if its run is still training, sample it after its first save")


def test_a_folder_of_runs_is_named_once_with_its_newest_run(tmp_path):
    # Was: "run folder 'X' has no checkpoint to sample: no checkpoint in X: looked for complete Orbax step folders
    # <step>/ in X; pass a run dir, its checkpoints/ dir or one step dir; it holds 1 run folder(s) ...": X thrice.
    import jax
    from flax import nnx

    from gensbi_sharding.checkpoint import CheckpointWriter

    with CheckpointWriter(tmp_path / "12-00-00" / "checkpoints", async_save=False) as writer:
        writer.save(5, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    with pytest.raises(FileNotFoundError) as err:
        sample_posterior(tmp_path, np.zeros(2))
    assert str(err.value) == (f"run folder {str(tmp_path)!r} has no checkpoint to sample; it holds 1 run folder(s) "
                              f"with a checkpoint, the newest: {tmp_path / '12-00-00'}: pass one of them")


def test_a_sweep_folder_names_its_jobs(tmp_path):
    (tmp_path / "multirun.yaml").write_text("")
    (tmp_path / "0").mkdir()
    with pytest.raises(FileNotFoundError, match="is a sweep's folder, one run per job: none of its jobs saved"):
        sample_posterior(tmp_path, np.zeros(2))


@pytest.mark.slow  # reads the trained run's checkpoint
def test_a_sweep_folder_names_its_jobs_with_a_checkpoint(tmp_path, evaluated_run):
    (tmp_path / "multirun.yaml").write_text("")
    (tmp_path / "0").symlink_to(evaluated_run)
    with pytest.raises(FileNotFoundError,
                       match=r"sample one job's, the lowest C2ST, \d\.\d{3}: .*/0 \(jobs with a checkpoint: 0\)"):
        sample_posterior(tmp_path, np.zeros(2))


@pytest.fixture(scope="module")
def saved_checkpoints(tmp_path_factory):
    """Two run folders' ``checkpoints/``, written once by the library (copied into each test's folder): a two_moons
    run's config and z-score statistics, what reading its folder finds; the arrays are no model's."""
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    few = {"data": {"name": "two_moons", "x_transform": "none"}, "model": {"name": "mlp"}, "seed": 0,
           "eval": {"num_samples": 16, "ode_steps": 4}}
    full = {"data": {"name": "two_moons", "x_transform": "none", "shards": 1}, "model": {"name": "mlp"},
            "eval": {"num_samples": 16, "ode_steps": 4}, "seed": 0}
    stats = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    runs = {"few": (few, {"x_mean": [0.0, 0.0], "theta_mean": [0.0, 0.0]}), "full": (full, stats)}
    return {name: saved_checkpoint(tmp_path_factory.mktemp(name), saved, {NORMALIZATION: statistics}).parent
            for name, (saved, statistics) in runs.items()}


def _run_folder(tmp_path, checkpoints):
    import shutil

    shutil.copytree(checkpoints, tmp_path / "checkpoints")
    np.save(tmp_path / "x_o.npy", np.zeros(2))
    return tmp_path


@pytest.fixture
def run_read(tmp_path, saved_checkpoints):
    """``tmp_path``: a two_moons run's folder holding a checkpoint, its x_o.npy beside it."""
    return _run_folder(tmp_path, saved_checkpoints["few"])


def test_cli_out_naming_a_folder_not_made_yet_is_refused_naming_it(run_read, monkeypatch, capsys):
    # Was: --out new/ (a folder, by its trailing slash) wrote the file new.npz beside it.
    tmp_path = run_read
    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    with pytest.raises(SystemExit):
        main([str(tmp_path), str(tmp_path / "x_o.npy"), "--out", f"{tmp_path / 'new'}/"])
    assert capsys.readouterr().err.rstrip().endswith(
        f"--out {tmp_path / 'new' / 'x_o_posterior.npz'}: its folder {tmp_path / 'new'} does not exist; create it or "
        "pass another --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "x_o.npy"]


@pytest.mark.parametrize("under", ["notes.txt", "notes.txt/sub"])
def test_cli_out_under_a_file_names_that_file(run_read, monkeypatch, capsys, under):
    # Was: --out notes.txt/x.npz (notes.txt a file) said "its folder notes.txt does not exist; create it", which
    # mkdir then refused: the file is in the way.
    tmp_path = run_read
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    with pytest.raises(SystemExit):
        main([str(tmp_path), str(tmp_path / "x_o.npy"), "--out", str(tmp_path / under / "x.npz")])
    assert capsys.readouterr().err.rstrip().endswith(
        f"--out {tmp_path / under / 'x.npz'}: {tmp_path / 'notes.txt'} is a file, not a folder; pass another --out")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_cli_refuses_an_existing_output_before_sampling(run_read, capsys):
    tmp_path = run_read
    (tmp_path / "x_o_posterior.npz").write_bytes(b"mine")
    with pytest.raises(SystemExit):
        main([str(tmp_path), str(tmp_path / "x_o.npy")])
    assert "x_o_posterior.npz exists and is never overwritten: pass --out" in capsys.readouterr().err
    assert (tmp_path / "x_o_posterior.npz").read_bytes() == b"mine"
    with pytest.raises(SystemExit):
        main([str(tmp_path), str(tmp_path / "x_o.npy"), "--out", str(tmp_path / "posterior_samples_3.npz")])
    assert "posterior_samples_3.npz is a name a run writes its outputs under" in capsys.readouterr().err
    assert own_observation.__all__ == ["sample_posterior", "load_observation", "draw_posterior", "main"]


@pytest.mark.parametrize("folder, said", [
    ({"metrics.json": json.dumps({"status": "ok", "dry_run": {}})}, "it holds a dry run (dry_run=true saves no "
                                                                   "checkpoint)"),
    ({}, "has no checkpoint to sample"),  # an empty folder
    ({"metrics.json": json.dumps({"status": "error"})}, "its run (status error) saved no complete checkpoint"),
    ({"multirun.yaml": "", "0/metrics.json": "{}"}, "is a sweep's folder, one run per job: none of its jobs saved"),
])
def test_cli_names_a_folder_without_a_checkpoint_before_any_output(tmp_path, capsys, folder, said):
    # python sample.py <dry-run folder> x_o.npy, x_o_posterior.npz there already: was "sample.py: error:
    # .../x_o_posterior.npz exists and is never overwritten", the output named for a folder it could never sample.
    run = tmp_path / "run"
    for name, text in folder.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    run.mkdir(exist_ok=True)
    np.save(tmp_path / "x_o.npy", np.zeros(2))
    (tmp_path / "x_o_posterior.npz").write_bytes(b"mine")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for out in ([], ["--out", str(tmp_path / "x_o_posterior.npz")], ["--out", str(tmp_path / "no" / "a.npz")]):
        assert main([str(run), str(tmp_path / "x_o.npy"), *out]) == 2
        err = capsys.readouterr().err
        assert err.startswith("[ERROR] ") and said in err and "posterior.npz" not in err and "--out" not in err, err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
    assert (tmp_path / "x_o_posterior.npz").read_bytes() == b"mine"


def test_cli_names_a_bad_observation_before_any_output(run_read, capsys):
    np.save(run_read / "x3.npy", np.zeros(3))  # the run's x has 2 values
    (run_read / "x3_posterior.npz").write_bytes(b"mine")
    assert main([str(run_read), str(run_read / "x3.npy")]) == 2
    assert "[ERROR] x_o has shape (3,)" in capsys.readouterr().err
    assert main([str(run_read), str(run_read / "nope.npy"), "--out", str(run_read / "x3_posterior.npz")]) == 2
    assert "observation file" in capsys.readouterr().err


def test_cli_keeps_an_output_another_process_wrote_while_sampling(run_read, monkeypatch, capsys):
    tmp_path = run_read
    # Two sample.py calls to one --out both pass the check before sampling; the later write must not replace.
    out, others = tmp_path / "x_o_posterior.npz", [b"the other call's samples"]

    def other_call_finishes_first(*args, details, **kwargs):
        if others:
            out.write_bytes(others.pop())
        details.update(observation=np.zeros(2, np.float32), seed=0, ode_steps=2, step=5, checkpoint="c",
                       weights="EMA at the last step", checkpoint_step=5, task="two_moons", acceptance=1.0,
                       dtype="float32")
        return np.ones((3, 2), np.float32)

    monkeypatch.setattr(own_observation, "sample_posterior", other_call_finishes_first)
    assert main([str(tmp_path), str(tmp_path / "x_o.npy")]) == 1
    assert "x_o_posterior.npz was created while sampling (another sample.py?) and is kept" in capsys.readouterr().err
    assert out.read_bytes() == b"the other call's samples"
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # no temporary file left
        "checkpoints", "x_o.npy", "x_o_posterior.npz"]
    out.unlink()
    assert main([str(tmp_path), str(tmp_path / "x_o.npy")]) == 0
    assert np.load(out)["samples"].tolist() == [[1.0, 1.0]] * 3


def test_cli_ctrl_c_while_sampling_ends_at_once(run_read, monkeypatch):
    # Python's SIGINT handler runs only when XLA's draw returns: sample.py --num-samples 3000000 ignored Ctrl-C
    # for minutes. While sampling the kernel's default ends it; nothing is written until the draw is done.
    import signal

    seen = []

    def sampling(*args, details, **kwargs):
        seen.append(signal.getsignal(signal.SIGINT))
        raise RuntimeError("stop here")

    monkeypatch.setattr(own_observation, "sample_posterior", sampling)
    before = signal.getsignal(signal.SIGINT)
    assert main([str(run_read), str(run_read / "x_o.npy")]) == 1
    assert seen == [signal.SIG_DFL] and signal.getsignal(signal.SIGINT) is before
    assert sorted(p.name for p in run_read.iterdir()) == ["checkpoints", "x_o.npy"]


@pytest.mark.slow  # samples the trained run's checkpoint
def test_a_checkpoint_deleted_while_read_is_replaced_by_the_newest(evaluated_run, tmp_path, monkeypatch):
    # A run still training deletes its older steps as it saves (was: '[Errno 2] No such file or directory').
    import shutil

    run = tmp_path / "run"
    shutil.copytree(evaluated_run, run)
    (step,) = [p for p in (run / "checkpoints").iterdir() if p.name.isdigit()]
    shutil.copytree(step, run / "checkpoints" / str(int(step.name) + 1))  # the newest, about to be deleted
    read, real = [], state.build_state

    def deleted_while_read(cfg, *, resume_dir, **kwargs):  # the step folder's weights, read to sample
        read.append(resume_dir.name)
        if len(read) == 1:
            shutil.rmtree(resume_dir)
            raise FileNotFoundError(f"[Errno 2] No such file or directory: '{resume_dir}'")
        return real(cfg, resume_dir=resume_dir, **kwargs)

    monkeypatch.setattr(state, "build_state", deleted_while_read)
    details = {}
    samples = sample_posterior(run, np.zeros(2), num_samples=4, details=details)
    assert read == [str(int(step.name) + 1), step.name] and details["step"] == int(step.name)
    assert samples.shape == (4, 2)


@pytest.mark.slow  # samples the trained run's checkpoint, on two meshes
@pytest.mark.parametrize("model_axis", [1, 2])
def test_sampling_on_a_mesh_draws_what_one_device_draws(evaluated_run, observation_1, caplog, model_axis):
    # The mesh path had no test: the model placed by the run's rule on the mesh given, the draws split over it.
    import logging

    import gensbi_sharding as gs

    one = sample_posterior(evaluated_run, observation_1, seed=NOISE_1, num_samples=13)
    caplog.set_level(logging.INFO, logger="gensbi_sharding")
    caplog.clear()
    details = {}
    placed = sample_posterior(evaluated_run, observation_1, seed=NOISE_1, num_samples=13, details=details,
                              mesh=gs.make_mesh(model_axis=model_axis))
    assert placed.shape == (13, 2) and placed.dtype == np.float32 and 0 < details["acceptance"] <= 1
    np.testing.assert_allclose(placed, one, rtol=0, atol=1e-5)
    # the run's own draws at observation 1 (noise_seed(0, 1)), made on its 8-device mesh: the same stream's first rows
    np.testing.assert_allclose(placed, np.load(evaluated_run / "posterior_samples.npz")["samples"][:13], atol=1e-4)
    # read to sample, not resumed: was 'resumed from <checkpoint> at step 8 ...; early stopping: best step 8'
    (line,) = [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()]
    shape = {"data": 8 // model_axis, "model": model_axis}
    assert line == (f"sampling checkpoint {evaluated_run / 'checkpoints' / '8'} (step 8), placed by rule "
                    f"'replicated' on mesh {shape}; the weights of its best validation (step 8)")
    assert not any("resumed" in r.getMessage() or "afresh" in r.getMessage() for r in caplog.records)


@pytest.fixture
def checkpoint_read(monkeypatch, tmp_path, saved_checkpoints):
    """``tmp_path``: a two_moons run's folder (run config, z-score statistics), its x_o.npy beside it; the model is
    never built: a test reaching ``build_state`` fails."""
    monkeypatch.setattr(state, "build_state", lambda *a, **k: pytest.fail("built the model"))
    return _run_folder(tmp_path, saved_checkpoints["full"])


@pytest.mark.parametrize("flags, named", [
    (["--num-samples", "0"], "--num-samples 0 must be an integer >= 1"),
    (["--num-samples", "-3"], "--num-samples -3 must be an integer >= 1"),
    (["--seed", "-1"], "--seed -1 must be an integer >= 0"),
    # was accepted, and written as an object array that np.load refuses
    (["--seed", str(2**64)], f"--seed {2**64} must be an integer >= 0 and <= 9,223,372,036,854,775,807"),
    (["--ode-steps", "0"], "--ode-steps 0 must be an integer >= 1 and <= 10,000"),
    # was accepted up to 2**31 - 1: --ode-steps 100000000 sampled for days
    (["--ode-steps", "100000000"], "--ode-steps 100000000 must be an integer >= 1 and <= 10,000 (as a run's "
                                   "eval.ode_steps; flow-matching samplers use 10-1,000)"),
    (["--num-samples", str(10**13)], "--num-samples 10000000000000 needs over 1280000.0 GB to draw"),
])
def test_cli_names_an_out_of_range_flag_as_typed(checkpoint_read, capsys, flags, named):
    # Was: 'num_samples=0 must be an integer >= 1', a keyword the command line never had.
    # Was: exit code 1 (--seed -1 here), where argparse's refusal of --seed -1e1 exits 2: every refusal now 2.
    assert main([str(checkpoint_read), str(checkpoint_read / "x_o.npy"), *flags]) == 2
    err = capsys.readouterr().err
    assert f"[ERROR] {named}" in err, err
    assert not any(f"{word}=" in err for word in ("num_samples", "seed", "ode_steps"))
    assert sorted(p.name for p in checkpoint_read.iterdir()) == ["checkpoints", "x_o.npy"]  # nothing written


@pytest.mark.parametrize("failure", [
    ValueError("checkpoint .../checkpoints/8 is corrupt: truncated file"),  # e.g. overwritten while read
    FileNotFoundError("[Errno 2] No such file or directory: '.../checkpoints/8'"),  # deleted, no newer one
    RuntimeError("a posterior draw holds NaN or inf"),
])
def test_cli_names_a_failed_draw_with_exit_1_not_argparse_s_2(checkpoint_read, monkeypatch, capsys, failure):
    # Was: exit 2 (argparse's code for refused arguments) for a ValueError or FileNotFoundError raised while drawing,
    # whose arguments had passed every check: scripts read it as a mistyped command. Now 1, one [ERROR] line.
    def failing_draw(*args, **kwargs):
        raise failure

    monkeypatch.setattr(own_observation, "draw_posterior", failing_draw)
    assert main([str(checkpoint_read), str(checkpoint_read / "x_o.npy"), "--num-samples", "4"]) == 1
    assert capsys.readouterr().err == f"[ERROR] {failure}\n"
    assert sorted(p.name for p in checkpoint_read.iterdir()) == ["checkpoints", "x_o.npy"]  # nothing written
    # a refusal of the same arguments' values is still argparse's 2, before any draw
    assert main([str(checkpoint_read), str(checkpoint_read / "x_o.npy"), "--num-samples", "0"]) == 2


def test_the_api_names_its_keywords(checkpoint_read):
    with pytest.raises(ValueError, match=r"^seed=-1 must be an integer >= 0 and <= 9,223,372,036,854,775,807"):
        sample_posterior(checkpoint_read, np.zeros(2), seed=-1)
    with pytest.raises(ValueError, match=r"^ode_steps=0 must be an integer >= 1"):
        sample_posterior(checkpoint_read, np.zeros(2), ode_steps=0)


def _fake_draws(*args, details, **kwargs):
    details.update(observation=np.zeros(2, np.float32), seed=0, ode_steps=2, step=5, checkpoint="c",
                   weights="EMA at the last step", checkpoint_step=5, task="two_moons", acceptance=1.0,
                   dtype="float32")
    return np.ones((3, 2), np.float32)


def test_the_docs_list_every_array_the_output_holds(run_read, monkeypatch):
    # Was: the README listed the file's arrays without checkpoint_step (docs/harness.md had it). The list is now on
    # docs/harness.md alone, which the README links.
    import re

    monkeypatch.setattr(own_observation, "sample_posterior", _fake_draws)
    out = run_read / "listed.npz"
    assert main([str(run_read), str(run_read / "x_o.npy"), "--out", str(out)]) == 0
    with np.load(out) as saved:
        arrays = set(saved.files)
    repo = Path(__file__).resolve().parents[1]
    for page in (repo / "docs" / "harness.md",):
        text = " ".join(page.read_text().split())
        while re.search(r"\([^()]*\)", text):  # asides, (num_samples, dim_theta) and the like
            text = re.sub(r" ?\([^()]*\)", "", text)
        sentence = re.search(r"`x_o_posterior\.npz` holds (.*?)\. ", text)
        assert sentence and set(re.findall(r"`(\w+)`", sentence[1])) == arrays, (page.name, sentence and sentence[1])


@pytest.mark.parametrize("given, written", [("mine", "mine.npz"), ("mine.npz", "mine.npz"), ("r.v2", "r.v2.npz"),
                                            ("out", "out/x_o_posterior.npz"), ("MINE.NPZ", "MINE.NPZ")])
def test_cli_out_is_the_file_written_and_printed(run_read, monkeypatch, capsys, given, written):
    # Was: --out mine wrote 'mine' (no suffix; np.savez would write mine.npz), and a folder was refused as existing.
    tmp_path = run_read
    monkeypatch.setattr(own_observation, "sample_posterior", _fake_draws)
    (tmp_path / "out").mkdir()
    run = {str(p.relative_to(tmp_path)) for p in (tmp_path / "checkpoints").rglob("*")} | {"checkpoints"}
    assert main([str(tmp_path), str(tmp_path / "x_o.npy"), "--out", str(tmp_path / given)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f": {tmp_path / written}")
    assert np.load(tmp_path / written)["samples"].shape == (3, 2)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == sorted({"out", "x_o.npy", written,
                                                                                        *run})
    with pytest.raises(SystemExit):  # the file it would write exists: refused, as typed
        main([str(tmp_path), str(tmp_path / "x_o.npy"), "--out", str(tmp_path / given)])
    assert f"{tmp_path / written} exists and is never overwritten" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["x.npy", "samples.CSV", "x.txt"])
def test_cli_out_of_another_file_type_is_refused_naming_the_npz_to_pass(run_read, monkeypatch, capsys, given):
    # Was: --out x.npy wrote x.npy.npz, a file the user did not name (and an .npy holds one array, not the record).
    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    with pytest.raises(SystemExit) as refused:
        main([str(run_read), str(run_read / "x_o.npy"), "--out", str(run_read / given)])
    npz, suffix = (run_read / given).with_suffix(".npz"), Path(given).suffix
    assert refused.value.code == 2 and capsys.readouterr().err.rstrip().endswith(
        f"--out {run_read / given}: sample.py writes a .npz archive (the samples with their observation, seed and "
        f"checkpoint), not a {suffix} file; pass --out {npz} (its 'samples' is the array of samples)")
    assert sorted(p.name for p in run_read.iterdir()) == ["checkpoints", "x_o.npy"]
    monkeypatch.setattr(own_observation, "sample_posterior", _fake_draws)  # the --out it names is written as named
    assert main([str(run_read), str(run_read / "x_o.npy"), "--out", str(npz)]) == 0
    assert np.load(npz)["samples"].shape == (3, 2)


def test_a_npz_archive_is_named_as_one_with_the_command_that_saves_its_array(tmp_path):
    # Was: "holds several arrays (x)" for an archive of one array, and no command naming it.
    np.savez(tmp_path / "obs.npz", x=np.array([0.1, -0.2]))
    with pytest.raises(ValueError) as err:
        load_observation(tmp_path / "obs.npz")
    assert str(err.value) == (
        f"observation file {tmp_path / 'obs.npz'} is a .npz archive (its arrays: x), not a .npy file; save the "
        f"observation once: python -c \"import numpy as np; np.save('{tmp_path / 'obs_x_o.npy'}', "
        f"np.load('{tmp_path / 'obs.npz'}')['x'])\" and pass {tmp_path / 'obs_x_o.npy'}")
    command = str(err.value).split('python -c "', 1)[1].split('"')[0]
    exec(command)  # the command it names does what it says
    assert load_observation(tmp_path / "obs_x_o.npy").tolist() == [0.1, -0.2]
    np.savez(tmp_path / "drawn.npz", samples=np.zeros((3, 2)), observation=np.array([0.5, 0.25]))  # sample.py's output
    with pytest.raises(ValueError, match=r"\(its arrays: samples, observation\), .*"
                                         r"np.load\('.*drawn.npz'\)\['observation'\]"):
        load_observation(tmp_path / "drawn.npz")


def test_a_file_of_several_observations_names_the_command_that_splits_it(tmp_path):
    # Was: "pass one row, x_o[i] (shape (2,)), per call", which no sample.py argument takes.
    path = tmp_path / "many.npy"
    np.save(path, np.array([[0.1, -0.2], [0.3, 0.4], [0.0, 0.5]]))
    with pytest.raises(ValueError) as err:
        check_observation(load_observation(path), dim_x=2, x_transform="none", task="two_moons", source=path)
    assert str(err.value).startswith(f"{path} holds 3 observations (shape (3, 2)), but a posterior is drawn at one; "
                                     "save one file per row: python -c ")
    assert str(err.value).endswith(", then run sample.py on each many_<i>.npy")
    exec(str(err.value).split('python -c "', 1)[1].split('"')[0])  # the command it names writes one file per row
    assert [load_observation(tmp_path / f"many_{i}.npy").tolist() for i in range(3)] == [[0.1, -0.2], [0.3, 0.4],
                                                                                          [0.0, 0.5]]


@pytest.mark.parametrize("in_file", [True, False])
def test_an_empty_file_or_array_is_named_as_holding_no_observation(tmp_path, in_file):
    # Was: "holds 0 observations ...; save one file per row: python -c ...", a command that saves no file.
    path = tmp_path / "none.npy"
    np.save(path, np.zeros((0, 2)))
    with pytest.raises(ValueError) as err:
        check_observation(load_observation(path), dim_x=2, x_transform="none", task="two_moons",
                          source=path if in_file else None)
    assert str(err.value) == (f"{path} holds no observation (shape (0, 2)): give one, a (2,) vector or a (1, 2) row, "
                              "saved with numpy.save('x_o.npy', x_o)" if in_file else
                              "x_o holds no observation (shape (0, 2)): give one, a (2,) vector or a (1, 2) row")


def test_cli_refuses_an_output_its_disk_has_no_room_for_before_sampling(run_read, monkeypatch, capsys):
    # Was: the whole draw, then an OSError traceback ("No space left on device") as the file was written.
    from types import SimpleNamespace

    from gensbi_sharding.harness import sample_output

    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    monkeypatch.setattr(sample_output.shutil, "disk_usage", lambda path: SimpleNamespace(free=8300))
    with pytest.raises(SystemExit):  # the run's 16 samples of 2 float32s: 8,320 bytes with the rest
        main([str(run_read), str(run_read / "x_o.npy")])
    assert capsys.readouterr().err.endswith(
        f"sample.py: error: the default output {run_read / 'x_o_posterior.npz'} (beside the observation file): its "
        "disk has 8,300 bytes free, and the samples take 8,320; free space there, or pass --out <a file on a disk with "
        "room>.npz (or fewer --num-samples)\n")
    monkeypatch.setattr(own_observation, "sample_posterior", _fake_draws)
    assert main([str(run_read), str(run_read / "x_o.npy"), "--num-samples", "1"]) == 0  # 8,200 bytes: room
    assert sorted(p.name for p in run_read.iterdir()) == ["checkpoints", "x_o.npy", "x_o_posterior.npz"]


def test_cli_names_a_write_that_failed_after_sampling_and_leaves_no_file(run_read, monkeypatch, capsys):
    # Was a traceback ending in OSError: [Errno 28] No space left on device (the disk filled while it sampled).
    import errno
    import os

    from gensbi_sharding.harness import outputs

    monkeypatch.setattr(own_observation, "sample_posterior", _fake_draws)

    def disk_full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(outputs, "write_atomic", disk_full)
    assert main([str(run_read), str(run_read / "x_o.npy")]) == 1
    assert capsys.readouterr().err == (
        f"[ERROR] cannot write {run_read / 'x_o_posterior.npz'} (No space left on device): nothing written, no partial "
        "file; free space or pass --out <a file on another disk>.npz and run again (the same seed draws the same "
        "samples)\n")
    assert sorted(p.name for p in run_read.iterdir()) == ["checkpoints", "x_o.npy"]

REPO = Path(__file__).resolve().parents[1]
NO_CUDA_HERE = pytest.mark.skipif(
    any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
    reason="CUDA is available here: JAX_PLATFORMS=cuda starts")


def run_under_cuda(tmp_path, args):
    """``python <args>`` under JAX_PLATFORMS=cuda (absent here), with an observation file x_o.npy in ``tmp_path``."""
    import os
    import subprocess
    import sys

    np.save(tmp_path / "x_o.npy", np.array([0.1, -0.2]))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "JAX_PLATFORMS": "cuda", "PYTHONPATH": str(REPO)})


@pytest.mark.slow
def test_sample_py_names_a_step_whose_arrays_do_not_read_without_late_tracebacks(tmp_path, saved_checkpoints):
    # Was: 'sample.py <run> x_o.npy', the run's checkpoints/8/arrays/manifest.ocdbt gone, printed a "RuntimeError:
    # Event loop is closed" traceback for each read still under way (40 for experiment=quick's run) around its one
    # [ERROR] line: TensorStore's threads end them after Orbax closed its loop. sample.py drops them, as launch.py.
    import subprocess
    import sys

    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter, saved_config, saved_info

    source, run, step = saved_checkpoints["full"] / "8", tmp_path, tmp_path / "checkpoints" / "8"
    with CheckpointWriter(run / "checkpoints", config=saved_config(source), async_save=False) as writer:  # 40 arrays
        writer.save(8, {f"layer{i}": {"w": jnp.arange(64.0) + i, "b": jnp.ones(8)} for i in range(20)},
                    jax.random.key(0), info=saved_info(source))
    np.save(run / "x_o.npy", np.zeros(2))
    (step / "arrays" / "manifest.ocdbt").unlink()  # its arrays' database
    proc = subprocess.run([sys.executable, str(REPO / "sample.py"), str(run), str(run / "x_o.npy")], capture_output=True,
                          text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1 and "Event loop is closed" not in proc.stderr, proc.stderr[-3000:]
    # (asyncio's own "Task exception was never retrieved", logged now and then as the process ends, is not this)
    assert any(line.startswith(f"[ERROR] checkpoint {step} is damaged: its 'arrays' item cannot be read (ValueError: "
                               "NOT_FOUND: ") for line in proc.stderr.splitlines()), proc.stderr[-3000:]


@pytest.mark.slow
@NO_CUDA_HERE
def test_cli_names_a_jax_platforms_not_here_and_writes_nothing(tmp_path):
    # Was: JAX_PLATFORMS=cuda on a CPU machine ended sample.py with a traceback ending in a bare AssertionError.
    proc = run_under_cuda(tmp_path, [str(REPO / "sample.py"), str(tmp_path), str(tmp_path / "x_o.npy")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "[ERROR] JAX_PLATFORMS=cuda is not available here: JAX has cpu; unset JAX_PLATFORMS for JAX's default, "
        "or set JAX_PLATFORMS=cpu")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x_o.npy"]


@pytest.mark.slow
@NO_CUDA_HERE
def test_sample_posterior_names_a_jax_platforms_not_here(tmp_path):
    # Was: from Python (README's sample_posterior), JAX_PLATFORMS=cuda on a CPU machine ended in a bare AssertionError
    # from the checkpoint reader's start of JAX; only sample.py's command line named it.
    proc = run_under_cuda(tmp_path, ["-c", f"""
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.own_observation import sample_posterior
try:
    sample_posterior({str(tmp_path)!r}, {str(tmp_path / "x_o.npy")!r}, num_samples=10)
except ConfigError as err:
    print(err)
"""])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == ("JAX_PLATFORMS=cuda is not available here: JAX has cpu; unset JAX_PLATFORMS for "
                                   "JAX's default, or set JAX_PLATFORMS=cpu")


@pytest.mark.slow  # trains a run
def test_an_early_stopped_run_s_samples_files_name_the_best_validation_s_step(tmp_path, devices):
    """Stopped early at step 20 with its best validation at step 15: the run sampled step 15's weights, as its console
    says, but posterior_samples.npz and sample.py's output recorded step=20. Both now record step 15, the weights
    (best validation) and checkpoint_step=20."""
    out = tmp_path / "run"
    metrics = run_tiny(out, "eval.enabled=true", "train.steps=200", "train.val_every=5", "train.patience=1",
                       "train.learning_rate=0.05")
    assert metrics["stopped_early"] and metrics["best_step"] < metrics["final_step"], metrics  # the case checked
    recorded = (metrics["best_step"], "EMA at the best validation step", metrics["final_step"])
    with np.load(out / "posterior_samples.npz") as run:
        assert (int(run["step"]), run["weights"].item(), int(run["checkpoint_step"])) == recorded
        observation = run["observation"]
    details = {}
    sample_posterior(out, observation, num_samples=16, details=details)
    assert (details["step"], details["weights"], details["checkpoint_step"]) == recorded


def test_a_checkpoint_without_statistics_names_the_resume_as_the_shell_and_hydra_read_it_back(tmp_path, monkeypatch):
    """Was: ``train.resume=/tmp/my runs (1)/checkpoints/8`` as it is: pasted, the shell splits it (round 43)."""
    from gensbi_sharding import checkpoint
    from gensbi_sharding.harness.override_grammar import hydra_override

    step = tmp_path / "my runs (1)" / "checkpoints" / "8"
    step.mkdir(parents=True)
    monkeypatch.setattr(checkpoint, "find_checkpoint", lambda folder: step)
    monkeypatch.setattr(checkpoint, "saved_config", lambda s: {"data": {"name": "two_moons"}, "model": {"name": "mlp"}})
    monkeypatch.setattr(checkpoint, "saved_info", lambda s: {})
    with pytest.raises(ValueError, match="holds no z-score statistics") as refused:
        sample_posterior(step.parent.parent, np.zeros(2))
    assert f"(python launch.py {hydra_override('train.resume', step)} ... hydra.run.dir=<new folder>)" in str(
        refused.value) and hydra_override("train.resume", step).startswith("'train.resume=\"")


def _damage(step: Path, item: str) -> None:
    """``step``'s ``item`` unreadable: its JSON not JSON, or its arrays' data files gone."""
    import shutil

    if item == "arrays":
        shutil.rmtree(step / "arrays" / "d")
    else:
        (step / item / "metadata").write_text("{not json")


@pytest.mark.parametrize("item", ["config", "meta", "arrays"])  # the first two read by the checks, arrays by the draw
def test_cli_names_a_damaged_checkpoint_with_exit_1_and_the_step_folder_to_sample(checkpoint_read, monkeypatch,
                                                                                   capsys, item):
    # Was: exit 2 (argparse's code for a mistyped argument) for a damaged config or meta item, 1 for damaged arrays;
    # and the library's advice for training: "resume from another step folder: ... (or move ... aside".
    import shutil

    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import restore

    checkpoints = checkpoint_read / "checkpoints"
    shutil.copytree(checkpoints / "8", checkpoints / "9")
    _damage(checkpoints / "9", item)
    monkeypatch.setattr(own_observation, "draw_posterior",
                        lambda cfg, step_dir, *a, **k: restore(step_dir, {"w": jnp.zeros(2)}))
    x_o = checkpoint_read / "x_o.npy"
    assert main([str(checkpoint_read), str(x_o)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"[ERROR] checkpoint {checkpoints / '9'} is damaged: its '{item}' item cannot be read ("), err
    assert err.endswith(f"); sample the run's newest intact step instead (sample.py samples the step folder it is "
                        f"given): python sample.py {checkpoints / '8'} {x_o} with the same options\n"), err
    assert "resume" not in err and "move" not in err
    assert sorted(p.name for p in checkpoint_read.iterdir()) == ["checkpoints", "x_o.npy"]  # nothing written


def test_a_damaged_checkpoint_without_an_intact_one_beside_it_says_none_can_be_sampled(checkpoint_read):
    # Was: "no other step folder is complete: start without it", training's advice. Named by the API's words too.
    import shutil

    from gensbi_sharding.harness.sampled_checkpoint import DamagedCheckpoint

    checkpoints = checkpoint_read / "checkpoints"
    shutil.copytree(checkpoints / "8", checkpoints / "9")
    _damage(checkpoints / "9", "config")
    with pytest.raises(DamagedCheckpoint) as err:
        sample_posterior(checkpoint_read, np.zeros(2))
    assert str(err.value).endswith(f"; sample the run's newest intact step instead: "
                                   f"sample_posterior({str(checkpoints / '8')!r}, x_o, ...)")
    _damage(checkpoints / "8", "meta")
    with pytest.raises(DamagedCheckpoint) as err:
        sample_posterior(checkpoint_read, np.zeros(2))
    assert str(err.value).endswith("; no other step folder of its run holds a readable checkpoint, so nothing there "
                                   "can be sampled: train the run again and sample its new folder"), str(err.value)


@pytest.mark.parametrize("how", ["deleted", "cut short"])
def test_a_step_folder_whose_array_files_are_gone_is_damaged_not_intact(checkpoint_read, capsys, how):
    # Was: a step folder was judged intact by its config and meta alone: its arrays' data files gone or cut short, it
    # was named "the run's newest intact step" to sample instead, and sampled, the model was built before its restore
    # failed. Now its arrays are read (into host memory) first; checkpoint_read fails any model build.
    import shutil

    checkpoints = checkpoint_read / "checkpoints"
    for step in ("9", "10"):
        shutil.copytree(checkpoints / "8", checkpoints / step)
    _damage(checkpoints / "10", "config")
    data = [f for f in (checkpoints / "9" / "arrays").rglob("*") if f.is_file() and f.parent.name == "d"]
    assert data
    for f in data:
        f.unlink() if how == "deleted" else f.write_bytes(f.read_bytes()[:len(f.read_bytes()) // 2])
    x_o = checkpoint_read / "x_o.npy"
    fix = f"; sample the run's newest intact step instead (sample.py samples the step folder it is given): " \
          f"python sample.py {checkpoints / '8'} {x_o} with the same options\n"
    assert main([str(checkpoint_read), str(x_o)]) == 1  # the newest, 10, damaged: 8 named, not 9
    err = capsys.readouterr().err
    assert err.startswith(f"[ERROR] checkpoint {checkpoints / '10'} is damaged: its 'config' item") and err.endswith(
        fix), err
    assert main([str(checkpoints / "9"), str(x_o)]) == 1  # 9 itself: named damaged, no model built
    err = capsys.readouterr().err
    assert err.startswith(f"[ERROR] checkpoint {checkpoints / '9'} is damaged: its 'arrays' item cannot be read ("), err
    assert err.endswith(fix) and "\n" not in err[:-1], err
    assert sorted(p.name for p in checkpoint_read.iterdir()) == ["checkpoints", "x_o.npy"]  # nothing written



def test_a_sampled_step_without_its_arrays_manifest_is_named_with_the_whole_path(tmp_path):
    # Was: sample.py's check cut the cause at 120 characters, '... at local file "/tmp/b61/e_arrays_man)': half
    # a path, a quote left open. Now cut at a word boundary outside quotes, " ..." said.
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint import CheckpointWriter
    from gensbi_sharding.harness import sampled_checkpoint

    with CheckpointWriter(tmp_path / "checkpoints", config={"seed": 0}, async_save=False) as writer:
        writer.save(8, {"w": jnp.ones(4)}, jax.random.key(0), info={})
    step = tmp_path / "checkpoints" / "8"
    (step / "arrays" / "manifest.ocdbt").unlink()
    with pytest.raises(sampled_checkpoint.DamagedCheckpoint) as err:
        sampled_checkpoint.arrays_read(step, flags=True)
    said = str(err.value)
    assert said.startswith(f"checkpoint {step} is damaged: its 'arrays' item cannot be read (ValueError: "), said
    assert f'in OCDBT database at local file "{step / "arrays"}/" does not exist ...); ' in said, said
    assert "tensorstore_spec" not in said and said.count('"') % 2 == 0, said

def test_a_checkpoint_s_arrays_are_checked_a_part_at_a_time_each_read_once(tmp_path, monkeypatch):
    # Was: every array read in one restore before the model was built: a 1.2 GB checkpoint held whole in host memory
    # (1.98 GB peak for the check alone, where the parts' 0.83 GB), besides what the run's own restore then holds.
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    from gensbi_sharding.checkpoint import CheckpointWriter
    from gensbi_sharding.harness import sampled_checkpoint

    with CheckpointWriter(tmp_path / "checkpoints", config={"seed": 0}, async_save=False) as writer:
        writer.save(8, {f"layer{i}": jnp.ones(64 * (i + 1)) for i in range(6)}, jax.random.key(0), info={})
    step = tmp_path / "checkpoints" / "8"
    original, read = ocp.Checkpointer.restore, []

    def restore(self, *args, **kwargs):
        restored = original(self, *args, **kwargs)
        read.append({jax.tree_util.keystr(path): leaf.nbytes for path, leaf in
                     jax.tree_util.tree_leaves_with_path(restored["arrays"])})
        return restored

    monkeypatch.setattr(ocp.Checkpointer, "restore", restore)
    sampled_checkpoint.arrays_read(step, flags=True)
    everything = read.pop()
    assert len(everything) > 4 and not read
    cap = max(everything.values())  # small enough to need several parts, room for the largest
    assert sum(everything.values()) > 2 * cap
    monkeypatch.setattr(sampled_checkpoint, "READ_BYTES", cap, raising=False)
    sampled_checkpoint.arrays_read(step, flags=True)
    assert len(read) > 2 and all(sum(part.values()) <= cap for part in read), [sum(p.values()) for p in read]
    names = [name for part in read for name in part]
    assert sorted(names) == sorted(everything)  # each array read, once


@pytest.mark.parametrize("x_o", [[1e30, 0.0], [0.5, 0.0]])
def test_draws_failing_at_an_observation_far_from_training_name_it_not_the_weights(checkpoint_read, monkeypatch,
                                                                                    capsys, x_o):
    # Was: python sample.py <run> x_o.npy with x_o = [1e30, 0] (another unit, another task's data): a warning that x_o
    # lies far from the training simulations, then "[ERROR] ... hold NaN or inf ...: the model's velocity field is
    # not finite ... (weights holding NaN or inf ...); sample an earlier checkpoint, or retrain with a lower
    # train.learning_rate", a retraining for nothing. Near the training data the weights are still named.
    from gensbi_sharding.harness.posterior import draw_inside_support

    def non_finite_draws(*args, **kwargs):  # what the model's field gives there, through the run's own check
        return draw_inside_support(lambda m: np.full((m, 2), np.nan), lambda s: np.ones(len(s), bool), 4)

    monkeypatch.setattr(own_observation, "draw_posterior", non_finite_draws)
    np.save(checkpoint_read / "x_o.npy", np.asarray(x_o))
    assert main([str(checkpoint_read), str(checkpoint_read / "x_o.npy"), "--num-samples", "4"]) == 1
    said = capsys.readouterr().err.strip().splitlines()[-1]
    if x_o[0] < 1e6:
        assert said.startswith("[ERROR] 4 of 4 posterior draws hold NaN or inf (the first at row 0): the model's "
                               "velocity field is not finite"), said
        return
    assert said == ("[ERROR] 4 of 4 posterior draws hold NaN or inf (the first at row 0) at an x_o far from the run's "
                    "training simulations (the likely cause, not the weights): x_o[0] = 1e+30 lies 1e+30 standard "
                    "deviations from the mean of the run's training simulations; at most 1/1e+30^2 of them lie that "
                    "far (Chebyshev): the model saw few or none there, and its samples may be far off: check that x_o "
                    "is data of task 'two_moons' in the simulator's raw units")
    assert sorted(p.name for p in checkpoint_read.iterdir()) == ["checkpoints", "x_o.npy"]  # nothing written


def test_a_copy_whose_newest_step_lost_its_metadata_is_not_sampled_at_an_older_step(tmp_path):
    # Was: sample.py <copy> (sample_posterior) sampled step 3 without a word, step 5 there whole but for its Orbax step
    # metadata (left out of the copy): an older model than the newest. Now refused naming both steps and the fix.
    folder = tmp_path / "copy" / "checkpoints"
    steps_with_the_newest_unconfirmed(folder)
    for given in (tmp_path / "copy", folder):
        with pytest.raises(FileNotFoundError) as err:
            sample_posterior(given, np.zeros(2))
        assert str(err.value) == (
            f"run folder {str(given)!r}: step 5 in {folder} is newer than its newest complete step, 3, but lost Orbax's "
            "step metadata, the record of its commit (deleted, or left out of a copy): copy that step folder again "
            f"whole from where it was saved; if the folder it was copied from is gone, pass the newest complete step "
            f"left, {folder / '3'}")


def test_a_run_from_before_the_ode_step_bound_is_named_as_the_run_s_not_as_a_flag_typed(tmp_path, capsys,
                                                                                          monkeypatch):
    # Was: 'sample.py <run> x_o.npy', <run> trained (before the bound) with eval.ode_steps=20000, said '--ode-steps
    # 20000 must be an integer >= 1 and <= 10,000 ...', a flag never typed; now the run's setting and the flag to pass.
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    monkeypatch.setattr(state, "build_state", lambda *a, **k: pytest.fail("built the model"))
    saved = {"data": {"name": "two_moons", "x_transform": "none", "shards": 1}, "model": {"name": "mlp"},
             "eval": {"num_samples": 16, "ode_steps": 20000}, "seed": 0}
    stats = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    run = _run_folder(tmp_path, saved_checkpoint(tmp_path / "saved", saved, {NORMALIZATION: stats}).parent)
    assert main([str(run), str(run / "x_o.npy")]) == 2
    assert capsys.readouterr().err.strip() == (
        "[ERROR] the run's eval.ode_steps=20000, the default of --ode-steps, is above 10,000 (flow-matching samplers "
        "use 10-1,000); pass --ode-steps 1000")
    with pytest.raises(ValueError, match=r"the default of ode_steps, is above 10,000 .*; pass ode_steps=1000$"):
        sample_posterior(run, run / "x_o.npy")


@pytest.mark.slow  # trains a run (the module's evaluated_run)
def test_sample_py_on_a_latin1_console_names_a_non_ascii_run_folder_escaped(evaluated_run, observation_1, tmp_path):
    # Was: PYTHONIOENCODING=latin-1 sample.py '<runs/rün—路>' x_o.npy wrote its samples, then its last line (the
    # folder's name: '—' and '路' are not latin-1) raised UnicodeEncodeError: a traceback, exit 1.
    import shutil
    import subprocess
    import sys

    run = tmp_path / "r\u00fcn\u2014\u8def"
    shutil.copytree(evaluated_run, run)
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "LC_CTYPE")}
    proc = subprocess.run([sys.executable, str(REPO / "sample.py"), str(run), str(observation_1), "--num-samples",
                           "16", "--out", str(tmp_path / "s.npz")], capture_output=True, timeout=300,
                          env={**env, "PYTHONIOENCODING": "latin-1", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert b" at x_o from " + str(tmp_path).encode() + b"/r\xfcn\\u2014\\u8def/checkpoints/" in proc.stdout, proc.stdout
    assert np.load(tmp_path / "s.npz")["samples"].shape == (16, 2)
