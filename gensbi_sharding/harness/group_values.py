"""``option_value_problem``: a config group given null or a list (``model=null``, ``model=[mlp,transformer]``), not
an option's name.

It reads the groups and their options through ``override_keys`` (which reads ``groups`` and ``config``): living
above both, it keeps ``groups`` from importing ``override_keys`` back. ``override_keys``' functions are read through
the module, as tests replace them. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

from gensbi_sharding.harness import override_keys
from gensbi_sharding.harness.groups import chosen_default
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["option_value_problem"]


def option_value_problem(override, search_paths: Sequence[str], multirun: bool, run_mode_args: Sequence[str] = ()):
    """``model=null``, ``mesh=null`` or ``model=[mlp,transformer]``: a group given null or a list, not an option's
    name (Hydra's is a traceback, "Config group override must be a string or a list. Got NoneType", or its
    "Error resolving interpolation '${experiment}/${model}'": a list merges every option listed into one config).
    Hydra's own groups too (``hydra/launcher=null``). ``override``: as ``override_grammar.parse`` reads it (``.arg``,
    ``.values()``: a sweep's several), ``search_paths``: the command's ``hydra.searchpath`` entries. A refusal naming
    the override to type; None where every value is a name, or the key is no group. ``run_mode_args``: the
    command's ``hydra.mode=RUN`` (``CommandLine.run_mode_args``), which a fix adding ``-m`` leaves out.
    """
    group, arg, values = override.key, override.arg, override.values()
    if override.hydra.is_delete() or not (group in override_keys.option_groups() or group.startswith("hydra/")):
        return None
    # Hydra's: its package's too
    choices = [] if group.startswith("hydra/") else override_keys.options(group, search_paths) or []
    if all(isinstance(v, str) for v in values) or any(isinstance(v, dict) for v in values):  # a dict: its settings,
        return None  # override_dicts' to check
    key, named = arg.split("=", 1)[0], [str(v) for v in values if isinstance(v, str)]
    listed = [str(e) for v in values if isinstance(v, (list, tuple)) for e in v]
    if listed:  # each listed option its own job, as a sweep writes them (Hydra's groups: one for every job)
        options = list(dict.fromkeys(named + listed))[:1 if group.startswith("hydra/") else None]
        put = f"{key}={','.join(options)}"
        reason = f"{arg}: {group} takes one option per job, not a list (Hydra would merge them into one config)"
        return (Refusal(reason, put, how="; write " if len(options) == 1 else "; sweep them: ")
                if multirun or len(options) == 1 else
                f"{reason}; for one job per option, sweep them: {command_for()} -m ... {put}"
                + (f" (without {' and '.join(run_mode_args)}: -m overrides it)" if run_mode_args else ""))
    empty = any(isinstance(v, (list, tuple)) for v in values)  # model=[]
    listing = f" ({', '.join(choices)})" if choices else ""
    reason = f"{arg}: {group} takes one of its options{listing}, not {'a list' if empty else 'null'}"
    if "none" in choices and not named and not empty:  # mesh=null meant no mesh
        return Refusal(reason, f"{key}=none", how="; for none, write ")
    if named:  # a sweep's other values
        return Refusal(reason, f"{key}={','.join(named)}", how="; drop it: ")
    if (default := chosen_default(group)) is None:  # experiment=null: a group a run may leave unset
        unset = "Hydra's default" if group.startswith("hydra/") else f"no {group}"
        return f"{reason}; for {unset}, leave {arg} out"
    return Refusal(reason, f"{key}={default}", how="; pick one, e.g. ")
