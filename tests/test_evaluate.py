"""harness.evaluate: C2ST, pair plots; ODE posterior sampling on a mesh (posterior.posterior_draws, FlowSampler)."""

import os
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from gensbi_sharding.harness.evaluate import c2st, c2st_scores, pair_plot
from gensbi_sharding.harness.flow_sampler import FlowSampler
from gensbi_sharding.harness.posterior import posterior_draws
from gensbi_sharding import make_mesh, replicate


def draws_of(velocity_fn, observation, *, num_samples, num_steps, seed, mesh, dim_theta, params=None):
    """The first ``num_samples`` rows of ``posterior_draws``' stream ``seed`` at ``observation``, in the model's units
    (its maps to and from them the identity): what evaluate.sample_posterior drew, before it was merged into it."""
    units = SimpleNamespace(normalize_x=lambda x: x, denormalize_theta=lambda theta: theta, dim_theta=dim_theta)
    sampler = FlowSampler(velocity_fn, rows=num_samples, num_steps=num_steps, mesh=mesh, params=params)
    return posterior_draws(units, sampler, np.asarray(observation, np.float32), seed=seed)(num_samples)

SHIFT = np.array([1.0, -2.0], np.float32)


@pytest.fixture(scope="module")
def mesh(devices):
    return make_mesh(model_axis=1)


def constant_velocity(theta, x, t):
    return jnp.broadcast_to(jnp.asarray(SHIFT), theta.shape)


@pytest.mark.parametrize("kind", ["none", "auto", "explicit"])
def test_constant_field_moves_noise_by_its_value(mesh, kind):
    # jax.make_mesh gives Explicit axes; the contract's make_mesh gives Auto ones.
    chosen = {"none": None, "auto": mesh,
              "explicit": jax.make_mesh((8, 1), ("data", "model"))}[kind]
    # 1001 is not a multiple of 8: padding rows must be cut off again.
    out = draws_of(constant_velocity, np.zeros(3), num_samples=1001, num_steps=4, seed=5,
                           mesh=chosen, dim_theta=2)
    assert out.shape == (1001, 2) and out.dtype == np.float32 and isinstance(out, np.ndarray)
    noise = np.random.default_rng(5).standard_normal((1001, 2))
    np.testing.assert_allclose(out, noise + SHIFT, atol=1e-5)


def gaussian_velocity(theta, x, t, scale=0.5):
    # Straight path theta_t = (1-t) z + t theta_1 with theta_1 ~ N(x, scale^2 I): theta_t is
    # N(t x, s_t^2 I) with s_t^2 = (1-t)^2 + t^2 scale^2, and E[theta_1 - z | theta_t] is
    # x + (s_t'/s_t) (theta_t - t x), where s_t s_t' = -(1-t) + t scale^2.
    t = t[:, None]
    var = (1 - t) ** 2 + (t * scale) ** 2
    return x + (t * scale ** 2 - (1 - t)) / var * (theta - t * x)


def test_analytic_gaussian_posterior(mesh):
    obs = np.array([1.5, -0.5], np.float32)
    out = draws_of(gaussian_velocity, obs, num_samples=4003, num_steps=20, seed=0,
                           mesh=mesh, dim_theta=2)
    np.testing.assert_allclose(out.mean(0), obs, atol=0.04)
    np.testing.assert_allclose(out.std(0), 0.5, atol=0.03)


def test_params_are_passed_and_the_state_is_sharded(mesh):
    seen = []

    def velocity(params, theta, x, t):
        jax.debug.inspect_array_sharding(theta, callback=seen.append)
        jax.debug.inspect_array_sharding(x, callback=seen.append)
        return theta * 0 + params["c"] * x[:, :2]

    params = replicate({"c": jnp.float32(2.0)}, mesh)
    out = draws_of(velocity, np.array([[1.0, 3.0, 0.0]]), num_samples=16, num_steps=3,
                           seed=1, mesh=mesh, dim_theta=2, params=params)
    noise = np.random.default_rng(1).standard_normal((16, 2))
    np.testing.assert_allclose(out, noise + [2.0, 6.0], atol=1e-5)
    assert seen and all(s.is_equivalent_to(NamedSharding(mesh, P("data")), 2) for s in seen)


def test_same_samples_with_and_without_mesh(mesh):
    kw = dict(num_samples=13, num_steps=5, seed=2, dim_theta=2)
    np.testing.assert_allclose(draws_of(gaussian_velocity, SHIFT, mesh=mesh, **kw),
                               draws_of(gaussian_velocity, SHIFT, mesh=None, **kw),
                               atol=1e-5)


def test_sampler_rejects_bad_input():
    kw = dict(num_steps=2, seed=0, mesh=None, dim_theta=2)
    with pytest.raises(ValueError, match=r"velocity_fn returned shape \(4, 3\)"):
        draws_of(lambda th, x, t: jnp.zeros((4, 3)), SHIFT, num_samples=4, **kw)


@pytest.mark.slow
def test_c2st_same_and_shifted():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 2)), rng.standard_normal((400, 2))  # unequal: the first 300 of b
    assert c2st(a, b, n_folds=3) < 0.6
    assert c2st(a + 3.0, b, n_folds=3) > 0.9
    assert c2st(a, b, n_folds=3, seed=1) == c2st(a, b, n_folds=3, seed=1)


@pytest.mark.slow
def test_c2st_scores_folds_of_the_first_rows_z_scored_by_the_reference():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((120, 2)) + 1.0, rng.standard_normal((150, 2))
    scores = c2st_scores(a, b, n_folds=3, seed=3)
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))
    assert c2st(a, b, n_folds=3, seed=3) == pytest.approx(scores.mean())
    # Exactly the first min(n, m) rows of each set count: what follows them changes nothing.
    tail = np.vstack([b[:120], rng.standard_normal((30, 2)) + 9.0])
    np.testing.assert_array_equal(c2st_scores(a, tail, n_folds=3, seed=3), scores)
    # Both sets are z-scored with the reference's statistics: units cancel.
    scaled = c2st_scores(1000.0 * a - 7.0, 1000.0 * b - 7.0, n_folds=3, seed=3)
    np.testing.assert_allclose(scaled, scores, atol=1e-12)


def test_c2st_validates():
    a = np.zeros((20, 2))
    with pytest.raises(ValueError, match=r"\(20,\)"):
        c2st(a[:, 0], a)
    with pytest.raises(ValueError, match=r"\(20, 3\)"):
        c2st(a, np.zeros((20, 3)))
    with pytest.raises(ValueError, match="1 row"):
        c2st(np.vstack([a[:-1], [np.nan, 0.0]]), a)
    with pytest.raises(ValueError, match="max_samples=2"):
        c2st(a, a, n_folds=3, max_samples=2)
    with pytest.raises(ValueError, match="n_folds=1"):
        c2st(a, a, n_folds=1)


def test_ctrl_c_during_c2st_reaches_the_caller(monkeypatch):
    """Was: MLPClassifier.fit caught the KeyboardInterrupt ("Training interrupted by user.") and the next
    fold was fitted: a Ctrl-C during C2ST was ignored, a run's "Ctrl-C again stops at once" waited it out."""
    import signal
    import threading

    import sklearn.neural_network

    class SignalledOnce(sklearn.neural_network.MLPClassifier):
        def fit(self, X, y):  # noqa: N803 (scikit-learn's names)
            if not fits:  # a Ctrl-C 0.2 s into the first fold's fit (thousands of rows: it takes longer)
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            fits.append(len(X))
            return super().fit(X, y)

    fits = []
    monkeypatch.setattr(sklearn.neural_network, "MLPClassifier", SignalledOnce)
    same = np.random.default_rng(0).normal(size=(2, 20_000, 2))  # one distribution: slow to converge
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            c2st_scores(same[0], same[1], n_folds=2)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler given back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert fits == [20_000]  # the second fold never started


@pytest.mark.parametrize("ctrl_c", [0, 1, 2])
def test_worker_processes_failing_after_a_ctrl_c_are_that_ctrl_c(monkeypatch, ctrl_c):
    """eval.c2st_jobs=2: a worker still starting, before it ignores SIGINT, gets the terminal's Ctrl-C too, and one caught
    unpickling its task fails the pool. Was, after a run's first Ctrl-C (its handler only records it): "interrupted
    (Ctrl-C): BrokenProcessPool: A task has failed to un-serialize. ...", stopped at once. Now that pool is fitted again
    once, as one process would have gone on; a second failure after a Ctrl-C is that Ctrl-C, one with none itself."""
    import signal

    import sklearn.model_selection

    calls = []

    def broken_pool(*args, n_jobs=None, **kwargs):
        assert n_jobs == 2
        calls.append(n_jobs)
        if len(calls) <= ctrl_c:
            signal.raise_signal(signal.SIGINT)  # the parent's share of the terminal's Ctrl-C
        if len(calls) == 2 and ctrl_c == 1:
            return [0.25, 0.75]  # the pool started again, with no Ctrl-C meanwhile
        raise RuntimeError("A task has failed to un-serialize. Please ensure that the arguments of the function "
                           "are all picklable.")  # as loky's BrokenProcessPool (a RuntimeError) says it

    recorded = []
    monkeypatch.setattr(sklearn.model_selection, "cross_val_score", broken_pool)
    previous = signal.signal(signal.SIGINT, lambda signum, frame: recorded.append(signum))  # a run's first Ctrl-C
    try:
        if ctrl_c == 1:
            try:
                scores = c2st_scores(np.zeros((8, 2)), np.ones((8, 2)), n_folds=2, n_jobs=2)
            except KeyboardInterrupt:
                pytest.fail("the pool a first Ctrl-C broke was not fitted again")
            np.testing.assert_array_equal(scores, [0.25, 0.75])
        else:
            with pytest.raises(KeyboardInterrupt if ctrl_c else RuntimeError, match=None if ctrl_c else "un-serialize"):
                c2st_scores(np.zeros((8, 2)), np.ones((8, 2)), n_folds=2, n_jobs=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert recorded == [signal.SIGINT] * ctrl_c  # the caller's handler still got each
    assert len(calls) == {0: 1, 1: 2, 2: 2}[ctrl_c]


@pytest.mark.slow
def test_a_first_ctrl_c_lets_worker_processes_finish_their_folds(tmp_path):
    """eval.c2st_jobs=2 and the terminal's Ctrl-C (to the whole process group) while both workers fit, under a handler
    that only records it (a run's first Ctrl-C): the folds are fitted to the end and score as with no Ctrl-C, as one
    process does. Was: the workers got it too and died ("stopped at once" after one Ctrl-C), or, caught by
    ``MLPClassifier.fit``, returned a half-fitted fold's score."""
    import json
    import subprocess
    import sys

    (tmp_path / "marked_fit.py").write_text(
        "import os\nimport sklearn.neural_network\n\n"
        "class Marked(sklearn.neural_network.MLPClassifier):\n"
        "    def fit(self, X, y):  # noqa: N803\n"
        "        open(os.path.join(os.environ['MARKS'], str(os.getpid())), 'w').close()  # this worker fits now\n"
        "        return super().fit(X, y)\n")
    script = """if True:
        import json, os, signal, sys, threading, time
        import numpy as np
        import sklearn.neural_network, marked_fit
        sklearn.neural_network.MLPClassifier = marked_fit.Marked
        from gensbi_sharding.harness.evaluate import c2st_scores
        got = []
        signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))  # recorded, nothing raised

        def ctrl_c():
            deadline = time.monotonic() + 120
            while len(os.listdir(os.environ["MARKS"])) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            os.killpg(os.getpgrp(), signal.SIGINT)  # as a terminal's Ctrl-C: every process of the group

        threading.Thread(target=ctrl_c, daemon=True).start()
        a, b = np.random.default_rng(0).normal(size=(2, 4_000, 2))
        print(json.dumps({"scores": c2st_scores(a, b, n_folds=2, n_jobs=2).tolist(), "got": got}))
    """
    (tmp_path / "marks").mkdir()
    env = {**os.environ, "MARKS": str(tmp_path / "marks"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          start_new_session=True)  # its own process group: the Ctrl-C reaches no other test
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert len(os.listdir(tmp_path / "marks")) == 2 and result["got"] == [2]  # both workers fitted when it came
    a, b = np.random.default_rng(0).normal(size=(2, 4_000, 2))
    np.testing.assert_array_equal(result["scores"], c2st_scores(a, b, n_folds=2))  # one process, no Ctrl-C


@pytest.mark.slow
def test_pair_plot_writes_a_png_atomically(tmp_path):
    import matplotlib

    backend = matplotlib.get_backend()
    rng = np.random.default_rng(0)
    path = pair_plot(rng.standard_normal((100, 3)), rng.standard_normal((200, 3)) + 1,
                     tmp_path / "pairs.png", labels=["a", "b", "c"])
    assert path == os.fspath(tmp_path / "pairs.png")
    assert (tmp_path / "pairs.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.listdir(tmp_path) == ["pairs.png"]  # no temporary file left behind
    assert matplotlib.get_backend() == backend
    with pytest.raises(ValueError, match="labels has 1"):
        pair_plot(np.zeros((5, 2)), np.zeros((5, 2)), tmp_path / "x.png", labels=["a"])
    assert os.listdir(tmp_path) == ["pairs.png"]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["two_moons", "slcp"])
def test_samples_never_leave_a_bounded_prior(task):
    """A field that drives every sample far out: through the prior's bijection all stay in the box."""
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.tasks import get_task

    support = get_task(task).get_prior_dist().support
    kw = dict(num_simulations=64, seed=0)
    inside, raw = load_task(task, **kw), load_task(task, theta_transform="none", **kw)

    def far(theta, x, t):
        return jnp.full(theta.shape, 50.0, theta.dtype)

    for sims, expect_inside in ((inside, True), (raw, False)):
        z = draws_of(far, sims.observation, num_samples=500, num_steps=4, seed=0, mesh=None,
                             dim_theta=sims.dim_theta)
        theta = sims.denormalize_theta(z)
        ok = np.asarray(support(theta))
        assert ok.shape == (500,) and np.all(np.isfinite(theta))
        assert ok.all() if expect_inside else not ok.any()


def test_rejection_keeps_the_first_rows_of_the_stream_that_lie_inside():
    from gensbi_sharding.harness.posterior import draw_inside_support

    stream = np.random.default_rng(3).uniform(-2.0, 2.0, (100_000, 2)).astype(np.float32)
    calls = []

    def draw(m):
        calls.append(m)
        return stream[:m]

    def inside(s):
        return np.all(np.abs(s) <= 1.0, axis=1)  # a quarter of the square

    samples, acceptance = draw_inside_support(draw, inside, 1000)
    expected = stream[inside(stream)][:1000]
    np.testing.assert_array_equal(samples, expected)
    assert inside(samples).all() and 0.2 < acceptance < 0.3
    assert calls[0] == 1000 and len(calls) <= 3  # one more draw, sized by the acceptance, usually suffices


def test_rejection_stops_with_an_error_when_almost_nothing_lies_inside():
    from gensbi_sharding.harness.posterior import MIN_ACCEPTANCE, draw_inside_support

    drawn = []

    def draw(m):
        drawn.append(m)
        s = np.full((m, 1), 5.0, np.float32)
        s[::1000] = 0.0  # 0.1 % inside
        return s

    with pytest.raises(RuntimeError, match=r"0\.10% of .* data\.theta_transform=support"):
        draw_inside_support(draw, lambda s: np.abs(s[:, 0]) <= 1.0, 100)
    assert max(drawn) == int(100 / MIN_ACCEPTANCE)  # bounded: never more than 1 / MIN_ACCEPTANCE times


def test_draws_holding_nan_or_inf_stop_at_once_naming_the_model_not_the_prior():
    """Was: NaN rows counted as outside the support, 100 times the samples drawn, then 'set
    data.theta_transform=support' (said under that setting too, where every finite draw is inside)."""
    from gensbi_sharding.harness.posterior import draw_inside_support

    for bad_value in (np.nan, np.inf):
        drawn = []

        def draw(m):
            drawn.append(m)
            s = np.zeros((m, 2), np.float32)
            s[7:, 1] = bad_value  # rows 7.. broken: 93 of 100
            return s

        with pytest.raises(RuntimeError, match=r"^93 of 100 posterior draws hold NaN or inf \(the first at row 7\)"
                           r": the model's velocity field") as err:
            draw_inside_support(draw, lambda s: np.abs(s).max(axis=1) <= 1.0, 100)
        assert "theta_transform" not in str(err.value)
        assert drawn == [100]  # one block, no top-ups


@pytest.mark.slow
def test_a_nan_velocity_under_the_bijection_is_reported_as_the_models(tmp_path):
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="support")
    with pytest.raises(RuntimeError, match=r"^50 of 50 posterior draws hold NaN or inf"):
        evaluate_observations(sims=sims, velocity=lambda th, x, t: th * jnp.nan, params=None, observations=[1],
                              num_samples=50, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path, write=True,
                              plot=False, title=lambda *a: "")
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_larger_draw_starts_with_the_same_samples():
    """Rejection relies on it: the kept rows do not depend on how many rounds were drawn."""
    def field(theta, x, t):
        return jnp.tanh(theta) * 0.3 + x[:, :1]

    few, more = (draws_of(field, np.ones(2, np.float32), num_samples=n, num_steps=4, seed=7,
                                  mesh=None, dim_theta=3) for n in (50, 130))
    np.testing.assert_allclose(more[:50], few, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_theta_as_simulated_is_sampled_inside_the_prior_and_reports_its_acceptance(tmp_path):
    """data.theta_transform=none: draws outside slcp's box are rejected before any file or C2ST."""
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations
    from gensbi_sharding.harness.tasks import get_task

    sims = load_task("slcp", num_simulations=64, seed=0, theta_transform="none")

    def spread(theta, x, t):  # widens the noise: many draws leave [-3, 3]^5
        return theta

    m = evaluate_observations(sims=sims, velocity=spread, params=None, observations=[1], num_samples=200,
                              ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path, write=True,
                              plot=False, title=lambda *a: "")
    saved = np.load(tmp_path / "posterior_samples.npz")["samples"]
    support = get_task("slcp").get_prior_dist().support
    assert saved.shape == (200, 5) and np.asarray(support(saved)).all()
    assert m["samples_outside_support"] == 0
    assert 0.01 < m["support_acceptance"] < 0.9
    assert m["c2st_observations"][0]["acceptance"] == m["support_acceptance"]


@pytest.mark.slow
def test_every_observation_and_top_up_samples_with_one_compiled_program(tmp_path):
    """Was: a fresh jit for each draw, so 2 observations with a top-up each traced and compiled 4 programs."""
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations

    sims = load_task("slcp", num_simulations=64, seed=0, theta_transform="none")
    traces = []

    def spread(params, theta, x, t):  # runs at trace time only: one call per velocity in the traced loop body
        traces.append(theta.shape)
        return theta * params

    m = evaluate_observations(sims=sims, velocity=spread, params=jnp.float32(1.0), observations=[1, 2],
                              num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path,
                              write=False, plot=False, title=lambda *a: "")
    assert all(0.01 < r["acceptance"] < 0.9 for r in m["c2st_observations"])  # each observation topped up
    assert traces == [(100, 5), (100, 5)]  # the loop body's two velocities, traced once for everything


@pytest.mark.slow
def test_a_top_up_integrates_only_the_rows_it_adds_and_keeps_the_stream():
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.flow_sampler import FlowSampler
    from gensbi_sharding.harness.posterior import posterior_draws

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    sampler = FlowSampler(lambda th, x, t: jnp.tanh(th) + x[:, :1], rows=40, num_steps=3, mesh=None)
    calls = []
    counted = lambda obs, noise: calls.append(len(noise)) or sampler(obs, noise)  # noqa: E731
    counted.rows = sampler.rows
    draw = posterior_draws(sims, counted, sims.observation, seed=4)
    first, more = draw(40), draw(100)
    assert calls == [40, 40, 40]  # 40 rows, then two more blocks for the 60 rows added
    np.testing.assert_array_equal(more[:40], first)
    whole = draws_of(lambda th, x, t: jnp.tanh(th) + x[:, :1], sims.normalize_x(sims.observation),
                             num_samples=120, num_steps=3, seed=4, mesh=None, dim_theta=2)
    np.testing.assert_allclose(more, sims.denormalize_theta(whole)[:100], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_jobs,passed", [(100000, 2), (2, 2), (1, 1), (-1, -1), (None, None)])
def test_c2st_asks_for_no_more_workers_than_folds(monkeypatch, n_jobs, passed):
    # Was: eval.c2st_jobs=100000 passed on as is to joblib (a worker pool of that size for 2 folds).
    import sklearn.model_selection

    asked = []

    def fake_scores(clf, data, labels, *, cv, scoring, n_jobs):
        asked.append(n_jobs)
        return np.full(cv.get_n_splits(), 0.5)

    monkeypatch.setattr(sklearn.model_selection, "cross_val_score", fake_scores)
    rng = np.random.default_rng(0)
    scores = c2st_scores(rng.normal(size=(20, 2)), rng.normal(size=(20, 2)), n_folds=2, n_jobs=n_jobs)
    assert asked == [passed] and scores.tolist() == [0.5, 0.5]


@pytest.mark.slow
def test_a_resumed_evaluation_keeps_a_score_only_when_drawn_with_the_same_num_samples(tmp_path, monkeypatch):
    """eval.num_samples beyond the reference's rows: n, the rows scored, is the same, but the acceptance is of the
    rows drawn (was: the score of 200 draws kept for a resume with 400, its acceptance not what 400 give)."""
    from gensbi_sharding.harness import tasks
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations

    reference = tasks.reference_samples
    monkeypatch.setattr(tasks, "reference_samples", lambda task, k: reference(task, k)[:150])
    sims = load_task("slcp", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               observations=[1], ode_steps=2, n_folds=2, seed=0, mesh=None, write=True, plot=False,
               title=lambda *a: "", step=5)
    evaluate_observations(**run, num_samples=200, out=tmp_path / "resumed")
    resumed = evaluate_observations(**run, num_samples=400, out=tmp_path / "resumed")
    fresh = evaluate_observations(**run, num_samples=400, out=tmp_path / "fresh")
    assert resumed["c2st_observations"][0]["n"] == fresh["c2st_observations"][0]["n"] == 150
    assert resumed["support_acceptance"] == fresh["support_acceptance"]
    with np.load(tmp_path / "resumed" / "posterior_samples.npz") as saved:
        assert int(saved["num_samples"]) == 400 and float(saved["acceptance"]) == fresh["support_acceptance"]
    kept = evaluate_observations(**run, num_samples=400, out=tmp_path / "resumed")  # the same settings: kept
    assert kept["c2st_observations"] == fresh["c2st_observations"]


@pytest.mark.parametrize("damage", ["empty", "cut", "array_field", "unsized_samples"])
def test_a_samples_file_the_resumed_evaluation_cannot_read_as_its_own_is_scored_again(tmp_path, damage):
    """An empty, cut-off or foreign posterior_samples.npz at the path is scored again and written over (was: EOFError
    for an empty file, TypeError for a field that is an array, out of the resumed job)."""
    from gensbi_sharding.harness.kept_scores import scored_before

    path = tmp_path / "posterior_samples.npz"
    settings = dict(num_observation=1, c2st_seed=0, c2st_folds=2, ode_steps=2, num_samples=150, step=5)
    fields = dict(samples=np.ones((150, 5), np.float32), c2st_scores=np.full(2, 0.5), acceptance=1.0, **settings)
    np.savez(path, **fields)
    assert scored_before(path, 150, settings) is not None  # whole and the same settings: kept
    if damage in ("empty", "cut"):
        path.write_bytes(path.read_bytes()[:0 if damage == "empty" else 100])
    else:
        np.savez(path, **{**fields, **({"step": np.array([5, 6])} if damage == "array_field"
                                       else {"samples": np.float32(1.0)})})
    assert scored_before(path, 150, settings) is None


@pytest.mark.slow
def test_a_resumed_evaluation_plots_the_kept_samples_over_an_older_plot(tmp_path):
    """A job killed between the first observation's samples file and its plot left an earlier evaluation's
    posterior.png: resumed, the kept samples are plotted (was: any posterior.png kept, that of an earlier step)."""
    import os

    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations

    sims, titles = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none"), []
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               observations=[1], num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path,
               write=True, plot=True, title=lambda k, c, sd: titles.append(k) or "", step=5)
    evaluate_observations(**run)
    png, samples = tmp_path / "posterior.png", tmp_path / "posterior_samples.npz"
    evaluate_observations(**run)  # its plot is newer than the samples: kept as is
    assert titles == [1]
    png.write_bytes(b"an earlier step's plot")
    os.utime(png, ns=(samples.stat().st_mtime_ns - 10**9,) * 2)
    evaluate_observations(**run)
    assert titles == [1, 1] and png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_a_resumed_evaluation_keeps_no_score_sampled_in_another_compute_dtype(tmp_path):
    """model.dtype is free on resume: a score sampled in float32 is not kept for a resume in bfloat16 (was: kept,
    though the bfloat16 model's samples, and so its score, are not those)."""
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               observations=[1], num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path,
               write=True, plot=False, title=lambda *a: "", step=5)
    path = tmp_path / "posterior_samples.npz"
    evaluate_observations(**run, dtype="float32")
    written = path.stat().st_mtime_ns
    evaluate_observations(**run, dtype="float32")
    assert path.stat().st_mtime_ns == written  # the same dtype: kept, not written again
    evaluate_observations(**run, dtype="bfloat16")
    with np.load(path) as saved:
        assert saved["dtype"].item() == "bfloat16" and int(saved["step"]) == 5


@pytest.mark.slow
def test_a_resumed_evaluation_with_its_observations_reordered_keeps_every_score(tmp_path, monkeypatch):
    """eval.observations=[1,2] stopped, resumed as [2,1]: each score is kept from the file the first order named
    (was: both scored again, observation 1's posterior_samples.npz overwritten by observation 2's first)."""
    from gensbi_sharding.harness import posterior
    from gensbi_sharding.harness.data import load_task

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path, write=True, plot=False,
               title=lambda *a: "", step=5)
    first = posterior.evaluate_observations(**run, observations=[1, 2])
    with np.load(tmp_path / "posterior_samples.npz") as saved:
        samples_1 = saved["samples"].copy()
    draws = []
    real = posterior.posterior_draws
    monkeypatch.setattr(posterior, "posterior_draws", lambda *a, **k: draws.append(k["seed"]) or real(*a, **k))
    again = posterior.evaluate_observations(**run, observations=[2, 1])
    assert draws == []  # nothing sampled again
    assert again["c2st_observations"] == first["c2st_observations"][::-1]
    for name, k in (("posterior_samples.npz", 2), ("posterior_samples_1.npz", 1)):
        with np.load(tmp_path / name) as saved:
            assert int(saved["num_observation"]) == k
            assert k == 2 or np.array_equal(saved["samples"], samples_1)


@pytest.mark.slow  # a tiny run
def test_a_run_stopped_part_way_through_its_evaluation_records_the_scores_it_made(tmp_path, monkeypatch):
    """Was: a run that failed, was Ctrl-C'd or preempted at observation 2 of [1, 2] recorded c2st_observations: none
    in metrics.json, though c2st.csv and posterior_samples.npz held observation 1's score."""
    import json

    from faults_helpers import run_tiny
    from gensbi_sharding.harness import posterior

    real = posterior.posterior_draws

    def draws(*args, seed, **kwargs):
        if seed == posterior.noise_seed(0, 2):  # seed 0's observation 2
            raise RuntimeError("the device went away")
        return real(*args, seed=seed, **kwargs)

    monkeypatch.setattr(posterior, "posterior_draws", draws)
    metrics = run_tiny(tmp_path, "eval.enabled=true", "eval.observations=[1,2]")
    assert metrics["status"] == "error" and "the device went away" in metrics["error"]
    recorded = json.loads((tmp_path / "metrics.json").read_text())
    assert recorded["c2st"] is None and [r["observation"] for r in recorded["c2st_observations"]] == [1]
    with np.load(tmp_path / "posterior_samples.npz") as saved:
        assert recorded["c2st_observations"][0]["c2st"] == float(saved["c2st"])


@pytest.mark.slow
def test_a_samples_file_records_the_weights_sampled_and_their_step(tmp_path):
    """Under early stopping the weights sampled are the best validation's (step 150), which the console names, but
    posterior_samples.npz recorded step=200, the step the run reached. Now ``step`` is the weights' step, ``weights``
    says which and ``checkpoint_step`` the step reached; a resume keeps a score only for the same weights."""
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations, sampled_weights

    best = sampled_weights({"best_step": 150, "final_step": 200}, ema=True)
    assert best == {"step": 150, "weights": "EMA at the best validation step", "checkpoint_step": 200}
    assert sampled_weights({"best_step": None, "final_step": 200}, ema=False) == {
        "step": 200, "weights": "trained at the last step", "checkpoint_step": 200}
    assert sampled_weights({"best_step": 150, "final_step": 200}, ema=True, one_process=False)["step"] is None
    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               observations=[1], num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path,
               write=True, plot=False, title=lambda *a: "")
    path = tmp_path / "posterior_samples.npz"
    evaluate_observations(**run, **best)
    with np.load(path) as saved:
        assert (int(saved["step"]), saved["weights"].item(), int(saved["checkpoint_step"])) == (
            150, "EMA at the best validation step", 200)
    written = path.stat().st_mtime_ns
    # Trained on to step 400 with no better validation: the same best weights (step 150), so the score is kept.
    evaluate_observations(**run, **sampled_weights({"best_step": 150, "final_step": 400}, ema=True))
    assert path.stat().st_mtime_ns == written
    # Step 150's weights, but the last step's of a run that did not validate: other weights, scored again.
    evaluate_observations(**run, **sampled_weights({"best_step": None, "final_step": 150}, ema=True))
    with np.load(path) as saved:
        assert saved["weights"].item() == "EMA at the last step" and int(saved["checkpoint_step"]) == 150
    assert path.stat().st_mtime_ns != written


@pytest.mark.slow
def test_every_process_of_a_job_draws_alike_whatever_an_earlier_attempt_left(tmp_path, monkeypatch):
    """In a job of two processes, process 0 (``write``) and process 1 take the same path past a samples file an earlier
    attempt scored with these settings: both draw (was: process 0 alone kept the score and skipped the sharded ODE,
    whose collectives process 1 then waited on forever)."""
    import jax

    from gensbi_sharding.harness import flow_sampler, posterior
    from gensbi_sharding.harness.data import load_task

    draws = []

    class Sampler:  # the ODE's collectives stand-in: each call is one every process must make
        def __init__(self, velocity, *, rows, **kwargs):
            self.rows = rows

        def __call__(self, obs, noise):
            draws.append(jax.process_count())
            return noise

    monkeypatch.setattr(flow_sampler, "FlowSampler", Sampler)
    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=None, params=None, observations=[1], num_samples=100, ode_steps=2, n_folds=2,
               seed=0, mesh=None, out=tmp_path, plot=False, title=lambda *a: "", step=5)
    first = posterior.evaluate_observations(**run, write=True)  # the earlier attempt's file
    assert draws and set(draws) == {1}
    del draws[:]
    posterior.evaluate_observations(**run, write=True)
    assert draws == []  # one process: its own earlier score kept, nothing drawn
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    drew = []
    for write in (True, False):  # process 0, process 1
        again = posterior.evaluate_observations(**run, write=write)
        assert again["c2st_observations"][0]["c2st_scores"] == first["c2st_observations"][0]["c2st_scores"]
        drew.append(len(draws))
        del draws[:]
    assert drew[0] == drew[1] > 0  # each process made the same draws
