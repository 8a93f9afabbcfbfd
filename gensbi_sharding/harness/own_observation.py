"""Sample a trained run's posterior at your own observation: ``sample_posterior(run_dir, x_o)``, or ``python sample.py
<run folder> <x_o.npy>``. The run's evaluation scores sbibm's observations 1..10; this draws at any x_o, with exactly
what that evaluation draws with: the run's saved config builds the model, its checkpoint restores weights, EMA and
best weights by the resume path, the z-score statistics saved with the checkpoint standardise x_o, and the draws go
through the prior's bijection, or are rejected outside the prior's support (``harness.posterior``). Nothing is
simulated, no C2ST computed; every check of the input comes before JAX. The sbibm observation k scored by the run was
drawn with the seed its samples file records as ``noise_seed`` (``posterior.noise_seed(seed, k)``): that seed (and its
``num_samples``, ``ode_steps``) gives its samples again."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gensbi_sharding.harness.console import quiet_libraries
from gensbi_sharding.harness.sampled_checkpoint import DamagedCheckpoint, for_sampler
from gensbi_sharding.harness.observation_input import far_from_training, load_observation
from gensbi_sharding.harness.sample_output import NumberParser, at_least, free_name, out_path, output_problem
from gensbi_sharding.harness.sample_request import checked_request, run_checkpoint
from gensbi_sharding.harness.simulation_data import NORMALIZATION
from gensbi_sharding.harness.unfinished_run import unfinished_note

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh

__all__ = ["sample_posterior", "load_observation", "draw_posterior", "main"]

log = logging.getLogger("gensbi_sharding")
RETRIES = 3  # newest checkpoints picked again after one was deleted while read (a run still training)


@quiet_libraries()  # Orbax's ~20 info lines per checkpoint read: off a caller's INFO logging, as run(cfg) keeps them
def sample_posterior(run_dir: str | os.PathLike, x_o: Any, *, num_samples: int | None = None,
                     seed: int | None = None, ode_steps: int | None = None, mesh: Mesh | None = None,
                     details: dict | None = None, flags: bool = False) -> np.ndarray:
    """Posterior samples of theta at ``x_o`` from a finished (or stopped) run's newest checkpoint.

    Parameters
    ----------
    run_dir : str or PathLike
        A run's folder (its newest complete checkpoint), its ``checkpoints/`` folder or one step folder.
    x_o : array_like or str or PathLike
        The observation, shape (dim_x,) or (1, dim_x), in the task's raw units (as the simulator
        returns it), or a ``.npy`` file holding it.
    num_samples, seed, ode_steps : int, optional
        Samples to return, seed of the noise, midpoint ODE steps; default the run's
        ``eval.num_samples``, ``seed`` and ``eval.ode_steps``.
    mesh : jax.sharding.Mesh, optional
        Mesh to place the model (by the run's rule) and split the samples over; None: one device.
    details : dict, optional
        Filled with ``checkpoint`` (the step folder), ``step``, ``weights``, ``checkpoint_step`` (as a run's samples
        files: ``posterior.sampled_weights``), ``seed``, ``ode_steps``, ``task``, ``observation`` (x_o as conditioned
        on: float32 (dim_x,)), ``acceptance`` (draws inside the prior's support) and ``dtype`` (the model's compute).
    flags : bool
        Name ``num_samples``, ``seed`` and ``ode_steps`` in refusals as ``sample.py``'s flags (``--num-samples 0``),
        the words its user typed, instead of as these keywords.

    Returns
    -------
    ndarray, shape (num_samples, dim_theta), float32
        Inside the prior's support, in the task's parameter units. JAX's and Orbax's info lines are left out while it
        runs (``console.quiet_libraries``, as ``run``): its own line says the checkpoint and weights sampled.

    Raises
    ------
    FileNotFoundError
        ``x_o`` names no file, or ``run_dir`` holds no complete checkpoint, or a damaged one (``DamagedCheckpoint``,
        naming the run's newest intact step folder to sample instead).
    ValueError
        ``x_o`` of the wrong shape, non-finite, or outside the domain of the run's ``data.x_transform``;
        a checkpoint without a run config or z-score statistics; a task without a prior (not sbibm's).
    RuntimeError
        Under 1 % of the draws inside the prior's support, or a draw holding NaN or inf
        (``posterior.draw_inside_support``).
    """
    from omegaconf import open_dict
    from gensbi_sharding.harness.held_out import effective_shards
    from gensbi_sharding.harness.model_plan import details_dropped
    from gensbi_sharding.harness.weights_failure import SamplingError

    source = x_o  # named in a damaged checkpoint's fix
    step_dir, saved, info, cfg, x_o, num_samples, seed, ode_steps = checked_request(run_dir, x_o, num_samples, seed,
                                                                                    ode_steps, flags)
    statistics = info[NORMALIZATION]
    dim_theta, dim_x = len(statistics["theta_mean"]), len(statistics["x_mean"])
    far = far_from_training(x_o, statistics, cfg.data.x_transform, cfg.data.name)  # a warning, if it is
    if (unfinished := unfinished_note(step_dir, cfg, info)) is not None:  # stopped or still training: not its result
        log.warning("%s", unfinished)
    shards = effective_shards(saved, info)
    if shards is not None:  # its held-out pairs as saved: early stopping's best weights are kept, not started afresh
        with open_dict(cfg):
            cfg.data.shards = shards
    for attempt in range(RETRIES + 1):
        try:
            with details_dropped():  # every fallback path: for a job's launch.log, none here (one line says them)
                samples, acceptance, weights = draw_posterior(cfg, step_dir, statistics, x_o, dim_theta=dim_theta,
                                                              dim_x=dim_x, num_samples=int(num_samples),
                                                              seed=int(seed), ode_steps=int(ode_steps), mesh=mesh)
            break
        except SamplingError as err:  # far from training, x_o is the likely cause, not the weights
            if far is None:
                raise
            raise SamplingError(f"{str(err).split('): ', 1)[0]}) at an x_o far from the run's training simulations "
                                f"(the likely cause, not the weights): {far}", outside=err.outside) from None
        except FileNotFoundError as err:
            # A run still training deletes its older steps as it saves (train.keep): the one picked may go
            # while read ('[Errno 2] No such file or directory: <run>/checkpoints/2150'). Pick the newest again.
            newest = run_checkpoint(run_dir)[0] if attempt < RETRIES else step_dir
            if newest == step_dir:  # damaged: named for who samples, not the library's advice for training
                raise for_sampler(err, step_dir, flags=flags, x_o=source) from None
            log.warning("checkpoint %s was deleted while read (its run is still training): sampling its newest, %s",
                        step_dir, newest)
            step_dir = newest
    if details is not None:
        details.update(checkpoint=str(step_dir), **weights, seed=int(seed), ode_steps=int(ode_steps),
                       task=cfg.data.name, acceptance=acceptance, observation=x_o,
                       dtype=cfg.model.get("dtype", "float32"))
    return samples


def draw_posterior(cfg: Any, step_dir: Path, statistics: dict, x_o: np.ndarray, *, dim_theta: int, dim_x: int,
                   num_samples: int, seed: int, ode_steps: int, mesh: Mesh | None) -> tuple[np.ndarray, float, dict]:
    """The run's evaluation at ``x_o`` (run.py step 6): the weights it samples and their record, its maps, rejection.

    Parameters
    ----------
    cfg : DictConfig
        The run's saved config (its ``model``, ``rule``, ``activation``, ``eval``).
    step_dir : Path
        The checkpoint step folder whose weights are sampled.
    statistics : dict
        The run's normalisation statistics (``SimulationData``'s).
    x_o : numpy.ndarray
        The observation, ``(dim_x,)``.
    dim_theta, dim_x : int
        The task's sizes.
    num_samples, seed, ode_steps : int
        Posterior draws, their seed, the flow's ODE steps.
    mesh : jax.sharding.Mesh or None
        The mesh the state is placed on (None: one device).

    Returns
    -------
    tuple of (numpy.ndarray, float, dict)
        The draws inside the prior's support ``(num_samples, dim_theta)``, the acceptance of that rejection, and
        the record of the weights sampled (``sampled_weights``).
    """
    from flax import nnx

    from gensbi_sharding.harness import flow_sampler, train
    from gensbi_sharding.harness.posterior import LOW_ACCEPTANCE, draw_inside_support, posterior_draws, sampled_weights
    from gensbi_sharding.harness.rule_config import rule_table
    from gensbi_sharding.harness.simulation_data import SimulationData
    from gensbi_sharding.harness.state import build_state
    from gensbi_sharding.harness.tasks import get_task, prior_bijection

    task = get_task(cfg.data.name)
    # No simulated pairs (none are needed): only the maps, with the statistics saved beside the weights.
    no_theta, no_x = np.zeros((0, dim_theta), np.float32), np.zeros((0, dim_x), np.float32)
    sims = SimulationData(
        name=cfg.data.name, theta_train=no_theta, x_train=no_x, theta_val=no_theta, x_val=no_x, observation=x_o,
        reference_samples=no_theta, theta_mean=np.zeros(dim_theta, np.float32),
        theta_std=np.ones(dim_theta, np.float32),
        x_mean=np.zeros(dim_x, np.float32), x_std=np.ones(dim_x, np.float32),
        theta_bijection=prior_bijection(task) if cfg.data.theta_transform == "support" else None,
        x_transform=cfg.data.x_transform).with_statistics(statistics)
    rule_name, table = rule_table(cfg.rule)
    ts = build_state(cfg, dim_theta=dim_theta, dim_x=dim_x, mesh=mesh, rule_name=rule_name, table=table,
                     resume_dir=step_dir, sampling=True)
    functions, state = train.make_step_functions(ts.model, ts.optimizer, mesh, ema=ts.ema, warn_again=False)
    stopper = ts.early_stopping if ts.early_stopping is not None and ts.early_stopping.history else None
    # As the run's evaluation: the best weights where a validation ran, by the checkpoint's step (one decision for
    # what is sampled and what is said: build_state's log line and the record name kept_best_step too)
    best = stopper.with_best(functions, state, int(step_dir.name)) if stopper else state
    best_step = stopper.kept_best_step() if stopper else None
    model, _, *ema = nnx.merge(functions.graphdef, best)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    sampler = flow_sampler.FlowSampler(lambda p, th, xx, t: nnx.merge(graphdef, p, rest)(th, xx, t), rows=num_samples,
                                       num_steps=ode_steps, mesh=mesh, batch_size=cfg.eval.get("batch_size"),
                                       params=ema[0].param_state(model) if ema else params)
    samples, acceptance = draw_inside_support(posterior_draws(sims, sampler, x_o, seed=seed),
                                              task.get_prior_dist().support, num_samples)
    if acceptance < LOW_ACCEPTANCE:
        log.warning("only %.1f%% of posterior draws at x_o lie inside the prior's support (the rest were rejected): "
                    "x_o may lie far from the data the run trained on, or the run needs more training",
                    100 * acceptance)
    weights = sampled_weights({"best_step": best_step, "final_step": int(step_dir.name)}, ema=bool(ema))
    return np.asarray(samples, np.float32), acceptance, weights


def main(argv: list[str] | None = None) -> int:
    """``python sample.py <run folder> <x_o.npy> [options]``: exit 0 written, 2 arguments refused, 1 draw failed
    or checkpoint damaged (no argument mistyped)."""
    parser = NumberParser(
        prog="sample.py", description="Draw posterior samples of theta at your own observation x_o from a trained "
        "run's folder (its newest checkpoint), with the run's model, weights (EMA, best) and transforms.")
    parser.add_argument("run_dir", help="the run's folder (or its checkpoints/ folder, or one step folder)")
    parser.add_argument("observation", help="a .npy file holding x_o, shape (dim_x,) or (1, dim_x), raw units")
    parser.add_argument("--num-samples", type=at_least(1, 10000), help="default: the run's eval.num_samples")
    parser.add_argument("--seed", type=at_least(0, 0), help="noise seed; default: the run's seed")
    parser.add_argument("--ode-steps", type=at_least(1, 32), help="default: the run's eval.ode_steps")
    parser.add_argument("--out", default=None, help="new .npz file to write (default: <observation>_posterior.npz "
                        "beside the observation file; .npz is appended to a name without it, as numpy.savez does, "
                        "another type, x.npy, refused; a folder: that file in it); an existing file is never "
                        "overwritten")
    args = parser.parse_args(argv)
    obs = Path(args.observation)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # Orbax's and absl's info lines: not ours
    log.setLevel(logging.INFO)
    try:  # every check of the arguments (run folder, observation, counts) before the output named after them
        _, _, info, _, _, rows, _, _ = checked_request(args.run_dir, obs, args.num_samples, args.seed, args.ode_steps,
                                                       True)
    except (FileNotFoundError, ValueError) as err:  # refusals of the arguments: argparse's code, 2
        print(f"[ERROR] {err}", file=sys.stderr, flush=True)
        return 1 if isinstance(err, DamagedCheckpoint) else 2  # no argument mistyped: as a failed draw, 1
    out = out_path(args.out, obs)
    size = 4 * rows * len(info[NORMALIZATION]["theta_mean"]) + 8192  # its float32 samples, the rest under 8 KiB
    if (problem := output_problem(out, args.out, size)) is not None:
        parser.error(problem)
    details: dict = {}
    # Ctrl-C ends it at once (Python's handler would wait for XLA's whole draw); nothing is written before it ends
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        samples = sample_posterior(args.run_dir, obs, num_samples=args.num_samples, seed=args.seed,
                                   ode_steps=args.ode_steps, details=details, flags=True)
    except (OSError, ValueError, RuntimeError) as err:  # the arguments passed their checks: the draw failed, 1
        # not argparse's 2: a checkpoint deleted or corrupted while read, or a numerical failure, is no bad argument
        print(f"[ERROR] {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGINT, previous)
    from gensbi_sharding.harness.outputs import write_npz
    try:  # a second sample.py to the same --out may have written it while this one sampled: it is kept
        write_npz(out, exclusive=True, samples=samples, **{k: details[k] for k in ("observation", "seed", "ode_steps",
                  "step", "weights", "checkpoint_step", "checkpoint", "acceptance", "dtype")})
    except FileExistsError:
        print(f"[ERROR] {out} was created while sampling (another sample.py?) and is kept; nothing written: "
              f"pass --out {shlex.quote(str(free_name(out)))}", file=sys.stderr, flush=True)  # a name to paste
        return 1
    except OSError as err:  # the disk filled or turned read-only while it sampled: said, no traceback
        print(f"[ERROR] cannot write {out} ({err.strerror or err}): nothing written, no partial file; free space "
              "or pass --out <a file on another disk>.npz and run again (the same seed draws the same samples)",
              file=sys.stderr, flush=True)
        return 1
    print(f"{len(samples)} posterior sample{'s' * (len(samples) != 1)} of theta (dim {samples.shape[1]}) at x_o from "
          f"{details['checkpoint']} ({details['task']}, seed {details['seed']}): {out}", flush=True)
    return 0
