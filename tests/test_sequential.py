"""``benchmarks/sequential.py``: truncated sequential rounds on an sbibm task, scored as the harness scores them."""

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def load():
    """The script as a module (its main() not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sequential_script", REPO / "benchmarks" / "sequential.py")
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


@pytest.mark.slow  # one process: 2 tiny rounds and a 2-fold C2ST, about 30 s
def test_two_rounds_end_to_end_score_an_observation_beside_the_recorded_amortised_one(tmp_path):
    out = tmp_path / "scores.csv"
    proc = subprocess.run([sys.executable, "benchmarks/sequential.py", "--task", "two_moons", "--observations", "3",
                           "--rounds", "2", "--budget", "600", "--box-samples", "500", "--out", str(out), "--",
                           "train.steps=20", "train.val_every=10", "eval.num_samples=300", "eval.c2st_folds=2"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "round 1: 300 prior simulations" in proc.stdout and "observation 3 round 2: 300 simulations" in proc.stdout
    rows = list(csv.DictReader(out.open()))
    assert [(r["task"], r["observation"], r["rounds"]) for r in rows] == [("two_moons", "3", "2")]
    assert 0.5 <= float(rows[0]["c2st"]) <= 1.0
    assert rows[0]["c2st"] == f"{float(rows[0]['c2st']):.6f}"  # six decimals, as sbibm_results.csv
    assert rows[0]["amortised"] == "nan"  # no recorded amortised job at 600 simulations


@pytest.mark.parametrize("argv,named", [
    (["--margin", "nan"], "--margin nan must be a finite number >= 0, e.g. --margin 0.5"),
    (["--margin", "-0.1"], "--margin -0.1 must be a finite number >= 0"),
    (["--out", "EXISTING"], "already exists; pass a new path"),
    (["--out", "MISSING/scores.csv"], "does not exist; create it or pass another --out"),
    (["--budget", "100", "--rounds", "2"], "--budget 100 in --rounds 2 gives 50 simulations a round, too few"),
    (["--budget", "2", "--rounds", "3"], "--budget 2 in --rounds 3 gives 0 simulations a round"),
    (["--region", "sphere"], "argument --region: 'sphere' is not one of box, ellipsoid"),
])
def test_bad_arguments_stop_before_any_work_naming_the_value_and_a_fix(argv, named, tmp_path, capsys):
    """A bad --margin or --region, an --out that exists (an earlier run's scores) or cannot be written, or a budget
    whose round-1 share cannot fill a batch stop while the arguments are read: before, a nan margin drew 10**8
    prior draws in vain, --out was overwritten (or failed) after the whole run, and a small share stopped in the
    first fit with a traceback naming only data.batch_size (or suggesting data.num_simulations=10000)."""
    existing = tmp_path / "scores.csv"
    existing.write_text("task,observation\nsir,1\n")
    argv = [a.replace("EXISTING", str(existing)).replace("MISSING", str(tmp_path / "missing")) for a in argv]
    with pytest.raises(SystemExit) as stop:
        load().main(["--task", "two_moons", *argv])
    assert stop.value.code == 2 and named in capsys.readouterr().err
    assert existing.read_text() == "task,observation\nsir,1\n"  # never touched


def test_the_share_check_suggests_budgets_rounds_and_batch_sizes_that_train():
    from gensbi_sharding.harness.data import split_sizes

    seq = load()
    assert seq.shares_problem(600, 2, 0.1, 256) is None  # 300 a round: 270 training pairs
    problem = seq.shares_problem(500, 2, 0.1, 256)  # 250 a round: 225 training pairs
    assert "(284 needed" in problem and "pass --budget 568 or --rounds 1 or -- data.batch_size=225" in problem
    assert split_sizes(284, 0.1)[0] == 256 and split_sizes(283, 0.1)[0] < 256  # 284 = 568 / 2: the least that trains
    assert seq.shares_problem(568, 2, 0.1, 256) is None and seq.shares_problem(566, 2, 0.1, 256) is not None
    assert "pass --budget 6 or --rounds 2" in seq.shares_problem(5, 3, 0.1, 1)  # 1 a round: load_task needs 2
