"""Truncated sequential rounds on an sbibm task (``benchmarks/sequential_rounds.py``, run by ``benchmarks/sbibm.py
run --rounds 2`` through ``benchmarks/sequential.py``), scored as the harness scores them."""

import csv
import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "benchmarks"))  # the modules' siblings (sbibm_method, cli_args)


def load(name="sequential_rounds"):
    """A benchmark module (the rounds) or script (``sequential``: its main() not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_script", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task,margin", [("sir", 0.0), ("sir", 0.5),  # a bounded prior: its first draws take seconds
                                         pytest.param("gaussian_linear_uniform", 2.0, marks=pytest.mark.slow)])
def test_the_truncated_prior_draws_inside_the_widened_box_and_the_support(task, margin):
    """The box is the samples' range in the support bijection's coordinates, widened by ``margin`` times it
    per side: every draw lies in it and in the prior's support, however wide the margin; its prior mass is the
    acceptance of the rejection."""
    import jax

    from gensbi_sharding.harness import tasks

    seq, t = load(), tasks.get_task(task)
    samples = np.asarray(tasks.reference_samples(t, 1)[:500])
    theta, mass = seq.truncated_prior(t, jax.random.key(0), samples, 2000, margin, chunk=50_000)
    assert theta.shape == (2000, t.dim_theta) and 0 < mass < 1
    assert np.asarray(t.get_prior_dist().support(theta)).all()  # uniform: inside [-1, 1]; sir: positive
    bijection = tasks.prior_bijection(t)
    u, v = tasks.to_unconstrained(bijection, samples), tasks.to_unconstrained(bijection, theta)
    width = u.max(0) - u.min(0)
    assert (v >= u.min(0) - margin * width - 1e-5).all() and (v <= u.max(0) + margin * width + 1e-5).all()
    if margin == 0.0:  # the samples' own range, filled: draws near both ends of every dimension
        assert (v.min(0) < u.min(0) + 0.1 * width).all() and (v.max(0) > u.max(0) - 0.1 * width).all()
    with pytest.raises(RuntimeError, match="--margin"):  # a box the prior almost never reaches is named
        seq.truncated_prior(t, jax.random.key(0), samples[:2] * 0 + samples[:1], 10, 0.0,
                            max_draws=10 ** 5, chunk=50_000)


@pytest.mark.slow
@pytest.mark.parametrize("margin", [0.0, 0.1])
def test_the_ellipsoid_holds_its_samples_and_its_draws_but_not_the_corners_a_box_would_keep(margin):
    """``--region ellipsoid``: the samples' Gaussian's region out to their largest Mahalanobis distance, times
    ``1 + margin``, in theta. It holds every sample it was fitted on, not a far point of the support nor the
    corner of the samples' own per-dimension range (inside their box: in 10 dimensions the box's corners are far
    from the posterior), yet it holds the posterior samples it was not fitted on; its draws are prior draws inside
    it and inside [-1, 1]^10, a few % of the prior's mass (the box held 55-99 % on gaussian_linear_uniform)."""
    import jax

    from gensbi_sharding.harness import tasks

    seq, t = load(), tasks.get_task("gaussian_linear_uniform")
    samples = np.asarray(tasks.reference_samples(t, 1)[:500], np.float64)
    inside, name = seq.region_test(t, samples, margin, "ellipsoid")
    mean, precision = samples.mean(0), np.linalg.inv(np.cov(samples, rowvar=False))  # computed apart from the script
    distance = lambda theta: np.sqrt(np.einsum("ni,ij,nj->n", theta - mean, precision, theta - mean))  # noqa: E731
    radius = distance(samples).max() * (1 + margin)
    assert inside(samples).all() and f"radius {radius:.3g}" in name
    far, corner = -np.sign(mean) * 0.99, samples.min(0)  # the support's far corner; the samples' box's corner
    assert not inside(np.stack([far, corner])).any() and (distance(np.stack([far, corner])) > radius).all()
    theta, mass = seq.truncated_prior(t, jax.random.key(0), samples, 2000, margin, chunk=100_000, region="ellipsoid")
    assert theta.shape == (2000, 10) and np.asarray(t.get_prior_dist().support(theta)).all()
    assert (distance(theta.astype(np.float64)) <= radius + 1e-6).all() and 0.005 < mass < 0.2
    held = inside(tasks.reference_samples(t, 1)[500:]).mean()  # the posterior's mass it holds: all but a trace
    assert held > 0.995


def test_the_pool_keeps_every_round_split_as_load_task_splits_it_with_its_statistics():
    from gensbi_sharding.harness.simulation_data import SimulationData

    seq, rng = load(), np.random.default_rng(0)
    draw = lambda n, loc=0.0: rng.normal(loc, 1.0, size=(n, 10)).astype(np.float32)  # noqa: E731
    first = SimulationData("gaussian_linear", draw(90), draw(90), draw(10), draw(10), draw(1)[0], draw(5),
                           *(np.zeros(10, np.float32), np.ones(10, np.float32)) * 2)
    later = [(rng.normal(size=(50, 10)).astype(np.float32), rng.normal(3, 2, size=(50, 10)).astype(np.float32))]
    pool = seq.pooled(first, later, 0.1)
    assert len(pool.theta_train) == 90 + 45 and len(pool.theta_val) == pool.val_pairs == 10 + 5
    np.testing.assert_array_equal(pool.theta_val[10:], later[0][0][45:])  # the round's last tenth held out
    x = np.concatenate([first.x_train, later[0][1][:45]])
    np.testing.assert_allclose(pool.x_mean, x.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pool.x_std, x.std(0), rtol=1e-4)
    assert first.observation is pool.observation and len(first.theta_train) == 90  # round 1's data unchanged


TINY = ["mesh=none", "model.width=16", "model.depth=1", "train.steps=6", "train.val_every=2", "train.patience=2",
        "data.batch_size=16", "eval.observations=[3]", "eval.num_samples=64", "eval.c2st_folds=2"]


@pytest.mark.slow  # a tiny sequential job (2 rounds, a 2-fold C2ST), run again (skipped), then the table
def test_two_rounds_of_sbibm_run_land_in_the_results_csv_as_a_sequential_row(tmp_path):
    """``sbibm.py run --rounds 2``: the sequential job runs in its own folder, is skipped once done (the amortised
    cell of the same task and budget is still not run), and ``table`` writes its row with its method."""
    from fork_launch import run_forked

    root = tmp_path / "results"
    command = ["run", "--root", str(root), "--tasks", "two_moons", "--budgets", "1000", "--rounds", "2", "--",
               *TINY]
    # The run; again (done: skipped); the table: each as `python benchmarks/sbibm.py <args>` in the repository
    # would end, one after the other, forked from one process that imported JAX and Flax once
    # (tests/fork_launch.py: each still a process of its own, from the script's first line).
    (tmp_path / "fork").mkdir()
    proc, again, table = run_forked(
        [{"args": args, "cwd": REPO} for args in (command, command, ["table", str(root)])], env=dict(os.environ),
        timeout=3 * 600, workdir=tmp_path / "fork", script=REPO / "benchmarks" / "sbibm.py",
        imports=("jax", "flax.nnx"))
    job = root / "two_moons_1000_sequential-2-box-0.5" / "job"
    log = (job.parent / "launch.log").read_text() if (job.parent / "launch.log").is_file() else ""
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:] + log[-3000:]
    assert "round 1: 500 prior simulations" in log and "observation 3 round 2: 500 simulations" in log
    assert json.loads((job / "metrics.json").read_text())["status"] == "ok"
    assert json.loads((job / "sequential.json").read_text()) == {"rounds": 2, "region": "box", "margin": 0.5}
    assert again.returncode == 0 and "two_moons 1000 (sequential rounds=2 region=box margin=0.5): done, skipped" \
        in again.stdout and "sequential.py" not in again.stdout
    assert not (root / "two_moons_1000").exists()  # the amortised cell is another one, never run here
    assert table.returncode == 0, table.stderr[-3000:]
    rows = list(csv.DictReader((root / "sbibm_results.csv").open(newline="")))
    assert [(r["task"], r["num_simulations"], r["observation"], r["method"]) for r in rows] == [
        ("two_moons", "1000", "3", "sequential rounds=2 region=box margin=0.5")]
    assert 0.5 <= float(rows[0]["c2st"]) <= 1.0 and rows[0]["c2st"] == f"{float(rows[0]['c2st']):.6f}"
    row = [line for line in table.stdout.splitlines() if line.startswith("| two_moons")]
    assert row == [f"| two_moons, sequential: 2 rounds per observation, box, margin 0.5 | 1,000 per observation | "
                   f"{float(rows[0]['c2st']):.3f} (1 obs., no spread) | 0.677 (obs. 3) | 0.611 (SNPE, obs. 3) |"]


@pytest.mark.parametrize("argv,named", [
    (["--margin", "nan"], "argument --margin: nan must be a finite number >= 0, e.g. --margin 0.5"),
    (["--margin", "-0.1"], "argument --margin: -0.1 must be a finite number >= 0"),
    (["--budget", "100", "--rounds", "2"], "--budget 100 in --rounds 2 gives 50 simulations a round, too few"),
    (["--budget", "2", "--rounds", "3"], "--budget 2 in --rounds 3 gives 0 simulations a round"),
    (["--region", "sphere"], "argument --region: 'sphere' is not one of box, ellipsoid"),
    (["--rounds", "1"], "--rounds 1: one round is the amortised preset, which launch.py runs; pass --rounds 2"),
    # Overrides, checked as sbibm.py run checks them (was, by hand: run, ignored or contradicting --task, a traceback)
    (["--", "eval.enabled=false"], "extra argument eval.enabled=false: the jobs would score no observation"),
    (["--", "dry_run=true"], "extra argument dry_run=true: a dry run trains and scores nothing"),
    (["--", "data=slcp"], "extra argument data=slcp: sets the task, which --task gives each job (and its folder's "
                          "name); use --task"),
    (["--", "data.num_simulations=50"], "which --budget gives each job (and its folder's name); use --budget"),
    (["--", "hydra.run.dir=/tmp/x"], "extra argument hydra.run.dir=/tmp/x: sets the job's folder, which --job "
                                     "gives; use --job"),
    (["--", "seed=0,1"], "run once per value, each with its own --job (e.g. --job <job>/seed=<value> -- seed=<value>)"),
    (["--", "train.stepz=3"], "extra argument train.stepz is not a setting of train (did you mean train.steps?)"),
    (["--", "train.resume=auto"], "extra argument train.resume=auto: a sequential job's rounds keep no checkpoint"),
])
@pytest.mark.fast_cases(4)
def test_bad_arguments_stop_before_any_work_naming_the_value_and_a_fix(argv, named, tmp_path, capsys):
    """A bad --margin or --region, or a budget whose round-1 share cannot fill a batch stop ``sequential.py``
    (the job process of ``sbibm.py run --rounds``) while the arguments are read, its folder not made: before, a
    nan margin drew 10**8 prior draws in vain, and a small share stopped in the first fit with a traceback naming
    only data.batch_size (or suggesting data.num_simulations=10000)."""
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(tmp_path / "job"), "--task", "two_moons", "--budget", "10000", *argv])
    assert stop.value.code == 2 and named in capsys.readouterr().err
    assert not (tmp_path / "job").exists()


def test_a_platform_jax_cannot_start_stops_before_the_folder_is_touched_in_one_line(tmp_path, capsys, monkeypatch):
    """A JAX_PLATFORMS (or devices.platform) JAX cannot start here stops ``sequential.py`` with its one-line error,
    the job's folder (and an earlier attempt's metrics.json) untouched (was: a traceback ending in the ConfigError,
    after the folder was made and its metrics.json removed)."""
    from gensbi_sharding.harness import devices
    from gensbi_sharding.harness.config import ConfigError

    said = "JAX_PLATFORMS=cuda is not available here: JAX has cpu; unset JAX_PLATFORMS for JAX's default"

    def refuse(cpu_count, platform):
        raise ConfigError(said)  # check_platform's words (tests/test_config.py starts JAX on them)

    monkeypatch.setattr(devices, "configure_devices", refuse)  # this process's JAX has started
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "metrics.json").write_text('{"status": "error"}')
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(tmp_path / "job"), "--task", "two_moons", "--budget", "1000"])
    assert stop.value.code == 2 and capsys.readouterr().err.endswith(f": error: {said}\n")
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["metrics.json"]


@pytest.mark.slow
def test_the_environments_refusal_comes_without_the_usage_text(tmp_path, capsys, monkeypatch):
    # Was: argparse's usage lines above "JAX_PLATFORMS=cuda is not available here", which no argument fixes
    from gensbi_sharding.harness import cpu_count

    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    monkeypatch.setattr(cpu_count, "accelerators_installed", lambda: False)  # a CPU machine
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(tmp_path / "job"), "--task", "two_moons", "--budget", "1000"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.endswith(": error: JAX_PLATFORMS=cuda is not available here: JAX has cpu; "
                                                 "unset JAX_PLATFORMS for JAX's default, or set JAX_PLATFORMS=cpu\n")
    assert "usage:" not in err and len(err.splitlines()) == 1 and not (tmp_path / "job").exists()


class _Fitted(Exception):
    """Raised by a stand-in for the rounds' first fit: the data before it loaded."""


@pytest.mark.slow
def test_the_rounds_load_the_observation_the_checks_passed(monkeypatch):
    # Was: data.num_observation=7 eval.observations=[7,8] under data.x_transform=log (the check's own fix for two_moons)
    # passed every check, made the job's folder, then failed loading round 1 on observation 1 (load_task's default)
    rounds = load()
    from sbibm_method import Method

    def fitted(cfg, sims):
        raise _Fitted

    monkeypatch.setattr(rounds, "fit", fitted)
    cfg = rounds.compose_config("two_moons", 100, ["data.x_transform=log", "data.num_observation=7",
                                                   "eval.observations=[7,8]"])
    with pytest.raises(_Fitted):
        next(rounds.sequential_scores(cfg, 100, Method(2), [7, 8], say=lambda line: None))


@pytest.mark.slow
def test_an_unusable_observation_in_the_rounds_names_the_scored_set(monkeypatch):
    # Was: "... (two_moons's 7, 8): data.num_observation=7", the override already given, not the observations scored
    rounds = load()
    from sbibm_method import Method

    monkeypatch.setattr(rounds, "fit", lambda cfg, sims: (None, None, 1, 1))
    cfg = rounds.compose_config("two_moons", 100, ["data.x_transform=log", "data.num_observation=7"])
    with pytest.raises(ValueError) as refusal:
        next(rounds.sequential_scores(cfg, 100, Method(2), [1], say=lambda line: None))
    assert str(refusal.value).startswith("data.x_transform=log needs positive data, but observation 1 of task "
                                         "'two_moons' holds ")
    assert str(refusal.value).endswith("or keep it and read only observations of positive data (two_moons's 7, 8): "
                                       "eval.observations=[7,8]")


@pytest.fixture
def rounds_never_start(monkeypatch):
    """A sequential job that passes every check fails at once with "the job started its rounds" (its rounds are what
    these tests never run); this process's JAX has started, so the device set-up is left out."""
    import sequential_rounds

    from gensbi_sharding.harness import devices

    def started(*args, **kwargs):
        raise AssertionError("the job started its rounds")

    monkeypatch.setattr(devices, "configure_devices", lambda *a: None)
    monkeypatch.setattr(sequential_rounds, "sequential_scores", started)


@pytest.mark.parametrize("inside", ["", "sub"])
def test_a_launch_runs_folder_is_refused_as_a_job_folder_its_records_kept(rounds_never_start, tmp_path, capsys, inside):
    """Was: ``--job <a launch.py run>`` deleted its c2st.csv and metrics.json and rewrote its .hydra record with this
    job's; ``--job <a run>/sub`` wrote into a completed run's folder. A sequential job's own folder (its
    sequential.json) is still started again in place."""
    from sbibm_method import Method, write_record

    run_dir = tmp_path / "a_run"
    (run_dir / ".hydra").mkdir(parents=True)
    files = {".hydra/overrides.yaml": "- train.steps=20\n", "metrics.json": '{"status": "ok"}', "c2st.csv": "1,0.6\n"}
    for name, text in files.items():
        (run_dir / name).write_text(text)
    job = run_dir / inside if inside else run_dir
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(job), "--task", "two_moons", "--budget", "10000"])
    said = ("is the folder of the run {}, whose c2st.csv, metrics.json and .hydra record this job would replace"
            if not inside else "lies inside the folder of the run {}, which is never written into")
    assert stop.value.code == 2 and capsys.readouterr().err.endswith(
        f"error: --job {job} {said.format(run_dir)}; pass a new folder, e.g. --job {run_dir}-sequential\n")
    assert {str(p.relative_to(run_dir)): p.read_text() for p in run_dir.rglob("*") if p.is_file()} == files
    write_record(run_dir, Method(2, "box", 0.5))  # a sequential job's folder: past the check (to the next, refused)
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(run_dir), "--task", "two_moons", "--budget", "100"])
    assert "--budget 100 in --rounds 2 gives 50 simulations a round, too few" in capsys.readouterr().err


def test_a_symlink_into_a_launch_runs_folder_is_refused_as_the_folder_it_leads_to(rounds_never_start, tmp_path, capsys):
    """Typed: ``sequential.py --job link``, ``link`` a symlink to ``<a launch.py run>/sub``. Was: taken as a new
    folder (the link's own path lies in no run), the job's .hydra and metrics.json written inside that run. A link to
    a sequential job's own folder is still started again in place."""
    from sbibm_method import Method, write_record

    run_dir = tmp_path / "a_run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / "metrics.json").write_text('{"status": "ok"}')
    (run_dir / "sub").mkdir()
    (tmp_path / "link").symlink_to(run_dir / "sub")
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(tmp_path / "link"), "--task", "two_moons", "--budget", "1000"])
    assert stop.value.code == 2 and capsys.readouterr().err.endswith(
        f"error: --job {tmp_path / 'link'} lies inside the folder of the run {run_dir}, which is never written into; "
        f"pass a new folder, e.g. --job {run_dir}-sequential\n")
    assert list((run_dir / "sub").iterdir()) == []
    (tmp_path / "mine").mkdir()
    write_record(tmp_path / "mine", Method(2, "box", 0.5))
    (tmp_path / "to_mine").symlink_to(tmp_path / "mine")
    with pytest.raises(AssertionError, match="started its rounds"):
        load("sequential").main(["--job", str(tmp_path / "to_mine"), "--task", "two_moons", "--budget", "1000"])


@pytest.mark.slow
def test_a_job_stopped_while_it_writes_its_folders_records_is_started_again_in_place(tmp_path, capsys, monkeypatch):
    """Was: sequential.json written after .hydra, and a stop between them left neither it nor a word: the folder
    (with an earlier attempt's metrics.json) was refused next as a launch.py run's. The record comes first, a stop
    while the rest is written is said in metrics.json, and the job starts again in its folder."""
    import sequential_rounds
    from omegaconf import OmegaConf

    from gensbi_sharding.harness import devices
    from gensbi_sharding.harness.folder_lock import FolderLock

    def stopped_while_saving(cfg, path):
        raise KeyboardInterrupt  # Ctrl-C (or a signal run passes on) lands while .hydra is written

    def rounds(cfg, budget, method, observations, say=print, stop_check=None):
        yield {"observation": 1, "c2st": 0.6, "c2st_sd_folds": 0.01, "c2st_scores": [0.59, 0.61], "n": 300}

    monkeypatch.setattr(devices, "configure_devices", lambda *a: None)  # this process's JAX has started
    monkeypatch.setattr(sequential_rounds, "sequential_scores", rounds)
    job, handler = tmp_path / "job", signal.getsignal(signal.SIGTERM)
    job.mkdir()
    (job / "metrics.json").write_text('{"status": "error"}')  # an earlier attempt's
    argv = ["--job", str(job), "--task", "two_moons", "--budget", "1000", "--", "eval.observations=[1]"]
    with monkeypatch.context() as patch:
        patch.setattr(OmegaConf, "save", stopped_while_saving)
        with pytest.raises(SystemExit) as stop:
            load("sequential").main(argv)
    assert stop.value.code == 130 and json.loads((job / "sequential.json").read_text())["rounds"] == 2
    assert json.loads((job / "metrics.json").read_text())["status"] == "stopped"
    assert not (job / FolderLock.OWNER).exists() and signal.getsignal(signal.SIGTERM) is handler
    load("sequential").main(argv)  # started again in place
    assert json.loads((job / "metrics.json").read_text())["status"] == "ok"
    assert "num_simulations: 1000" in (job / ".hydra" / "config.yaml").read_text()


def test_the_share_check_suggests_budgets_rounds_and_batch_sizes_that_train():
    from gensbi_sharding.harness.data import split_sizes

    seq = load()
    assert seq.shares_problem(600, 2, 0.1, 256) is None  # 300 a round: 270 training pairs
    problem = seq.shares_problem(500, 2, 0.1, 256)  # 250 a round: 225 training pairs
    assert "(284 needed" in problem and "pass --budget 568 or --rounds 1 or -- data.batch_size=225" in problem
    assert split_sizes(284, 0.1)[0] == 256 and split_sizes(283, 0.1)[0] < 256  # 284 = 568 / 2: the least that trains
    assert seq.shares_problem(568, 2, 0.1, 256) is None and seq.shares_problem(566, 2, 0.1, 256) is not None
    assert "pass --budget 6 or --rounds 2" in seq.shares_problem(5, 3, 0.1, 1)  # 1 a round: load_task needs 2


@pytest.mark.parametrize("outcome", ["ok", "stopped", "error"])
@pytest.mark.fast_cases(1)
def test_the_job_folder_says_how_it_was_made_and_how_it_ended(outcome, tmp_path, monkeypatch):
    """``sequential.py`` (the rounds faked) leaves what ``sbibm.py run`` and ``table`` read of a job: its config and
    overrides, ``sequential.json``, ``c2st.csv`` as an amortised job writes it, and ``metrics.json`` with status
    ok, or stopped (Ctrl-C, or a signal run passes on) or error with why and the observations scored before; its
    folder's lock is free again afterwards."""
    import sequential_rounds

    from gensbi_sharding.harness import devices
    from gensbi_sharding.harness.folder_lock import FolderLock

    def rounds(cfg, budget, method, observations, say=print, stop_check=None):
        assert (budget, method.rounds, method.region, method.margin, observations) == (1000, 3, "ellipsoid", 0.25,
                                                                                       [2, 5])
        yield {"observation": 2, "c2st": 0.61, "c2st_sd_folds": 0.02, "c2st_scores": [0.6, 0.62], "n": 300}
        if outcome == "stopped":
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # run passes its stop on, during the C2ST's classifier ...
            except KeyboardInterrupt:
                pass  # ... which catches the KeyboardInterrupt and returns a half-fitted model
            stop_check()  # as evaluate_observations does before it records a score: the stop is remembered
            yield {"observation": 5, "c2st": 0.5, "c2st_sd_folds": 0.0, "c2st_scores": [0.5, 0.5], "n": 300}
        if outcome == "error":
            raise RuntimeError("only 0.5% of posterior draws inside")
        yield {"observation": 5, "c2st": 0.55, "c2st_sd_folds": 0.01, "c2st_scores": [0.54, 0.56], "n": 300}

    monkeypatch.setattr(sequential_rounds, "sequential_scores", rounds)
    monkeypatch.setattr(devices, "configure_devices", lambda *a: None)  # this process's JAX has started
    job, handler = tmp_path / "job", signal.getsignal(signal.SIGTERM)
    argv = ["--job", str(job), "--task", "two_moons", "--budget", "1000", "--rounds", "3", "--region", "ellipsoid",
            "--margin", "0.25", "--", "eval.observations=[2,5]", "data.num_observation=2"]
    if outcome == "ok":
        load("sequential").main(argv)
    else:
        with pytest.raises(SystemExit if outcome == "stopped" else RuntimeError):
            load("sequential").main(argv)
    metrics = json.loads((job / "metrics.json").read_text())
    assert metrics["status"] == outcome and metrics["method"] == "sequential rounds=3 region=ellipsoid margin=0.25"
    assert json.loads((job / "sequential.json").read_text()) == {"rounds": 3, "region": "ellipsoid", "margin": 0.25}
    assert (job / ".hydra" / "overrides.yaml").read_text() == (
        "- experiment=sbibm\n- data=two_moons\n- data.num_simulations=1000\n- eval.observations=[2,5]\n"
        "- data.num_observation=2\n")
    assert "num_simulations: 1000" in (job / ".hydra" / "config.yaml").read_text()
    scored = [(2, "0.610000", "0.020000")] + ([(5, "0.550000", "0.010000")] if outcome == "ok" else [])
    assert [(r["observation"], r["c2st"], r["c2st_sd_folds"]) for r in metrics["c2st_observations"]] == [
        (k, float(c), float(sd)) for k, c, sd in scored]
    rows = list(csv.DictReader((job / "c2st.csv").open(newline="")))
    assert [(int(r["observation"]), r["c2st"], r["c2st_sd_folds"]) for r in rows] == scored
    if outcome == "ok":
        assert metrics["c2st"] == pytest.approx(0.58) and "error" not in metrics
    else:
        assert {"stopped": "stopped by Ctrl-C or a signal, with no checkpoint: run starts it again",
                "error": "RuntimeError: only 0.5% of posterior draws inside"}[outcome] == metrics["error"]
    assert not (job / FolderLock.OWNER).exists()  # released: the last release removes the owner note
    assert signal.getsignal(signal.SIGTERM) is handler  # restored


def test_the_share_check_of_sbibm_run_suggests_only_budgets_run_takes():
    """``sbibm.py run --budgets`` takes 1000, 10000 or 100000: the least of them that trains is suggested (1136
    would be refused), and when none does nor a round count, what has to change."""
    seq, budgets = load(), (1000, 10_000, 100_000)
    assert "pass --budgets 10000 or --rounds 3 or -- data.batch_size=225" in seq.shares_problem(
        1000, 4, 0.1, 256, "--budgets", budgets)
    assert seq.shares_problem(1000, 600, 0.1, 100_000, "--budgets", budgets).endswith(
        "(111111 needed: data.batch_size=100000 training pairs after data.val_fraction=0.1 is held out); pass fewer "
        "--rounds with a smaller data.batch_size (after --), e.g. --rounds 2 -- data.batch_size=450")


def _folders(root):
    """Every path under ``root`` with its file's text (None for a folder)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_text() for p in sorted(root.rglob("*"))}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["a file", "under a file", "an sbibm root", "holds runs", "a sweep's", "a checkout",
                                  "a c2st.csv"])
def test_a_job_folder_that_is_no_jobs_is_refused_in_one_line_before_anything_is_written(rounds_never_start, tmp_path,
                                                                                        capsys, case):
    """Typed: ``sequential.py --job <x> --task two_moons --budget 1000``. Was: a file (or a path under one) a
    FileExistsError's (NotADirectoryError's) traceback; an sbibm.py --root (or outputs/, or a sweep's folder) got
    the job's .hydra and metrics.json among its jobs, which made it a run's folder: ``sbibm.py run --root`` and
    ``table`` on it were then refused ("is the folder of the run"), as was every launch.py run under a checkout
    given as --job; a c2st.csv of one's own was deleted. An empty folder is still taken."""

    (tmp_path / "notes.txt").write_text("mine")
    if case == "a checkout":  # (was: its .hydra and metrics.json made every run in its outputs/ "inside a run")
        (tmp_path / "README.md").write_text("# mine\n")
        (tmp_path / "gensbi_sharding").mkdir()
    job = {"a file": tmp_path / "notes.txt", "under a file": tmp_path / "notes.txt" / "job"}.get(case, tmp_path)
    cell = tmp_path / "two_moons_1000"
    if case in ("an sbibm root", "holds runs", "a sweep's"):
        (cell / "job" / ".hydra").mkdir(parents=True)
        (cell / "job" / "metrics.json").write_text('{"status": "ok"}')
        (cell / "multirun.yaml").write_text("hydra: {}\n")
    if case == "an sbibm root":
        (tmp_path / "sbibm_asked.json").write_text('{"cells": [["two_moons", 1000]]}\n')
    if case == "a sweep's":
        job = cell
    if case == "a c2st.csv":
        (tmp_path / "notes.txt").unlink()
        (tmp_path / "c2st.csv").write_text("observation,c2st\n1,0.6\n")
    before = _folders(tmp_path)
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(job), "--task", "two_moons", "--budget", "1000"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and f": error: --job {job} " in err
    then = ("not a sequential job's folder (sequential.json): where this job's .hydra and metrics.json would "
            "make it a run's folder, every run below it refused; pass a new or empty folder, e.g. --job "
            f"{job / 'two_moons_1000_sequential-2-box-0.5'}")
    assert err.endswith({
        "a file": "is a file, not a folder; pass another --job",
        "under a file": f"lies under {tmp_path / 'notes.txt'}, a file, not a folder; pass another --job",
        "an sbibm root": f"is the --root of an sbibm.py run (sbibm_asked.json): where this job's .hydra and "
                         "metrics.json would make it a run's folder, every run below it refused; pass the folder run "
                         f"gives this job there, --job {tmp_path / 'two_moons_1000_sequential-2-box-0.5' / 'job'}",
        "holds runs": f"holds other runs or sweeps (two_moons_1000), {then}",
        "a sweep's": f"holds other runs or sweeps (multirun.yaml, job), {then}",
        "a checkout": f"holds README.md, gensbi_sharding, notes.txt, {then}",
        "a c2st.csv": "holds a c2st.csv of no job, which this job would delete; pass a new or empty folder, e.g. "
                      f"--job {tmp_path / 'two_moons_1000_sequential-2-box-0.5'}, or move it out"}[case]), err
    assert _folders(tmp_path) == before  # nothing written, made or deleted
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssertionError, match="started its rounds"):  # an empty folder is a new job's
        load("sequential").main(["--job", str(tmp_path / "empty"), "--task", "two_moons", "--budget", "1000"])


@pytest.mark.slow
def test_a_job_folder_holding_only_hidden_clutter_is_taken(rounds_never_start, tmp_path):
    """Typed: ``sequential.py --job <x>`` where <x> holds only what a file manager, a notebook or a killed job leaves
    (``.DS_Store``, ``.ipynb_checkpoints/``, a ``.sequential.json.<pid>.<hex>.tmp``). Was: refused as "holds
    .DS_Store, ... not a sequential job's folder"; none of them is another's work, so the job starts there."""

    (tmp_path / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".sequential.json.4242.1f2e.tmp").write_text("{")
    with pytest.raises(AssertionError, match="started its rounds"):
        load("sequential").main(["--job", str(tmp_path), "--task", "two_moons", "--budget", "1000"])


@pytest.mark.slow
def test_a_cells_folder_given_as_job_names_its_job_folder(rounds_never_start, tmp_path, capsys):
    """Typed: ``sequential.py --job <root>/two_moons_1000_sequential-2-box-0.5`` (``/job`` left off), a cell of a
    stopped ``sbibm.py run --rounds 2``. Was: "pass a new or empty folder, e.g. --job <cell>/<cell>", a folder run
    and table never read; now its job's folder, which is started again in place."""

    cell = tmp_path / "two_moons_1000_sequential-2-box-0.5"
    (cell / "job" / ".hydra").mkdir(parents=True)
    (cell / "job" / "sequential.json").write_text('{"rounds": 2, "region": "box", "margin": 0.5}\n')
    (cell / "job" / "metrics.json").write_text('{"status": "stopped"}')
    (cell / "launch.log").write_text("stopped\n")
    (tmp_path / "sbibm_asked.json").write_text('{"cells": [["two_moons", 1000, "sequential rounds=2"]]}\n')
    before = _folders(tmp_path)
    with pytest.raises(SystemExit) as stop:
        load("sequential").main(["--job", str(cell), "--task", "two_moons", "--budget", "1000"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and err.endswith(f"pass the folder run gives this job there, --job {cell / 'job'}"), err
    assert _folders(tmp_path) == before
    with pytest.raises(AssertionError, match="started its rounds"):  # the fix followed: the job starts again
        load("sequential").main(["--job", str(cell / "job"), "--task", "two_moons", "--budget", "1000"])


@pytest.mark.parametrize("budget, said", [(10000, "amortised 0.546 (benchmarks/results/sbibm_results.csv)"),
                                          (1001, "no amortised score of sir at 1001 simulations in "
                                                 "(benchmarks/results/sbibm_results.csv)")])
@pytest.mark.fast_cases(1)
def test_each_score_is_printed_beside_the_committed_amortised_one_or_says_there_is_none(budget, said, tmp_path,
                                                                                      capsys, monkeypatch):
    """Typed: ``sequential.py --job <new> --task sir --budget 1001``, a budget no committed row has. Was:
    "observation 1: sequential C2ST 0.600 +- 0.010, amortised nan (...)", a number that is none."""
    import sequential_rounds

    from gensbi_sharding.harness import devices

    def rounds(cfg, budget, method, observations, say=print, stop_check=None):
        yield {"observation": 1, "c2st": 0.6, "c2st_sd_folds": 0.01, "c2st_scores": [0.59, 0.61], "n": 300}

    monkeypatch.setattr(devices, "configure_devices", lambda *a: None)  # this process's JAX has started
    monkeypatch.setattr(sequential_rounds, "sequential_scores", rounds)
    load("sequential").main(["--job", str(tmp_path / "job"), "--task", "sir", "--budget", str(budget), "--",
                             "eval.observations=[1]"])
    assert f"observation 1: sequential C2ST 0.600 +- 0.010, {said}\n" in capsys.readouterr().out


@pytest.mark.slow
def test_the_sequential_jobs_record_is_named_in_one_place_the_benchmark_and_the_harness_read():
    # Was: "sequential.json" written twice, sbibm_method.RECORD (the benchmark writes it) and
    # sampled_checkpoint.SEQUENTIAL (resume and sample.py tell a sequential job's folder by it): renaming one would
    # have left the harness taking a sequential job's folder for a run whose checkpoints are gone.
    import ast

    from gensbi_sharding.harness.sampled_checkpoint import SEQUENTIAL

    sys.path.insert(0, str(REPO / "benchmarks"))
    import sbibm_method

    named = [path.relative_to(REPO).as_posix() for path in sorted(REPO.glob("**/*.py"))
             if "tests" not in path.parts and ".venv" not in path.parts
             for node in ast.walk(ast.parse(path.read_text())) if getattr(node, "value", None) == SEQUENTIAL
             and isinstance(node, ast.Constant)]
    assert named == ["gensbi_sharding/harness/sampled_checkpoint.py"]
    assert sbibm_method.RECORD is SEQUENTIAL
