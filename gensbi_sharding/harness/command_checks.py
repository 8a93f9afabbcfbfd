"""The command line's checks, in order (launch.py runs them over one parse of ``sys.argv[1:]``).

Before Hydra's merge error, which names no fix, and before any folder is made. ``sweep_check`` runs them again
over one job's overrides when Hydra cannot compose that job, so the job's refusal reads as the same command
run alone would be refused (not Hydra's "To append to your config use +model.width=3", itself refused).
Pure Python: no JAX.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from gensbi_sharding.harness.config_files import config_file_problem
from gensbi_sharding.harness.grammar_checks import bare_word_problem, grammar_problem, line_break_problem
from gensbi_sharding.harness.hydra_flags import config_flag_problem, flag_order_problem, flag_use_problem, \
    mode_flags_problem
from gensbi_sharding.harness.experiment_sizes import experiment_sizes_problem
from gensbi_sharding.harness.group_compose import group_choice_problem
from gensbi_sharding.harness.hydra_entries import hydra_entry_problem, hydra_merge_problem
from gensbi_sharding.harness.hydra_plugins import hydra_plugin_problem
from gensbi_sharding.harness.hydra_start import callback_problem, env_copy_problem
from gensbi_sharding.harness.hydra_values import hydra_dict_problem, hydra_sweep_problem, hydra_type_problem, \
    sweeper_param_problem
from gensbi_sharding.harness.key_checks import model_key_problem, unknown_key_problem
from gensbi_sharding.harness.key_paths import hydra_key_problem, hydra_list_problem, hydra_missing_problem
from gensbi_sharding.harness.name_lengths import long_name_problem
from gensbi_sharding.harness.override_dicts import dict_override_problem
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.override_hydra_text import hydra_text_problem
from gensbi_sharding.harness.override_lists import list_override_problem
from gensbi_sharding.harness.override_types import override_problem
from gensbi_sharding.harness.refusal import Refusal, fix_of, fix_refusal, fixes_of, listed, parts_of, refused_too, \
    rephrased
from gensbi_sharding.harness.rule_files import rule_file_problem
from gensbi_sharding.harness.sweep_values import command_sweep_problem
from gensbi_sharding.harness.task_fixed import task_fixed_problem
from gensbi_sharding.harness.yaml_words import yes_no_word_problem

__all__ = ["OVERRIDE_CHECKS", "command_problem", "shown_config_problem", "config_problem"]

# config_file_problem as soon as the overrides parse: the checks after it read the config files it names unreadable
# (hydra_list_problem first: a hydra.searchpath word it would read as a folder; hydra_missing_problem before it:
# hydra.searchpath=??? is no word to put in a list);
# group_choice_problem after override_problem (a group given a list or null is its), before experiment_sizes_problem
# (model=${oc.env:HOME} is no model whose quick sizes to look for);
# experiment_sizes_problem once every model= option's file is known good (a model of one's own without its quick sizes);
# rule_file_problem last: it composes, and an override another check refuses is no command to compose;
# line_break_problem first: every refusal shows the word as typed, over several lines where it holds a line break;
# long_name_problem next: the checks look names up as files, and a name too long raised in each (an OSError);
# bare_word_problem after grammar_problem: a word of no '=' is no override to the checks, and Hydra's error after them
OVERRIDE_CHECKS = (line_break_problem, long_name_problem, config_flag_problem, flag_use_problem, flag_order_problem,
                   grammar_problem, bare_word_problem,
                   hydra_missing_problem, hydra_list_problem,
                   config_file_problem, yes_no_word_problem, hydra_text_problem, task_fixed_problem,
                   command_sweep_problem,
                   list_override_problem, model_key_problem, unknown_key_problem, hydra_key_problem,
                   hydra_sweep_problem, hydra_dict_problem, sweeper_param_problem, hydra_type_problem,
                   hydra_entry_problem, hydra_merge_problem, env_copy_problem, callback_problem,
                   hydra_plugin_problem, mode_flags_problem, override_problem, group_choice_problem,
                   dict_override_problem,
                   experiment_sizes_problem, rule_file_problem)


def command_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The refusals of ``OVERRIDE_CHECKS`` over the command line ``args``; None when every check passes. Where the
    override one says to type instead would be refused too, its refusal follows, so one run names both fixes. Several
    overrides refused are listed, one a line (``refusal.listed``): each found with the fixes of those before typed in
    their place; the list ends at one whose fix names no override to type in place of the one refused.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name, e.g. one job's overrides.

    Returns
    -------
    str or None
        E.g. ``"model.width=3: model=transformer has no field width; model=mlp has it: ..."``.
    """
    from gensbi_sharding.harness.checked_fix import MOST_LISTED

    command, found = parse(args), []
    if any(word in ("-sc", "--shell-completion") for word in command.args):  # install=bash: Hydra's words, no setting
        return flag_use_problem(command)  # (not "install is not a setting": shell completion installs)
    while len(found) < MOST_LISTED and (problem := _checked_problem(command)) not in (None, *found):
        found.append(problem)
        fixes = fixes_of(fix_of(problem))
        refused = next((o for o in command.parsed if problem.startswith((f"{o.arg}:", f"{o.arg} ", f"{o.key} "))), None)
        if refused is None or not fixes:
            break
        command = parse(_with_fixes(command.args, refused.arg, fixes))
    else:  # the fixed command passes these checks: the run's own checks of it follow in the same list
        # (so train.steps=1.5 seed=-1 names seed=-1 too, not only once train.steps is fixed)
        found += [p for p in parts_of(found and problem is None and config_problem(command.args, every=True))
                  if p not in found][:MOST_LISTED - len(found)]
    if len(found) < 2:
        return found[0] if found else None
    return listed(f"{len(found)} overrides are refused, each with its fix:", found, lead="ConfigError: ")


def shown_config_problem(args: Sequence[str]) -> str | None:
    """The run's refusal of the config a ``--cfg`` (job, hydra, all) or ``--info`` command showed, which Hydra prints
    without checking it; None where a run of it would start, or where the command shows no config. So ``--cfg job
    train.steps=-1`` does not print the config and exit 0 with no word that its run is refused.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name, as ``command_problem`` passed it.

    Returns
    -------
    str or None
        E.g. ``"ConfigError: train.steps=-1 must be >= 1; e.g. train.steps=3000"`` (several: one a line).
    """
    if not any(w in ("-c", "--cfg", "-i", "--info") or w.startswith(("--cfg=", "--info=")) for w in args):
        return None
    return config_problem(args, every=True) or _resume_problem(parse(args))


def _resume_problem(command: CommandLine) -> str | None:
    """The run's refusal of the checkpoint the config of ``command`` resumes (``resume_source``), as the run makes it
    before Hydra makes its folder (``hydra.run.dir`` as typed, else a new one); None where it resumes none or can."""
    from gensbi_sharding.harness.command_defaults import command_jobs, composed
    from gensbi_sharding.harness.resume_source import resume_source_problem

    if _first_problem(command) is not None or len(groups := command_jobs(command) or []) != 1:
        return None
    (chosen, home, name), = groups
    typed = [o.arg for o in command.parsed if not o.key.startswith("hydra")]
    cfg = composed((*(c for c in chosen if c.startswith("hydra.searchpath=")), *typed), home, name)[0]
    out = next((o.arg.split("=", 1)[1] for o in command.parsed if o.key == "hydra.run.dir"), "outputs/<a new run>")
    try:
        return None if cfg is None else resume_source_problem(cfg, out)
    except Exception:  # noqa: BLE001 (e.g. an interpolation that resolves only in Hydra's app: the run's to say)
        return None


def _checked_problem(command: CommandLine) -> str | None:
    if (problem := _first_problem(command)) is None:
        return None
    rewritten = _with_rewrite_problem(command, problem)
    return rewritten if rewritten is not problem else _with_checked_fix(command, problem)


def _first_problem(command: CommandLine) -> str | None:
    return next((problem for check in OVERRIDE_CHECKS if (problem := check(command))), None)


def _with_rewrite_problem(command: CommandLine, problem: str) -> str:
    """``problem``, and where the override it offers (``Refusal.fix``) keeps the value as typed under another key or
    prefix and would be refused too, that refusal with its fix, in the same message (alone, ``+train.resume=true``'s
    "write train.resume=true" is refused the next run; ``train.stpes=1.5``'s "set train.steps=1.5" refused next)."""
    fixed = fix if isinstance(fix := fix_of(problem), str) else ""  # one override: the typed value under a new key
    typo = next((o for o in command.parsed if fixed.endswith(f"={o.raw}") and o.arg != fixed
                 and problem.startswith((o.arg, o.key))), None)
    if typo is None:
        return problem
    then = _first_problem(parse([fixed if arg == typo.arg else arg for arg in command.args]))
    if then is None or not then.startswith((fixed, fixed.split("=", 1)[0])):  # another override's: refused on its own
        return problem
    said = f"{problem}, though {fixed} is refused too: "
    if _key(fixed) not in map(_key, fixes_of(fix_of(then))):  # its fix is no value of that key: words only
        return f"{said}{then.removeprefix(f'{fixed}: ')}"
    # the value it offers carried as the fix, so a list goes on to the next value refused (words only, and
    # train.stpes=1.5 seed=-1 would name seed=-1 only on the next run)
    return Refusal(said + then.reason.removeprefix(f"{fixed}: "), then.fix, how=then.how, after=then.after,
                   shown=then.shown)


def _with_checked_fix(command: CommandLine, problem: str) -> str:
    """``problem``, where the config the command composes with its fix (``Refusal.fix``, in place of the override
    refused) would be refused by the run's own checks (``job_check.job_problem``: the range checks and GenSBI's model
    checks alike): that refusal's own fix in its place where it sets the same key and passes, the overrides it names
    together (a tuple) checked together, else that refusal appended (so no fix offered is refused next:
    ``eval.num_samples=2.5`` -> "e.g. eval.num_samples=2", at least 4; ``mesh={model:3}`` -> ``mesh.model_axis=3``,
    which 8 devices refuse; ``model.id_merge_mode=concat model.val_emb_dim=0.5`` -> "e.g. model.val_emb_dim=null",
    which the concat check refuses, naming the two emb dims together)."""
    fixes = fixes_of(fix_of(problem))
    refused = next((o for o in command.parsed if fixes and problem.startswith((f"{o.arg}:", f"{o.arg} "))), None)
    keys = [_key(fix) for fix in fixes]
    key = next((k for k in keys if refused is not None and f"{k}.".startswith(f"{refused.key}.")), None)
    if refused is None or refused.sweep or key is None:
        # A fix that renames the key (rul=fsdp -> rule=fsdp) leaves the value the user's: the run's checks (which
        # import JAX past the range checks) are for a value the refusal chose (eval.num_samples=2, mesh.model_axis)
        return problem
    then = fix_refusal(config_problem, _retyped, _with_fixes(command.args, refused.arg, fixes), fixes)
    if then is None:  # passes, or refused for another override typed wrong beside it: that one is named on its own
        return problem
    better, fixed = fixes_of(fix_of(then)), " ".join(fixes)
    tried = key in map(_key, better)
    if tried and fix_refusal(config_problem, _retyped, _with_fixes(command.args, refused.arg, better), better) is None:
        return problem.fixed_by(fix_of(then), refused_too(fixed, then.reason))
    said = then.reason if tried and isinstance(then, Refusal) else then  # its fix refused in turn: not offered
    return f"{problem}, though {fixed} is refused too: {said.removeprefix('ConfigError: ')}"


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _with_fixes(args: Sequence[str], refused: str, fixes: Sequence[str]) -> list[str]:
    """``args`` with ``fixes`` in place of the override ``refused``, and without any other of the keys they set."""
    keys = {_key(fix) for fix in fixes}
    return [new for arg in args for new in (fixes if arg == refused else () if _key(arg) in keys else (arg,))]


def _retyped(args: Sequence[str], fixes: Sequence[str]) -> list[str]:
    """``args`` with ``fixes`` typed in place of any override of the keys they set."""
    keys = {_key(fix) for fix in fixes}
    return [*(arg for arg in args if _key(arg) not in keys), *fixes]


def config_problem(args: Sequence[str], every: bool = False) -> str | None:
    """The run's refusal of the config the command ``args`` composes (``job_check.job_problem``); None where it
    runs, or where the command checks refuse it or it does not compose (those name their own fix). The first of
    several (a fix is checked against one refusal at a time), or, with ``every``, all of them as one list. A multirun's
    jobs are each checked, and only refusals of values every job shares are said: a swept value's are the sweep
    check's, job by job (unchecked, ``-m +model.dpeth=0 seed=0,1`` would offer model.depth=0, which every job
    refuses as the sweep starts).

    Parameters
    ----------
    args : sequence of str
        The command's arguments after ``launch.py`` (overrides, ``-m``).
    every : bool, default False
        All refusals as one list, not the first.

    Returns
    -------
    str or None
    """
    from omegaconf import OmegaConf, open_dict

    from gensbi_sharding.harness.command_defaults import MAX_JOBS, command_jobs, composed
    from gensbi_sharding.harness.python_words import as_overrides
    from gensbi_sharding.harness.job_check import job_problem
    from gensbi_sharding.harness.sweep_plan import sweep_jobs

    command = parse(args)
    if _first_problem(command) is not None or not (groups := command_jobs(command) or []):
        return None
    if not command.multirun and len(groups) != 1:
        return None
    _, home, name = groups[0]
    searched = [c for c in groups[0][0] if c.startswith("hydra.searchpath=")]
    typed = [o.arg for o in command.parsed if not o.key.startswith("hydra")]
    swept = {o.key for o in command.parsed if o.sweep}
    jobs_of: dict[str, list[list[str]]] = {}  # each refusal, and the jobs refused so
    try:
        expanded = sweep_jobs(typed) if command.multirun else [typed]
    except Exception:  # noqa: BLE001 (a sweep Hydra's sweeper cannot expand: the sweep check's to name)
        return None
    # the jobs of each choice of groups (command_jobs: at most MAX_JOBS) in turn, so every model's are checked (the
    # first MAX_JOBS alone are all model=mlp's for -m model=mlp,transformer seed=range(0,10))
    chosen, by_choice = {_key(c) for job in groups for c in job[0] if not c.startswith("hydra.")}, {}
    for job in expanded:
        by_choice.setdefault(tuple(o for o in job if _key(o) in chosen), []).append(job)
    turns = itertools.zip_longest(*by_choice.values())
    expanded = [job for turn in turns for job in turn if job is not None][:MAX_JOBS]
    for job in expanded:
        cfg = composed((*searched, *job), home, name)[0]
        if cfg is None or OmegaConf.select(cfg, "hydra.sweeper.params"):  # a preset's own sweep: its jobs unknown here
            return None
        cfg = cfg.copy()
        with open_dict(cfg):
            cfg.pop("hydra", None)
        with as_overrides():  # launch.py's words: no Hydra app runs yet
            problem = job_problem(cfg)
        for part in parts_of(problem):
            if not _names_any(part, swept):
                jobs_of.setdefault(part, []).append([o for o in job if _key(o) in swept])
    reasons = [getattr(part, "reason", part) for part in jobs_of]
    # a value the jobs refuse with fixes of their own (model=mlp,transformer: model.depth=3, 2): each said for its jobs
    found = [part if reasons.count(getattr(part, "reason", part)) == 1 else
             rephrased(part, lead=f"ConfigError: for {' '.join(o for o in jobs[0] if all(o in j for j in jobs))}: ",
                       drop="ConfigError: ") for part, jobs in jobs_of.items()]
    if not every or len(found) < 2:
        return next(iter(found), None)
    return listed(f"ConfigError: {len(found)} settings are refused, each with its fix:", found, lead="ConfigError: ")


def _names_any(problem: str, keys: set[str]) -> bool:
    """Whether ``problem`` refuses, or its fix sets, one of ``keys`` (a sweep's swept keys)."""
    reason = problem.reason if isinstance(problem, Refusal) else problem
    return any(f"{key}=" in reason for key in keys) or bool(keys & set(map(_key, fixes_of(fix_of(problem)))))
