"""A ``sample.py`` request checked before any model is built: the run's newest checkpoint, x_o and the counts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.observation_input import check_observation, load_observation
from gensbi_sharding.harness.override_grammar import hydra_override
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.sample_output import count_problems, named, tried
from gensbi_sharding.harness.sampled_checkpoint import arrays_read, no_checkpoint, saved_items, sweep_refusal
from gensbi_sharding.harness.simulation_data import NORMALIZATION

__all__ = ["run_checkpoint", "checked_request"]


def run_checkpoint(run_dir: Any, flags: bool = False, x_o: Any = None) -> tuple[Path, dict, dict]:
    """``(step folder, saved config, saved info)`` of ``run_dir``'s newest checkpoint (or the step folder given).

    Raises
    ------
    FileNotFoundError or ValueError
        Naming the folder, and the one to pass instead.
    """
    from gensbi_sharding.checkpoint import find_checkpoint

    folder = Path(run_dir).expanduser().absolute()
    if not folder.exists():
        raise FileNotFoundError(f"run folder {os.fspath(run_dir)!r} does not exist (resolved to {folder}): pass the "
                                "folder a run wrote (launch.py's last line names it, e.g. outputs/<date>/<time>)")
    if (folder / "multirun.yaml").is_file():  # a sweep's folder: its checkpoints are its jobs'
        raise sweep_refusal(folder)
    try:
        step_dir = find_checkpoint(folder)
    except FileNotFoundError as err:  # why, where its folder says (a sequential job's, a stopped run's)
        raise no_checkpoint(run_dir, folder, err) from None
    config, info = saved_items(step_dir, flags=flags, x_o=x_o)  # damaged: named for who samples
    if not config.get("data") or not config.get("model"):
        raise ValueError(f"checkpoint {step_dir} holds no run config (saved by CheckpointWriter without one, not by "
                         "launch.py): the model it holds cannot be rebuilt; pass a run folder launch.py wrote")
    if info.get(NORMALIZATION) is None:
        raise ValueError(f"checkpoint {step_dir} holds no z-score statistics (saved by an earlier version): x_o "
                         "cannot be standardised as in training; resume the run once ("
                         f"{command_for()} {hydra_override('train.resume', step_dir)} ... hydra.run.dir=<new folder>) "
                         "and sample its folder")
    arrays_read(step_dir, flags=flags, x_o=x_o)  # its data files gone or cut short: named before the model is built
    return step_dir, config, info


def checked_request(run_dir: Any, x_o: Any, num_samples: Any, seed: Any, ode_steps: Any, flags: bool) -> tuple:
    """Every check of a request, before any model is built: ``(step folder, saved config, saved info, config, x_o,
    num_samples, seed, ode_steps)``, the counts' defaults the run's; ``flags``: sample.py's words, and its arguments
    checked in the order typed (the run folder before the observation). Raises FileNotFoundError or ValueError."""
    from omegaconf import OmegaConf
    from gensbi_sharding.harness.devices import check_platform
    from gensbi_sharding.harness.memory_check import check_draw_fits
    from gensbi_sharding.harness.refusal import listed
    from gensbi_sharding.harness.tasks import ODE_STEPS_MAX, TASKS

    check_platform(None, started=False)  # first: the checkpoint's reader starts JAX (else a bare AssertionError)
    source, refused = x_o if isinstance(x_o, (str, os.PathLike)) else None, []
    # each argument checked whatever another's refusal, so one run of the command names every refusal
    found = tried(refused, run_checkpoint, run_dir, flags, source) if flags else None
    x_o = tried(refused, load_observation, x_o)
    found = found if flags else tried(refused, run_checkpoint, run_dir, flags, source)
    step_dir, saved, info = found or (None, None, None)
    cfg = None if found is None else OmegaConf.create(saved)
    if cfg is not None and cfg.data.name not in TASKS:
        raise ValueError(f"the run in {step_dir} trained on data={cfg.data.name}, which is no sbibm task: its "
                         f"prior (support, bijection) is unknown here; sampling supports {', '.join(TASKS)}")
    if cfg is not None and x_o is not None:
        x_o = tried(refused, lambda: check_observation(x_o, dim_x=len(info[NORMALIZATION]["x_mean"]),
                                                        x_transform=cfg.data.x_transform, task=cfg.data.name,
                                                        source=source))
    if cfg is not None:  # the run's own where not given
        num_samples = cfg.eval.num_samples if num_samples is None else num_samples
        seed = cfg.seed if seed is None else seed
        if ode_steps is None and count_problems(dict(ode_steps=cfg.eval.ode_steps), flags):  # above the bound
            # a run from before it: named as the run's, not as "--ode-steps 20000", a flag never typed
            refused.append(ValueError(
                f"the run's eval.ode_steps={cfg.eval.ode_steps}, the default of "
                f"{'--ode-steps' if flags else 'ode_steps'}, is above {ODE_STEPS_MAX:,} (flow-matching samplers use "
                "10-1,000); pass "
                f"{named('ode_steps', 1000, flags)}"))
        else:
            ode_steps = cfg.eval.ode_steps if ode_steps is None else ode_steps
    refused += map(ValueError, count_problems(dict(num_samples=num_samples, seed=seed, ode_steps=ode_steps), flags))
    if len(refused) == 1:
        raise refused[0]
    if refused:  # FileNotFoundError where each is one, as for one
        kind = ValueError if any(isinstance(err, ValueError) for err in refused) else FileNotFoundError
        raise kind(listed(f"{'sample.py: ' * flags}{len(refused)} arguments are refused:", list(map(str, refused))))
    check_draw_fits(int(num_samples), len(info[NORMALIZATION]["theta_mean"]) + len(info[NORMALIZATION]["x_mean"]),
                    setting=named("num_samples", num_samples, True) if flags else None)
    return step_dir, saved, info, cfg, x_o, num_samples, seed, ode_steps
