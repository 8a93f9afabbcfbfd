"""Truncated sequential flow matching on one sbibm task: the rounds behind ``benchmarks/sbibm.py run --rounds 2``
(the job process is ``benchmarks/sequential.py``).

sbibm's sequential methods (SNPE, SNLE, SNRE) spend the simulation budget *per observation*,
over rounds. This does so with the harness's own pieces (its simulation, model, train
loop with early stopping, sampler and ``evaluate.c2st_scores``), by truncated proposals (TSNPE,
Deistler et al. 2022, "Truncated proposals for scalable and hassle-free simulation-based
inference"): round 1 simulates from the prior; each later round simulates from the prior
truncated to a region holding the current posterior estimate's samples for x_o; every round's
pairs are pooled and a fresh network is trained on the pool with the ordinary flow-matching
loss. The pool's proposal is the prior times a weight that is constant wherever the regions
hold the posterior, so the fitted conditional at x_o is the posterior itself: no correction.
Each round prints the share of the task's reference posterior samples its region holds (that
argument needs all of them) and the region's prior mass.

The region needs only samples, not the flow's density (an ODE trace per sample). ``box``
(the default): the per-dimension range of ``BOX_SAMPLES`` posterior samples, widened by
the margin times that range on each side, in the coordinates of the prior's support bijection
(log for sir's log-normal prior, the scaled logit for a uniform box). ``ellipsoid``:
TSNPE's highest-probability region with a Gaussian fitted to the samples standing in for the
density, out to the samples' largest Mahalanobis distance times ``1 + margin``, in theta (why:
``region_test``); the right shape where the posterior is narrow in volume but spans most of every
dimension (gaussian_linear_uniform). Either way the truncated prior is drawn by rejection from
the prior, so it never leaves the prior's support.

Round 1 is the same for every observation (prior draws), so it is trained once and shared;
every observation still costs exactly the budget's simulations (``rounds`` equal shares).
Each round's network follows the ``experiment=sbibm`` preset (with the job's overrides), one CPU
device. Scores: ``eval.num_samples`` samples against the reference samples, ``eval.c2st_folds``
folds, as the harness scores them (``harness.posterior.evaluate_observations``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from cli_args import not_a_script
from sbibm_method import REGIONS, Method
not_a_script(__name__, __file__, "benchmarks/sequential.py")  # run as a script: name the one to run

REPO = Path(__file__).resolve().parents[1]
#: Posterior samples at x_o that set each later round's region.
BOX_SAMPLES = 10_000


def compose_config(task: str, budget: int, overrides: list[str]):
    """The ``experiment=sbibm`` job's config for ``task`` on one device (``mesh=none``)."""
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=["experiment=sbibm", f"data={task}", "mesh=none",
                                            f"data.num_simulations={budget}", *overrides])


def usable(theta: np.ndarray, x: np.ndarray, bijection, x_transform: str):
    """The rows ``load_task`` keeps: finite, and inside the transforms' domains."""
    from gensbi_sharding.harness.tasks import to_unconstrained, transform_x

    with np.errstate(all="ignore"):
        keep = (np.isfinite(theta).all(1) & np.isfinite(x).all(1)
                & np.isfinite(transform_x(x_transform, x)).all(1)
                & np.isfinite(to_unconstrained(bijection, theta)).all(1))
    return theta[keep], x[keep]


def pooled(first, rounds: list[tuple[np.ndarray, np.ndarray]], val_fraction: float):
    """``first`` (round 1's ``SimulationData``) with the later rounds' pairs, each split as ``load_task`` splits."""
    import dataclasses

    from gensbi_sharding.harness.data import split_sizes
    from gensbi_sharding.harness.simulation_data import global_stats
    from gensbi_sharding.harness.tasks import to_unconstrained, transform_x

    parts = [(first.theta_train, first.x_train, first.theta_val, first.x_val)]
    for theta, x in rounds:
        n_train, _ = split_sizes(len(theta), val_fraction)
        parts.append((theta[:n_train], x[:n_train], theta[n_train:], x[n_train:]))
    th, xt, tv, xv = (np.concatenate(column) for column in zip(*parts))
    _, (theta_mean, theta_std), (x_mean, x_std) = global_stats(
        [len(tv)], [to_unconstrained(first.theta_bijection, th), transform_x(first.x_transform, xt)], 1)
    return dataclasses.replace(first, theta_train=th, x_train=xt, theta_val=tv, x_val=xv, theta_mean=theta_mean,
                               theta_std=theta_std, x_mean=x_mean, x_std=x_std, val_pairs=len(tv))


def fit(cfg, sims):
    """Train a fresh network on ``sims`` with the preset's recipe; ``(velocity, params, best_step, steps)``."""
    from flax import nnx

    from gensbi_sharding.harness import train
    from gensbi_sharding.harness.data import iterate_batches
    from gensbi_sharding.harness.rule_config import rule_table
    from gensbi_sharding.harness.state import build_state

    rule_name, table = rule_table(cfg.rule)
    ts = build_state(cfg, dim_theta=sims.dim_theta, dim_x=sims.dim_x, mesh=None, rule_name=rule_name,
                     table=table, resume_dir=None)
    functions, state = train.make_step_functions(ts.model, ts.optimizer, None, ema=ts.ema)
    b = cfg.data.batch_size
    batches = iterate_batches(*sims.normalized("train"), batch_size=b, seed=cfg.seed * 7919, mesh=None, place=False)
    theta_v, x_v = sims.normalized("val")
    pad = -len(theta_v) % b  # whole batches; padding rows weigh 0
    val = {"theta": np.pad(theta_v, ((0, pad), (0, 0))), "x": np.pad(x_v, ((0, pad), (0, 0))),
           "weight": np.r_[np.ones(len(theta_v), np.float32), np.zeros(pad, np.float32)]}
    val_batches = [{k: v[i:i + b] for k, v in val.items()} for i in range(0, len(val["weight"]), b)]
    result = train.train(functions, state, batches, steps=cfg.train.steps, key=ts.key, mesh=None, batch_size=b,
                         log_every=cfg.train.log_every, val_batches=val_batches, progress=False,
                         val_every=cfg.train.val_every, patience=cfg.train.patience, val_draws=cfg.train.val_draws)
    model, _, *ema = nnx.merge(functions.graphdef, result.state)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    velocity = lambda p, th, xx, t: nnx.merge(graphdef, p, rest)(th, xx, t)  # noqa: E731
    return velocity, (ema[0].param_state(model) if ema else params), result.best_step, result.steps


def draws(cfg, sims, velocity, params, x_o: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` posterior samples at ``x_o`` inside the prior's support, as the harness's evaluation draws them."""
    from gensbi_sharding.harness import tasks
    from gensbi_sharding.harness.flow_sampler import FlowSampler
    from gensbi_sharding.harness.posterior import draw_inside_support, posterior_draws

    support = tasks.get_task(sims.name).get_prior_dist().support
    sampler = FlowSampler(velocity, rows=n, num_steps=cfg.eval.ode_steps, mesh=None, params=params,
                          batch_size=cfg.eval.get("batch_size"))  # the memory eval.batch_size allows (None: default)
    return draw_inside_support(posterior_draws(sims, sampler, x_o, seed=seed), support, n)[0]


def region_test(task, samples: np.ndarray, margin: float, region: str = "box"):
    """The truncation region of ``samples`` (posterior samples at x_o), as ``(inside, name)``: ``inside(theta)``
    is a boolean per row, ``name`` describes the region for messages.

    ``box``: the samples' per-dimension range in the support bijection's coordinates, widened by ``margin`` times
    that range on each side. ``ellipsoid``: the highest-density region of the Gaussian fitted to the samples
    (their mean and covariance) whose Mahalanobis radius is the largest among the samples, times ``1 + margin``:
    TSNPE's highest-probability region with a Gaussian standing in for the flow's density, which needs an ODE
    trace per sample. A box is the wrong shape in many dimensions: gaussian_linear_uniform's posterior spans
    most of [-1, 1] in every dimension, so its box held 55-99 % of the prior, while it fills a small part of the
    prior's volume.

    The ellipsoid is fitted in theta itself, not in the support bijection's coordinates: the truncated prior is
    drawn by rejection from the prior, so its draws stay in the support whatever the region's shape, and the
    bijection (a scaled logit on a uniform box) stretches a posterior near the box's edge into long tails, whose
    farthest samples would set the radius and widen the region in every direction.
    """
    from gensbi_sharding.harness.tasks import prior_bijection, to_unconstrained

    if region not in REGIONS:
        raise ValueError(f"region {region!r} is not one of {', '.join(REGIONS)}; pass --region box or ellipsoid")
    samples = np.asarray(samples, np.float64)
    if region == "ellipsoid":
        mean = samples.mean(0)
        # pinv: samples that are one point (or lie in a subspace) give a flat ellipsoid, not a LinAlgError
        precision = np.linalg.pinv(np.atleast_2d(np.cov(samples, rowvar=False)))
        distance = lambda theta: np.sqrt(np.einsum(  # noqa: E731
            "ni,ij,nj->n", np.asarray(theta, np.float64) - mean, precision, np.asarray(theta, np.float64) - mean))
        radius = distance(samples).max() * (1 + margin)
        return (lambda theta: distance(theta) <= radius + 1e-9), \
            f"the ellipsoid of Mahalanobis radius {radius:.3g} about {np.round(mean, 3).tolist()}"
    bijection = prior_bijection(task)
    u = to_unconstrained(bijection, samples)
    lo, hi = u.min(0), u.max(0)
    # A sample on the prior box's face maps to +-inf: with --margin 0, 0 * inf made that side nan and the box empty
    # (10^8 prior draws, then "raise --margin"); no margin widens nothing.
    pad = margin * (hi - lo) if margin else np.zeros_like(lo)
    lo, hi = lo - pad, hi + pad

    def inside(theta):
        with np.errstate(all="ignore"):
            v = to_unconstrained(bijection, np.asarray(theta, np.float32))
        return ((v >= lo) & (v <= hi)).all(1)

    return inside, f"the box {lo.tolist()}..{hi.tolist()}"


def truncated_prior(task, key, samples: np.ndarray, n: int, margin: float, max_draws: int = 10 ** 8,
                    chunk: int = 10 ** 6, region: str = "box"):
    """``n`` prior draws inside the truncation ``region`` of ``samples`` (see ``region_test``); and the region's
    prior mass, the acceptance of the rejection from the prior (so every draw is in the prior's support)."""
    import jax

    inside, name = region_test(task, samples, margin, region)
    kept, drawn = [], 0
    while sum(map(len, kept)) < n:
        if drawn >= max_draws:  # a wider margin widens the region, so more draws fall in it
            raise RuntimeError(f"only {sum(map(len, kept))} of {drawn} prior draws fell in {name}; "
                               "raise --margin or use fewer --rounds")
        key, sub = jax.random.split(key)
        theta = np.asarray(task.get_prior(sub, chunk), np.float32)
        kept.append(theta[inside(theta)])
        drawn += chunk
    inside_draws = np.concatenate(kept)
    return inside_draws[:n], len(inside_draws) / drawn


def shares_problem(budget: int, rounds: int, val_fraction: float, batch_size: int,
                   budget_flag: str = "--budget", budgets: tuple[int, ...] | None = None) -> str | None:
    """Why ``budget`` split into ``rounds`` equal shares cannot train round 1 (it trains on one share alone:
    at least 2 simulations, and ``data.batch_size`` training pairs); None if it can. ``budget_flag`` is the
    option that sets the budget where the message is read (``sbibm.py run --budgets``), ``budgets`` the values it
    takes, if only some (then the budget suggested is the least of them that trains, if any).

    ``--budget 100 --rounds 2`` stopped in the first fit with a traceback naming only ``data.batch_size``;
    ``--budget 2 --rounds 3`` with one suggesting ``data.num_simulations=10000``, which the script sets itself.
    """
    from gensbi_sharding.harness.data import split_sizes

    share = budget // rounds  # the smallest share; round 1's is at most one more
    if share >= 2 and split_sizes(share, val_fraction)[0] >= batch_size:
        return None
    need = max(2, int(batch_size / (1 - val_fraction)) - 2)  # just below the smallest share that trains
    while split_sizes(need, val_fraction)[0] < batch_size:
        need += 1
    enough = [b for b in sorted(budgets) if b // rounds >= need] if budgets else [need * rounds]
    fixes = [f"{budget_flag} {b}" for b in enough[:1]]
    if budget // need >= 1:
        fixes.append(f"--rounds {budget // need}")
    if share >= 2:
        fixes.append(f"-- data.batch_size={split_sizes(share, val_fraction)[0]}")
    if not fixes:  # no budget allowed trains, nor a round count: both have to change
        fixes.append(f"fewer --rounds with a smaller data.batch_size (after --), e.g. --rounds 2 -- "
                     f"data.batch_size={max(1, split_sizes(max(2, budget // 2), val_fraction)[0])}")
    return (f"{budget_flag} {budget} in --rounds {rounds} gives {share} simulations a round, too few for round 1's "
            f"training ({need} needed: data.batch_size={batch_size} training pairs after data.val_fraction="
            f"{val_fraction} is held out); pass {' or '.join(fixes)}")


def sequential_scores(cfg, budget: int, method: Method, observations: list[int], box_samples: int = BOX_SAMPLES,
                      say: Callable[[str], None] = print,
                      stop_check: Callable[[], None] | None = None) -> Iterator[dict]:
    """Run ``method``'s rounds for each of ``observations`` of ``cfg``'s task at ``budget`` simulations per
    observation, yielding each observation's scores as ``evaluate_observations`` gives them, once scored.

    Round 1 (``budget // rounds`` prior simulations) is trained once and shared; each observation's later rounds
    are drawn from the prior truncated to ``method.region`` of ``box_samples`` posterior samples at x_o. ``say``
    reports each round (its prior mass, the share of the reference posterior samples its region holds);
    ``stop_check`` is ``evaluate_observations``'s (it raises to stop, so that a C2ST a stop cut short is never
    yielded).
    """
    import tempfile

    import jax

    from gensbi_sharding.harness import tasks
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.posterior import evaluate_observations, noise_seed

    task = tasks.get_task(cfg.data.name)
    shares = [budget // method.rounds + (r < budget % method.rounds) for r in range(method.rounds)]
    start = time.perf_counter()
    # data.num_observation, as the checks before the job read it (with load_task's default 1, a refusal's fix,
    # data.num_observation=7 under data.x_transform=log, would pass them and then fail here on observation 1)
    first = load_task(cfg.data.name, num_simulations=shares[0], val_fraction=cfg.data.val_fraction, seed=cfg.seed,
                      num_observation=cfg.data.num_observation, theta_transform=cfg.data.theta_transform,
                      x_transform=cfg.data.x_transform)
    shared = fit(cfg, first)
    say(f"round 1: {shares[0]} prior simulations (shared by every observation), best step {shared[2]} of "
        f"{shared[3]}, {time.perf_counter() - start:.0f} s")
    for k in observations:
        # its refusal's fix, as the check before the job's: the scored set, not data.num_observation=<k's> alone
        x_o = tasks.usable_observation(task, k, cfg.data.x_transform, asked=observations,
                                       chosen=cfg.data.num_observation)
        sims, (velocity, params, *_), later = first, shared, []
        for r, share in enumerate(shares[1:], start=2):
            t0 = time.perf_counter()
            samples = draws(cfg, sims, velocity, params, x_o, box_samples, noise_seed(cfg.seed, k))  # the evaluation's
            key = jax.random.fold_in(jax.random.fold_in(jax.random.key(cfg.seed), 1000 + k), r)
            theta, mass = truncated_prior(task, jax.random.fold_in(key, 0), samples, share, method.margin,
                                          region=method.region)
            # the no-correction argument needs the region to hold the posterior: the reference samples say how much
            held = region_test(task, samples, method.margin, method.region)[0](tasks.reference_samples(task, k)).mean()
            later.append(usable(*tasks.simulate_at(task, jax.random.fold_in(key, 1), theta),
                                first.theta_bijection, cfg.data.x_transform))
            sims = pooled(first, later, cfg.data.val_fraction)
            velocity, params, best, steps = fit(cfg, sims)
            say(f"observation {k} round {r}: {share} simulations in its {method.region}, of prior mass "
                f"{mass:.2e}, holding {held:.2%} of the reference posterior samples "
                f"({share - len(later[-1][0])} unusable), best step {best} of {steps}, "
                f"{time.perf_counter() - t0:.0f} s")
        with tempfile.TemporaryDirectory() as out:
            yield evaluate_observations(
                sims=sims, velocity=velocity, params=params, observations=[k], num_samples=cfg.eval.num_samples,
                ode_steps=cfg.eval.ode_steps, n_folds=cfg.eval.c2st_folds, seed=cfg.seed, mesh=None,
                out=Path(out), write=False, plot=False, title=lambda *_: "",
                stop_check=stop_check, batch_size=cfg.eval.batch_size)["c2st_observations"][0]
