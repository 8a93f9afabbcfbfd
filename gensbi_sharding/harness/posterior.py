"""Sample the trained posterior for benchmark observations and score each by C2ST.

One amortised posterior q(theta | x) serves every observation: for each requested
sbibm observation (1..10) the sampler draws ``eval.num_samples`` parameters given
x_o, maps them back through the prior's bijection (inside its support), and C2ST
scores them against the task's reference samples as sbibm does (``evaluate.c2st_scores``).
A posterior trained on theta as simulated (``data.theta_transform=none``) can put mass
outside a bounded prior, where the true posterior has none: those draws are rejected
(the first ``eval.num_samples`` draws of the noise stream that land inside are kept, as
sbi's ``DirectPosterior`` keeps the draws inside the prior) and the acceptance rate is
reported; no sample outside the support reaches a file or C2ST.

Files, each written whole (temporary name, then rename), as soon as its observation
is scored, so an interrupted job keeps what it had scored:

- ``posterior_samples.npz`` (the first observation) and ``posterior_samples_<k>.npz``
  (each further one): ``samples``, ``reference`` (exactly the rows C2ST used),
  ``observation``, ``num_observation``, ``c2st``, ``c2st_scores`` (per fold),
  ``c2st_seed``, ``c2st_folds``: ``c2st_scores(samples, reference, seed=c2st_seed,
  n_folds=c2st_folds)`` recomputes the number; ``noise_seed`` (``noise_seed(seed, k)``: ``sample.py --seed
  <noise_seed>`` at that observation draws the samples again); ``acceptance``, ``ode_steps``, ``num_samples``,
  ``step`` (of the weights sampled: the best validation's, which the console names), ``weights`` (``"EMA at the best
  validation step"``, ...) and ``dtype`` (the model's, if any) let a resumed job keep that score; ``checkpoint_step``:
  the step the run reached (not ``step``'s value: the weights sampled may be an earlier step's).
- ``c2st.csv``: one row per observation scored (observation, c2st, fold sd, folds, n).
- ``posterior.png``: pair plot of the first observation.

A continued run's folder holds none of an earlier attempt's under these names: ``earlier_attempts``.
"""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from gensbi_sharding.harness.earlier_attempts import plotted_after, take_back
from gensbi_sharding.harness.kept_scores import earlier_scores, one_process, samples_name
from gensbi_sharding.harness.python_words import run_setting
from gensbi_sharding.harness.weights_failure import SamplingError

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh

__all__ = ["evaluate_observations", "sampled_weights", "draw_inside_support", "posterior_draws",
           "noise_seed", "c2st_csv", "MIN_ACCEPTANCE", "LOW_ACCEPTANCE"]

log = logging.getLogger("gensbi_sharding")

#: Below this fraction of draws inside the prior's support, sampling stops with an error
#: (at most ``1 / MIN_ACCEPTANCE`` times the requested samples are drawn).
MIN_ACCEPTANCE = 0.01
#: Below this fraction the run warns: the posterior puts much of its mass outside the prior.
LOW_ACCEPTANCE = 0.5


def draw_inside_support(draw: Callable[[int], np.ndarray], inside: Callable[[np.ndarray], Any],
                        num_samples: int) -> tuple[np.ndarray, float]:
    """The first ``num_samples`` rows of a sample stream that lie inside the support.

    Parameters
    ----------
    draw : callable
        ``draw(m)`` -> (m, dim_theta) float32 samples, the first rows the same for every
        ``m`` (``posterior_draws``' streams are such).
    inside : callable
        ``inside(samples)`` -> (m,) bool: True inside the support (a numpyro constraint).
    num_samples : int
        Rows wanted, >= 1.

    Returns
    -------
    samples : ndarray, shape (num_samples, dim_theta), float32
    acceptance : float
        Fraction of the rows drawn (in the last, largest draw) that lie inside, in (0, 1].

    Raises
    ------
    weights_failure.SamplingError
        A RuntimeError. If fewer than ``MIN_ACCEPTANCE`` of the draws lie inside: drawing on would take more
        than ``1 / MIN_ACCEPTANCE`` times the samples; the message names the fix. At once, if a
        draw holds NaN or inf: the model's fault, which no prior's support explains (rejected as
        outside, 100 times the samples would be drawn, then the prior blamed).
    """
    m, cap = num_samples, int(np.ceil(num_samples / MIN_ACCEPTANCE))
    while True:
        samples = draw(m)
        bad = ~np.isfinite(samples).reshape(len(samples), -1).all(axis=1)
        if bad.any():
            raise SamplingError(f"{int(bad.sum())} of {m} posterior draws hold NaN or inf (the first at row "
                               f"{int(np.argmax(bad))}): the model's velocity field is not finite along the ODE path "
                               "(weights holding NaN or inf, or a field that overflows float32), which the prior's "
                               "support does not explain; sample an earlier checkpoint, or retrain with a lower "
                               "train.learning_rate", outside=False)
        kept = np.asarray(inside(samples), dtype=bool)
        acceptance = float(kept.mean())
        if kept.sum() >= num_samples:
            return samples[kept][:num_samples], acceptance
        if m >= cap:
            raise SamplingError(f"only {acceptance:.2%} of {m} posterior draws lie inside the prior's support "
                               f"(fewer than {MIN_ACCEPTANCE:.0%}): the posterior trained on theta as simulated "
                               "puts its mass outside the prior; train longer, or set data.theta_transform=support "
                               "(train through the prior's bijection: every draw inside)", outside=True)
        # 10 % over the rows the acceptance so far predicts, so one more draw usually suffices
        m = min(cap, int(np.ceil(1.1 * num_samples / max(acceptance, MIN_ACCEPTANCE))) + 1)


def posterior_draws(sims: Any, sampler: Any, x_o: np.ndarray, *, seed: int) -> Callable[[int], np.ndarray]:
    """``draw(m)``: the first ``m`` posterior samples at ``x_o`` (raw units) of the noise stream ``seed``.

    The one map from an observation to samples, shared by the run's evaluation and
    ``harness.own_observation``: ``x_o`` through ``sims.normalize_x``, the ODE (``sampler``, a
    ``flow_sampler.FlowSampler``), the result through ``sims.denormalize_theta``. The stream is
    integrated in blocks of ``sampler.rows`` rows, each block the next rows of
    ``numpy.random.default_rng(seed).standard_normal``, and every block is kept: a larger draw
    (``draw_inside_support``'s top-up) integrates only the rows it adds, with the program the
    first block compiled. Rows outside the prior's support are not removed here
    (``draw_inside_support`` does).
    """
    rng, obs, blocks = np.random.default_rng(seed), np.asarray(sims.normalize_x(x_o), np.float32), []

    def draw(m: int) -> np.ndarray:
        while len(blocks) * sampler.rows < m:
            noise = rng.standard_normal((sampler.rows, sims.dim_theta)).astype(np.float32)
            blocks.append(sims.denormalize_theta(sampler(obs.reshape(-1), noise)))
        return np.concatenate(blocks)[:m]

    return draw


def noise_seed(seed: int, k: int) -> int:
    """The seed of observation ``k``'s noise stream in the evaluation of a run of seed ``seed``: a 63-bit hash of the
    pair (``numpy.random.SeedSequence``), so every (seed, observation) pair draws its own stream (``seed + k`` gave
    seed 1's observation 1 the noise of seed 0's observation 2), and ``sample.py --seed`` takes it as it is."""
    return int(np.random.SeedSequence([seed, k]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def evaluate_observations(*, sims: Any, velocity: Callable, params: Any, observations: list[int],
                          num_samples: int, ode_steps: int, n_folds: int, seed: int, mesh: Mesh | None,
                          n_jobs: int | None = None,
                          out: Path, write: bool, plot: bool, title: Callable[[int, float, float], str],
                          stop_check: Callable[[], None] | None = None, step: int | None = None,
                          dtype: str | None = None, scored: list | None = None,
                          weights: str | None = None, checkpoint_step: int | None = None,
                          announce: Callable[[list[int]], None] | None = None,
                          batch_size: int | None = None) -> dict[str, Any]:
    """Sample and score each observation; returns the metrics to merge into ``metrics.json``.

    Parameters
    ----------
    sims : harness.simulation_data.SimulationData
        Its maps take observations to the model's space and samples back.
    velocity, params
        ``velocity(params, theta_t, x, t)`` and the weights to sample with (the EMA).
    observations : list of int
        sbibm observation numbers, 1..10.
    num_samples, ode_steps, n_folds, seed
        Samples per observation, midpoint steps, C2ST folds; ``seed`` seeds the classifier and, with the
        observation's number, its noise (``noise_seed``).
    n_jobs : int, optional
        C2ST folds fitted in parallel processes (``evaluate.c2st_scores``).
    out : Path
        The job's folder; ``write``: whether this process writes files.
    title : callable
        ``title(num_observation, c2st, c2st_sd_folds)`` of the pair plot.
    stop_check : callable, optional
        Called before each observation, between chunks of its ODE steps (``FlowSampler``) and once its C2ST is
        computed and written, but the last's (the evaluation is then whole): it raises to stop
        (``PreemptionWatch.check``). A score computed is whole (``evaluate.c2st_scores`` lets no Ctrl-C cut a fit
        short), so one a signal waited for is kept: the minutes it cost are not lost.
    step, weights, checkpoint_step : optional
        ``sampled_weights``': the step of ``params``, which they are, the step reached (recorded only). Given (one
        process), an observation whose samples file in ``out`` (or its copy ``earlier_attempts.set_aside`` made,
        moved back) was written from the same weights with the same ``num_samples``, ``ode_steps``, ``n_folds`` and
        ``seed`` (under either file name: observations reordered) keeps its score: a job stopped during its
        evaluation and resumed scores only the rest (not
        every observation again, minutes each, so a job preempted during each evaluation still finishes).
    dtype : str, optional
        The model's compute dtype (``model.dtype``, which a resumed run may change): a score sampled in another
        is not kept (a float32 score does not score a resume with model.dtype=bfloat16).
    scored : list, optional
        The list each observation's row (``c2st_observations``'s) joins as soon as it is scored: the caller's
        record of a job stopped or failed part way keeps the scores made, as c2st.csv has them.
    announce : callable, optional
        Called once before the first observation with the observations whose earlier score is kept (``[]``: all
        are drawn), so the caller's header says which are drawn (``console_lines.evaluation_header``).
    batch_size : int, optional
        ``eval.batch_size``: rows integrated at once (the sampler's device memory; the same noise rows at any size,
        the samples equal to float32 rounding).

    Returns
    -------
    dict
        ``c2st`` (mean over observations), ``c2st_sd_folds`` (mean of the per-observation
        spreads over folds), ``c2st_sd_observations`` (spread over observations, None
        for one), ``c2st_observations`` (per observation: c2st, sd and scores of the
        folds, rows, ``acceptance``), ``samples_outside_support`` (in the samples kept: 0)
        and ``support_acceptance`` (the mean over observations of the fraction of draws
        inside the prior's support; 1.0 under the prior's bijection).

    Raises
    ------
    RuntimeError
        From ``draw_inside_support``, when under 1 % of an observation's draws lie inside.
    """
    from gensbi_sharding.harness import evaluate, outputs, tasks
    from gensbi_sharding.harness.flow_sampler import FlowSampler

    task = tasks.get_task(sims.name)
    support = task.get_prior_dist().support
    rows, outside = [] if scored is None else scored, 0
    stop_check = stop_check or (lambda: None)
    sampler = FlowSampler(velocity, rows=num_samples, num_steps=ode_steps, mesh=mesh, params=params,  # one compile
                          stop_check=stop_check, batch_size=batch_size)  # also between chunks of ODE steps

    def settings_of(k: int) -> dict[str, Any]:  # num_samples: the rows drawn, so the acceptance
        return {key: value for key, value in dict(num_observation=k, c2st_seed=seed, noise_seed=noise_seed(seed, k),
                c2st_folds=n_folds, ode_steps=ode_steps, num_samples=num_samples, step=step, weights=weights,
                dtype=dtype).items() if value is not None}  # noise_seed: a file of seed + k's noise is not kept

    n_of = {k: min(num_samples, len(tasks.reference_samples(task, k))) for k in observations}
    # alike in every process (were process 0 alone to keep a score and skip the draws, the sharded ODE's
    # collectives of the other processes would wait on it forever): kept only in a job of one process
    earlier = earlier_scores(out, observations, n_of, settings_of) if step is not None and one_process() else {}
    if announce is not None:
        announce([k for k in observations if k in earlier])
    for index, k in enumerate(observations):
        stop_check()
        x_o = tasks.observation(task, k)
        reference = tasks.reference_samples(task, k)
        path, n, settings = out / samples_name(k, index == 0), n_of[k], settings_of(k)
        kept = earlier.get(k)
        if kept is not None:
            samples, scores, acceptance, source = kept
        else:
            draw = posterior_draws(sims, sampler, x_o, seed=settings["noise_seed"])
            samples, acceptance = draw_inside_support(draw, support, num_samples)  # numpyro: True inside
            samples = samples[:n]
        outside += int((~np.asarray(support(samples))).sum())  # 0: checked, not assumed
        if acceptance < LOW_ACCEPTANCE:  # its fix as run(cfg)'s setting from Python (python_words), else the override
            log.warning("observation %d: only %.1f%% of posterior draws lie inside the prior's support (the rest "
                        "were rejected); the posterior trained on theta as simulated puts much of its mass outside "
                        "the prior: train longer, or set %s", k, 100 * acceptance,
                        run_setting("data.theta_transform", "support"))
        if kept is None:
            scores = evaluate.c2st_scores(samples, reference[:n], seed=seed, n_folds=n_folds, n_jobs=n_jobs)
        row = {"observation": k, "c2st": float(scores.mean()), "c2st_sd_folds": float(scores.std(ddof=1)),
               "c2st_scores": scores.tolist(), "n": n, "acceptance": acceptance}
        rows.append(row)
        # A set-aside copy is moved back to this attempt's name; any other file it was read from stays as it is
        moved = bool(write and kept is not None and source != path and take_back(source, path))
        origin = "" if kept is None or source == path else f" (was {source.name})" if moved else \
            f" (read from {source.name})"
        log.info("observation %d: C2ST %.3f ± %.3f over %d folds (%d vs %d samples; 0.5 = indistinguishable "
                 "from the reference posterior)%s", k, row["c2st"], row["c2st_sd_folds"], n_folds, n, n,
                 f"; scored by an earlier attempt at step {step}, kept: {path.name}{origin}" if kept is not None
                 else "")
        if write:
            if kept is None or (source != path and not moved):  # kept under its other name: written under this one
                outputs.write_npz(path, samples=samples, reference=reference[:n], observation=x_o, c2st=row["c2st"],
                                  c2st_scores=scores, acceptance=acceptance, **settings,
                                  **({} if checkpoint_step is None else {"checkpoint_step": checkpoint_step}))
            outputs.write_atomic(out / "c2st.csv", c2st_csv(rows))
            if plot and index == 0 and (kept is None or not plotted_after(out / "posterior.png", path)):
                evaluate.pair_plot(samples, reference, out / "posterior.png",
                                   title=title(k, row["c2st"], row["c2st_sd_folds"]),
                                   labels=[str(label) for label in task.get_labels_parameters()])
        if index + 1 < len(observations):  # after the score is written, so a stop waited for keeps it
            stop_check()  # after the last one the evaluation is whole: no stop to mark it interrupted
    means = [r["c2st"] for r in rows]
    return {"c2st": float(np.mean(means)),
            "c2st_sd_folds": float(np.mean([r["c2st_sd_folds"] for r in rows])),
            "c2st_sd_observations": float(np.std(means, ddof=1)) if len(means) > 1 else None,
            "c2st_observations": rows, "samples_outside_support": outside,
            "support_acceptance": float(np.mean([r["acceptance"] for r in rows]))}


def sampled_weights(metrics: dict[str, Any], ema: bool, one_process: bool = True) -> dict[str, Any]:
    """``step``, ``weights`` and ``checkpoint_step`` of ``evaluate_observations`` for a run's ``metrics``: the best
    validation's weights (``best_step``) when it validated, else the last step's (``final_step``); ``step`` None in a
    job of several processes (the others cannot see process 0's files, so none keeps a score)."""
    best = metrics.get("best_step") is not None
    return {"step": (metrics["best_step"] if best else metrics["final_step"]) if one_process else None,
            "weights": f"{'EMA' if ema else 'trained'} at the {'best validation' if best else 'last'} step",
            "checkpoint_step": metrics["final_step"]}


def c2st_csv(rows: list[dict]) -> str:
    """``c2st.csv``'s text: one row per observation scored (its folds' mean and sd, every fold, the samples)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["observation", "c2st", "c2st_sd_folds", "c2st_scores", "n"])
    for r in rows:
        writer.writerow([r["observation"], f"{r['c2st']:.6f}", f"{r['c2st_sd_folds']:.6f}",
                         " ".join(f"{s:.6f}" for s in r["c2st_scores"]), r["n"]])
    return buffer.getvalue()
