"""What ``benchmarks/sbibm.py`` checks before it starts a job: the extra overrides of ``run`` (``extra_problem``;
the files it counts: ``sbibm_files``).

Each check ends in one line naming the bad value and what to pass instead, so that a mistyped or
contradicting override stops ``run`` before its first job (instead of every job failing the same way,
or a job under ``<root>/two_moons_1000`` training another task or budget).
"""

from __future__ import annotations

import re
from pathlib import Path

from cli_args import Refused, not_a_script
from gensbi_sharding.harness.paste_command import command_for
not_a_script(__name__, __file__)  # run as a script: name the one to run

#: Keys ``run`` sets itself per job: an extra override of one would contradict the job's folder name
#: (``<root>/<task>_<budget>/job``), whose settings ``run`` and ``table`` read from it.
#: ``{task}``, ``{budget}``, ``{root}``: the flags that set each (``RUN_FLAGS``; ``sequential.py``: its own).
OWNED = {
    "experiment": "replaces the sbibm preset every job runs; leave it out",
    "data": "sets the task, which {task} gives each job (and its folder's name); use {task}",
    "data.name": "sets the task, which {task} gives each job (and its folder's name); use {task}",
    "data.num_simulations": "sets the simulation budget, which {budget} gives each job (and its folder's name); "
                            "use {budget}",
    "hydra.sweep.dir": "sets the job's folder, which {root} gives{layout}; use {root}",
    "hydra.sweep.subdir": "sets the job's folder, which {root} gives{layout}; use {root}",
    "hydra.run.dir": "sets the job's folder, which {root} gives{layout}; use {root}",
    "hydra.mode": "would run the job outside the folder {root} lays out; leave it out",
    "eval.enabled": "the jobs would score no observation, so the table would have nothing of them to show; "
                    "leave it out",
    "dry_run": "a dry run trains and scores nothing, so the table would have nothing of it to show; leave it out "
               "({launch} dry_run=true ... checks memory)",
}
#: ``run``'s flags, as ``OWNED`` names them.
RUN_FLAGS = {"task": "--tasks", "budget": "--budgets", "root": "--root", "layout": " (<root>/<task>_<budget>/job)"}


def extra_problem(extra: list[str], tasks: list[str], budgets: list[int], flags: dict | None = None,
                  per_task: bool = False, across: bool = True) -> str | None:
    """The one-line refusal of ``run``'s extra overrides (after ``--``), or None when every job can start.

    Refused, before any job: what Hydra's grammar cannot read, a key ``run`` sets per job (``OWNED``), a
    sweep (``seed=0,1``: every job's values would go into its one folder), and what composing and
    validating each (task, budget)'s config refuses (``train.stepz=20``, ``train.ema_decay=2``), as
    ``launch.py`` would refuse it in each job.

    Parameters
    ----------
    extra : list of str
        The overrides given to every job.
    tasks, budgets : list
        The (task, budget) pairs about to run: each pair's composed config is validated.
    flags : dict, optional
        The flags that set the task, budget and folder where the message is read: ``RUN_FLAGS`` (``run``'s) by default.
    per_task : bool, optional
        Compose each (task, budget)'s config with its ``sbibm_method.TASK_SETTINGS`` too, as ``run``'s amortised
        jobs are.
    across : bool, optional
        Check the fix a settings group's refusal offers against every group of the run, and say which refuses it
        (``_refused_elsewhere``); False: that check itself, each group's refusal named by its task.

    Returns
    -------
    str or None
        E.g. ``"extra argument data=slcp: sets the task, which --tasks gives each job (and its folder's
        name); use --tasks"``.

    Raises
    ------
    cli_args.Refused
        The environment's refusal (``JAX_PLATFORMS=cuda`` on a CPU machine), which no argument fixes.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from gensbi_sharding.harness.grammar_checks import grammar_problem
    from gensbi_sharding.harness.override_grammar import parse
    from gensbi_sharding.harness.key_checks import model_key_problem, unknown_key_problem
    from gensbi_sharding.harness.override_lists import list_override_problem
    from gensbi_sharding.harness.override_types import override_problem
    from gensbi_sharding.harness.task_fixed import task_fixed_problem

    from sbibm_method import task_settings

    # Once per settings group the jobs get: a job of TASK_SETTINGS composes its task's own (model=transformer) before
    # the extra ones, so they are checked against that model (against the preset's MLP, +model.foo=1 would name the
    # MLP's settings, and +model.widht=64 suggest model.width=64, which the transformer's check refuses)
    groups: dict[tuple, list[tuple[str, int]]] = {}
    for task in tasks:
        for budget in budgets:
            group = tuple(task_settings(task, budget, extra)[0]) if per_task else ()
            groups.setdefault(group, []).append((task, budget))
    for own, cells in groups.items():
        command = parse([*own, *extra])  # read once, for each of launch.py's checks that applies to a job's overrides
        # As each job composes them: after experiment=sbibm, whose values a refusal suggests (train.steps=20000)
        composed = parse(["experiment=sbibm", *own, *extra])
        group = ",".join(dict.fromkeys(task for task, _ in cells))
        problem = (grammar_problem(command) or task_fixed_problem([f"data={group}", *own, *extra])
                   or list_override_problem(composed) or unknown_key_problem(command) or model_key_problem(composed)
                   or override_problem(composed, sweeps_need_m=False))
        if problem:  # the task's own settings named as _config_problem names them, with their way out
            problem += _refused_elsewhere(problem, extra, lambda fixed: extra_problem(
                fixed, tasks, budgets, flags, per_task, across=False),
                _own_problem("", *cells[0], own)) if across else ""
            return _own_problem(problem, *cells[0], own) if own or not across else f"extra argument {problem}"
    parser, named = OverridesParser.create(), {**RUN_FLAGS, **(flags or {})}
    for arg in extra:
        if arg.startswith("-"):  # e.g. a second "--" or a launch.py flag: argparse passed it on as an override
            return (f"extra argument {arg} is not a key=value override; pass only overrides after --, "
                    "e.g. train.steps=20")
        try:
            override = parser.parse_override(arg)
        except Exception as err:  # noqa: BLE001 (Hydra's grammar raises its own types): its first line is the reason
            return f"extra argument {arg}: {(str(err).strip().splitlines() or [type(err).__name__])[0]}"
        key = override.key_or_group.lstrip("+~")
        if key in OWNED:
            return f"extra argument {arg}: {OWNED[key].format(**named, launch=command_for())}"
        if override.is_sweep_override():
            root = named["root"]
            return (f"extra argument {arg} sweeps several values, but each (task, budget) is one job in one folder; "
                    f"run once per value, each with its own {root} (e.g. {root} <{root[2:]}>/{key}=<value> -- "
                    f"{key}=<value>)")
    return _config_problem(extra, tasks, budgets, named["budget"], per_task)


def _config_problem(extra: list[str], tasks: list[str], budgets: list[int], budget_flag: str,
                    per_task: bool = False) -> str | None:
    """What composing and checking each pair's config refuses, as ``launch.py``'s check of its one-job sweep would
    (``job_check.job_problem``: the config's values, the mesh, the batch size and the host's memory)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import HydraException
    from omegaconf import open_dict
    from omegaconf.errors import OmegaConfBaseException

    from gensbi_sharding.harness.config import ConfigError, register_configs
    from gensbi_sharding.harness.cpu_count import jit_disabled_problem, platform_start_problem
    from gensbi_sharding.harness.job_check import job_problem
    from sbibm_method import task_settings

    register_configs()
    # The environment's refusals: no argument causes them, so none is prefixed "extra arguments (after --), ..."
    environment = {" ".join(str(p).split()) for p in (platform_start_problem(None), jit_disabled_problem()) if p}
    job = [o for o in extra if not o.lstrip("+~").startswith("hydra")]  # compose() takes no hydra overrides
    # Each job is a launch.py -m of one job, run in its own process unless another launcher is asked for
    in_process = not any(o.lstrip("+~").startswith("hydra/launcher") for o in extra)
    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        for task in tasks:
            for budget in budgets:
                before, own = HydraConfig.instance().cfg, task_settings(task, budget, job)[0] if per_task else []
                try:
                    cfg = compose("config", overrides=["experiment=sbibm", f"data={task}",
                                                       f"data.num_simulations={budget}", *own, *job],
                                      return_hydra_config=True)
                    # As the job's launch.py holds it: a refusal's example is then the preset's (train.steps=20000),
                    # as launch.py's is (not the schema's, train.steps=3000, which is no sbibm setting)
                    HydraConfig.instance().set_config(cfg)
                    with open_dict(cfg):
                        del cfg["hydra"]
                    # All the checks launch.py's own sweep check makes before its first job (validate() alone lets
                    # a batch larger than a budget's training pairs, or one the mesh's devices do not divide, fail
                    # in its job, after the earlier jobs have trained, however long they take)
                    reason = job_problem(cfg, in_process=in_process)
                    reason = reason and reason.removeprefix(f"{ConfigError.__name__}: ")
                except (HydraException, OmegaConfBaseException, ConfigError) as err:
                    cause = f" ({err.__cause__})" if err.__cause__ and str(err.__cause__) not in str(err) else ""
                    reason = " ".join(f"{err}{cause}".split())
                finally:
                    HydraConfig.instance().cfg = before
                if reason:
                    reason = " ".join(reason.split())
                    # run sets the budget (its refusal names --budgets): "data.num_simulations=10000" is a fix it
                    # refuses
                    reason = re.sub(r"(?<![\w.])data\.num_simulations(=?)", lambda m: budget_flag + " " * len(m[1]),
                                    reason)
                    if reason in environment:  # JAX_PLATFORMS=cuda on a CPU machine: no extra argument fixes it, so
                        raise Refused(reason)  # a refusal without argparse's usage text
                    # the task's own settings named: a refusal of model.width=64 read as of the preset's MLP
                    return _own_problem(reason, task, budget, own)
    return None


def _refused_elsewhere(problem: str, extra: list[str], check, said_after: str) -> str:
    """", though <fix> is refused too, for <task> at <budget> simulations: <its refusal>" where the fix ``problem``
    offers (in place of the override it refuses) is refused by ``check`` (``extra_problem`` of every group) naming its
    key, without the note ``said_after`` (``_own_problem``'s, which the message ends with anyway); else "". So
    ``-- +model.widht=64`` is not advised ``model.width=64`` (the MLP's) where gaussian_linear_uniform's refuses it."""
    from gensbi_sharding.harness.refusal import fix_of, fixes_of, said

    fixes, key = fixes_of(fix_of(problem)), lambda o: o.split("=", 1)[0].lstrip("+~")  # noqa: E731
    refused = next((o for o in extra if problem.startswith((f"{o}:", f"{key(o)} "))), None)  # +k=v: or k is not
    if not fixes or refused is None:
        return ""
    keys = {key(fix) for fix in fixes}
    then = check([new for o in extra for new in (fixes if o == refused else () if key(o) in keys else (o,))])
    if not then or not any(k in then for k in keys):
        return ""
    then = then.removeprefix("extra arguments (after --), ").removesuffix(said_after.split(": ", 1)[1])
    return f", though {said(fix_of(problem))} is refused too, {then}"


def _own_problem(reason: str, task: str, budget: int, own) -> str:
    """``reason``, refused for ``task``'s job at ``budget``, which composes its own settings ``own`` first."""
    return (f"extra arguments (after --), for {task} at {budget} simulations: {reason}" + (
            f"; {task}'s job at {budget} runs with {' '.join(own)} before them, all left out when "
            "one of their keys is given after -- (e.g. model=mlp)" if own else ""))
