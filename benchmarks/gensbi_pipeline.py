"""The harness against GenSBI's own ``Flux1FlowPipeline``: time per step and C2ST, side by side.

Same process, same device (no mesh: GenSBI's pipeline trains on one device by default), same Flux1
(``Flux1Params`` of ``conf/model/flux1.yaml``, float32 compute), same data (two_moons, 10,000 simulations, z-scored
by the harness, the *same* global batches in the same order: GenSBI's pipeline is fed the harness's batch iterator
as ``(theta (B, 2, 1), x (B, 2, 1))``), same batch size and number of steps. Each side uses its own training recipe,
as a user gets it: the harness's (``conf/train``) and GenSBI's defaults (warm-up, cosine decay, adaptive gradient
clipping, EMA, a validation batch every 100 steps) with its peak learning rate set to the harness's (GenSBI's 1e-4
default is tuned for 50,000 steps) and early stopping off (so both run every step).

Time per step is the median over steady steps: the harness's own windows (``median_step_s``); for GenSBI the
interval between successive batch requests inside its loop (one per step), after the first 20 steps (compilation).
C2ST: both sides' posterior samples at the benchmark observation against the reference, with the harness's
``evaluate.c2st`` and the same sample count and folds; GenSBI's twice, with its EMA weights (its default for
sampling) and with its last weights: its EMA starts from the initial weights and takes ``optax.ema``'s state, not
the debiased output, so after ``steps`` steps of decay 0.999 it still holds 0.999**steps of them (13% after 2000).

``--profile`` adds a cProfile of ``--profile-steps`` GenSBI steps (after warm-up) and prints where their host time goes.

Run: ``nice -n 10 .venv/bin/python benchmarks/gensbi_pipeline.py [--steps 2000] [--profile]``
"""

from __future__ import annotations

import cProfile
import io
import itertools
import logging
import os
import pstats
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# This checkout's package, not whichever copy the environment has installed (another clone, a
# non-editable install): the numbers must be of the code beside this script.
sys.path.insert(0, str(REPO))

from cli_args import bars_off_unless_terminal, count, fit_console, integer, new_parser, require_gensbi  # noqa: E402
from hydra.errors import HydraException  # noqa: E402

WARMUP_STEPS = 20  # GenSBI steps left out of its step time: compilation
#: Keys this script sets for both sides: an override would change the harness's side alone (GenSBI's takes the flag)
FIXED = {
    "train.steps": "--steps", "data.batch_size": "--batch-size", "seed": "--seed",
    "eval.num_samples": "--num-samples", "eval.c2st_folds": "--folds",
    "model": "nothing: the comparison is of GenSBI's Flux1 on both sides; its model.* fields may be set",
    "mesh": "nothing: both sides train on one device, as GenSBI's pipeline does",
    "devices.cpu_count": "nothing: both sides train on one device, as GenSBI's pipeline does",
    "data": "nothing: the comparison is on two_moons at 10,000 simulations",
    "data.name": "nothing: the comparison is on two_moons at 10,000 simulations",
    "data.num_simulations": "nothing: the comparison is on two_moons at 10,000 simulations",
    "eval.observations": "nothing: both sides score one observation; data.num_observation picks it",
    "eval.enabled": "nothing: both sides are scored by C2ST",
    "dry_run": "nothing: both sides train",
    # Early stopping or a resumed checkpoint would leave the harness's side fewer steps than GenSBI's, under a
    # caption that says --steps of each (GenSBI's side has its early stopping off, and starts from scratch)
    "train.patience": "nothing: early stopping is off on both sides, so both run every --steps step",
    "train.resume": "nothing: both sides train every --steps step from scratch",
}


#: The harness's keys this script sets from its flags: a harness message naming one names the flag instead.
FLAGS = {key: flag for key, flag in FIXED.items() if flag.startswith("--")}


def in_flags(message: str) -> str:
    """``message`` (the harness's) with each key this script sets named by its flag: ``eval.c2st_folds=1 >= 2; set
    eval.c2st_folds=2`` -> ``--folds 1 >= 2; pass --folds 2`` (the harness's fix is a key this script refuses)."""
    for key, flag in FLAGS.items():
        name = re.escape(key)
        message = re.sub(rf"\bset {name}=", f"pass {key}=", message)
        message = re.sub(rf"(?<![\w.]){name}=", f"{flag} ", message)
        if "." in key:  # a dotted key named bare ("2 * eval.c2st_folds"); a bare "seed" may be prose
            message = re.sub(rf"(?<![\w.]){name}(?![\w.])", flag, message)
    return message


class _InFlags(logging.Filter):
    """The harness's warnings and errors, in this script's flags (``in_flags``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            record.msg, record.args = in_flags(record.getMessage()), ()
        return True


def harness_config(args, out_dir: str):
    """The harness's config, checked (``ConfigError``) as a launch.py job composed so holds it: a refusal's example is
    the value this script composes, its refusal ``main``'s exit 2, a usage error's (not the run's failure's, 1).
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.job_check import job_problem

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=[
            "model=flux1", "mesh=none", "data=two_moons", "data.num_simulations=10000",
            f"data.batch_size={args.batch_size}", f"train.steps={args.steps}", f"seed={args.seed}",
            f"eval.num_samples={args.num_samples}", f"eval.c2st_folds={args.folds}", "eval.plot=false",
            "devices.cpu_count=1", *args.overrides])
        before = HydraConfig.instance().cfg
        HydraConfig.instance().set_config(cfg)
        try:
            with open_dict(cfg):
                del cfg["hydra"]
                cfg.output_dir = out_dir
            validate(cfg)
            # What launch.py refuses before its job starts: refused here, once, before JAX starts (the run itself
            # would refuse --batch-size 100000 only after, as "harness run failed", exit 1, and again in its log).
            if (problem := job_problem(cfg)) is not None:
                raise ConfigError(problem.removeprefix("ConfigError: "))
        finally:  # the run itself is no Hydra job: its folder is cfg.output_dir
            HydraConfig.instance().cfg = before
    return cfg


class TimedBatches:
    """GenSBI's train iterator: the harness's batches as (theta, x) tokens, request times kept.

    With ``profile=(profiler, first, count)`` it runs ``profiler`` from request ``first``
    for ``count`` requests (steps), so compilation stays out of the profile.
    """

    def __init__(self, batches, profile=None):
        self.batches, self.times, self.profile = batches, [], profile

    def __iter__(self):
        return self

    def __next__(self):
        self.times.append(time.perf_counter())
        if self.profile is not None:
            profiler, first, count = self.profile
            if len(self.times) == first:
                profiler.enable()
            elif len(self.times) == first + count:
                profiler.disable()
        batch = next(self.batches)
        return batch["theta"][..., None], batch["x"][..., None]


def gensbi_params(cfg, dim_theta: int, dim_x: int):
    """GenSBI's Flux1Params from the harness's model config, by the harness's own mapping (``flux1_params``): every
    ``model.*`` field, so an override the harness's side takes reaches GenSBI's alike (``model.id_merge_mode=concat``'s
    ``val_emb_dim`` / ``id_emb_dim`` were left out: GenSBI's side refused them after the harness's side had trained)."""
    from flax import nnx
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.models.flux1 import flux1_params

    fields = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k not in ("name", "init")}
    return flux1_params(dim_theta=dim_theta, dim_x=dim_x, rngs=nnx.Rngs(cfg.seed), **fields)


def validations_in(steps: int, val_every: int) -> int:
    """GenSBI's validations in ``steps`` steps: at each step j > 0 of 0..steps-1 that ``val_every`` divides."""
    return (steps - 1) // val_every


def run_gensbi(cfg, args, out_dir: str):
    import jax
    import numpy as np
    from flax import nnx

    from gensbi_sharding.harness import evaluate
    from gensbi_sharding.harness.agg_figure import import_matplotlib
    from gensbi_sharding.harness.pipeline import build_pipeline

    import_matplotlib()  # gensbi.recipes imports matplotlib, which raises on an MPLBACKEND it lacks
    from gensbi.recipes import Flux1FlowPipeline

    pipe = build_pipeline(cfg.data, seed=cfg.seed, mesh=None)  # the harness's data and batch order
    sims = pipe.sims
    train, val = TimedBatches(pipe.train_batches), TimedBatches(itertools.cycle(pipe.val_batches))
    config = Flux1FlowPipeline.get_default_training_config()
    config.update(nsteps=args.steps, max_lr=cfg.train.learning_rate, early_stopping=False,
                  checkpoint_dir=os.path.join(out_dir, "gensbi_checkpoints"))
    pipeline = Flux1FlowPipeline(train, val, sims.dim_theta, sims.dim_x,
                                 params=gensbi_params(cfg, sims.dim_theta, sims.dim_x), training_config=config)
    n_params = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(nnx.state(pipeline.model, nnx.Param)))
    start = time.perf_counter()
    pipeline.train(nnx.Rngs(cfg.seed), nsteps=args.steps, save_model=False)
    wall = time.perf_counter() - start
    intervals = np.diff(np.asarray(train.times))[WARMUP_STEPS:]
    x_o = np.asarray(sims.normalize_x(sims.observation), np.float32).reshape(1, sims.dim_x, 1)
    scores = {}
    for use_ema in (True, False):  # its EMA (GenSBI's default for sampling) and its last weights
        samples = pipeline.sample(jax.random.key(cfg.seed), x_o, nsamples=cfg.eval.num_samples, use_ema=use_ema)
        samples = sims.denormalize_theta(np.asarray(samples)[..., 0])
        scores[use_ema] = evaluate.c2st(samples, np.asarray(sims.reference_samples), seed=cfg.seed,
                                        n_folds=cfg.eval.c2st_folds, max_samples=cfg.eval.num_samples)
    return {"step_s": float(np.median(intervals)), "mean_step_s": float(np.mean(intervals)), "wall_s": wall,
            "val_every": config["val_every"], "validations": validations_in(args.steps, config["val_every"]),
            "c2st": scores[True], "c2st_last": scores[False], "params": n_params}, pipeline


def profile_gensbi(pipeline, steps: int) -> str:
    """cProfile of ``steps`` steps of another ``train`` call, from its 20th step on."""
    from flax import nnx

    profiler = cProfile.Profile()
    pipeline.train_dataset_iter.times, pipeline.train_dataset_iter.profile = [], (profiler, 20, steps)
    pipeline.train(nnx.Rngs(1), nsteps=steps + 25, save_model=False)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).sort_stats("cumulative")
    stats.print_stats(30)
    stats.sort_stats("tottime").print_stats(15)
    return text.getvalue()


def main() -> None:
    parser = new_parser(__doc__)
    parser.add_argument("--steps", type=count(example=WARMUP_STEPS * 10, least=WARMUP_STEPS + 2), default=2000,
                        help="training steps of each pipeline")
    parser.add_argument("--batch-size", type=count(example=256), default=256, help="batch size of both")
    parser.add_argument("--num-samples", type=count(example=10_000, least=2), default=10_000, help="C2ST's samples")
    parser.add_argument("--folds", type=count(example=5, least=2), default=5, help="C2ST cross-validation folds")
    parser.add_argument("--seed", type=integer, default=0, help="harness seed (data, initialisation, batches)")
    parser.add_argument("--profile", action="store_true", help="cProfile GenSBI's steps, print where host time goes")
    parser.add_argument("--profile-steps", type=count(example=200), default=200, help="GenSBI steps profiled")
    parser.add_argument("overrides", nargs="*", default=[], help="more harness overrides, e.g. model.depth=4")
    args = parser.parse_args()
    if args.steps <= WARMUP_STEPS + 1:  # its step time: the intervals between requests after them (21: none, nan)
        parser.error(f"argument --steps: {args.steps} leaves no step to time after the first {WARMUP_STEPS} "
                     f"(compilation); e.g. --steps {WARMUP_STEPS * 10}")
    for override in args.overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in FIXED:
            use = FIXED[key]
            instead = f"use {use}" if use.startswith("--") else f"leave it out ({use.removeprefix('nothing: ')})"
            parser.error(f"harness override {override}: this script sets {key} for both sides; {instead}")
    require_gensbi(parser)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    warnings.filterwarnings("ignore", category=UserWarning)
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.key_checks import unknown_key_problem
    from gensbi_sharding.harness.override_types import override_problem
    from gensbi_sharding.harness.run import run
    from gensbi_sharding.harness.task_fixed import task_fixed_problem

    # As harness_config composes them (the model named, its values suggested: Flux1's, not the default mlp's)
    if problem := (task_fixed_problem(["model=flux1", "data=two_moons", *args.overrides])
                   or unknown_key_problem(["model=flux1", *args.overrides])  # Hydra's advice, to append it, fails too
                   or override_problem(["model=flux1", "mesh=none", "data=two_moons", *args.overrides])):
        parser.error(f"harness overrides {' '.join(args.overrides)}: {problem}")
    with tempfile.TemporaryDirectory() as out_dir:
        try:
            cfg = harness_config(args, os.path.join(out_dir, "harness"))
        except HydraException as err:  # a mistyped override: Hydra's own message, on one line
            parser.error(f"harness overrides {' '.join(args.overrides)}: {' '.join(str(err).split())}")
        except ConfigError as err:  # a value refused, named by this script's flag where it sets it
            parser.error(in_flags(str(err)))
        words = _InFlags()
        logging.getLogger("gensbi_sharding").addFilter(words)
        try:
            harness = run(cfg)
        finally:
            logging.getLogger("gensbi_sharding").removeFilter(words)
        if harness["status"] != "ok":
            raise SystemExit(f"harness run failed: {in_flags(str(harness.get('error')))}")
        gensbi, pipeline = run_gensbi(cfg, args, out_dir)
        report = profile_gensbi(pipeline, args.profile_steps) if args.profile else None

    # The dtypes the run used (model.dtype=bfloat16 was reported as float32)
    print(f"\nFlux1 {dict(cfg.model)} ({gensbi['params']} parameters in {cfg.model.param_dtype}, computing in "
          f"{cfg.model.dtype}), two_moons, "
          f"10,000 simulations, batch {args.batch_size}, {args.steps} step{'s' * (args.steps != 1)}, one CPU device; "
          f"C2ST: {args.num_samples} samples, {args.folds} folds\n")
    print("| pipeline | s/step (median) | C2ST, EMA weights | C2ST, last weights |\n|---|---|---|---|")
    print(f"| harness | {harness['median_step_s']:.4f} | {harness['c2st']:.3f} | |")
    print(f"| GenSBI Flux1FlowPipeline | {gensbi['step_s']:.4f} | {gensbi['c2st']:.3f} | {gensbi['c2st_last']:.3f} |")
    print(f"| ratio harness / GenSBI | {harness['median_step_s'] / gensbi['step_s']:.3f} | | |")
    if args.steps < WARMUP_STEPS * 10:  # 9 steady steps (--steps 30) give no ratio to judge
        print(f"\nratio not judged at this size: {args.steps} steps, under the {WARMUP_STEPS * 10} it is set for (the "
              f"first {WARMUP_STEPS} compile); the default, --steps 2000, judges it")
    every = gensbi["val_every"]  # its validations named only where it ran some
    validations = (f"its {gensbi['validations']} validation{'s' * (gensbi['validations'] != 1)}, one every {every} "
                   "steps, included" if gensbi["validations"] else f"no validation: it validates every {every} steps")
    print(f"\nGenSBI's mean interval between steps ({validations}): {gensbi['mean_step_s']:.4f} s")
    print(f"\n(train loops incl. compile: GenSBI {gensbi['wall_s']:.1f} s; harness compile "
          f"{harness['compile_s']:.1f} s + {args.steps} x {harness['median_step_s']:.4f} s)")
    if report:
        print(f"\ncProfile of {args.profile_steps} GenSBI steps:\n{report}")


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a table's character escaped, never an UnicodeEncodeError
    bars_off_unless_terminal()  # before GenSBI's tqdm is imported
    main()
