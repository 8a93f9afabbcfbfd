"""launch.py's check of ``+``, ``++`` and ``~`` overrides: ``prefix_problem``, before Hydra composes.

Hydra refused these naming no fix, or the wrong one: ``+train.steps=5`` ("Could not append to config. An item is
already at 'train.steps'", advising ``++``), ``~train.stpes`` ("Could not delete from config. 'train.stpes' does not
exist."), ``+experiment=quick`` ("Multiple values for experiment": conf/config.yaml lists it, unset),
``++model=transformer`` ("force-add of config groups is not supported"), ``~experiment`` (an interpolation error
from conf/config.yaml's ``${experiment}/${model}``), ``~hydra/job_logging`` (after composing, "Missing mandatory
value: hydra.job_logging"), ``~hydra.run.dir`` and ``hydra.searchpath=null`` (five lines, "does not support deletion",
"is not Optional"). A key the schema lacks, added with ``+`` or ``++``
(``+train.stpes=5``, ``++seeed=1``), composed and was refused only by the config check, after Hydra made the run's
folder. Hydra's semantics are kept where they are valid: ``++key=value`` for a key that exists (it sets it),
``+``/``++`` of a logical axis on the rule table (a table of one's own may lack it), ``~`` of an optional group
nothing reads (``~sweep``), ``hydra.*`` and ``key@package`` overrides. A ``model.*`` key of another model than
the chosen one is ``key_checks.model_key_problem``'s. The command line as ``override_grammar.parse`` reads it,
the model as ``model_choice.chosen_models`` reads it. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from gensbi_sharding.harness.command_defaults import command_default
from gensbi_sharding.harness.config import Config
from gensbi_sharding.harness.groups import CONF, group_options
from gensbi_sharding.harness.hints import closest_name, override_literal
from gensbi_sharding.harness.hydra_entries import entry_removal_problem, removable_entry
from gensbi_sharding.harness.key_paths import nearest_setting, setting_path_problem, unknown_part
from gensbi_sharding.harness.model_choice import ModelChoice, chosen_models
from gensbi_sharding.harness.override_grammar import CommandLine, Override, parse
from gensbi_sharding.harness.override_keys import (OPTIONAL_GROUPS, group_keys, list_fields, model_fields,
                                                   option_groups, schema_name, sections, settings)
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.rule_config import other_name_problem
from gensbi_sharding.harness.search_path import primary_search_path

__all__ = ["prefix_problem"]


def prefix_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first ``+``, ``++`` or ``~`` override Hydra (or the config check) would refuse.

    Refused, each naming the override to type instead: ``+`` on a key that exists (``+train.steps=5``: write
    ``train.steps=5``) or on a group (``+model=transformer``, ``+experiment=quick``: every run lists one);
    ``+`` or ``++`` of a key its section lacks (``+train.stpes=5``: the nearest setting, else drop it); ``++`` on
    a group; ``~`` of a setting or group every run reads (what to set instead), of a key that does not exist
    (nothing to remove), or of ``experiment`` (conf/config.yaml reads it); ``~`` of one of Hydra's groups a run needs
    (``~hydra/job_logging``: ``hydra/job_logging=disabled``).

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"+train.steps=5: train.steps exists (+ adds a key the config lacks); write train.steps=5"``.
    """
    command = parse(args)
    typed, groups, choice = sections(), option_groups(), chosen_models(command)
    for o in command.parsed:
        if o.hydra.type == OverrideType.DEL and o.key.removeprefix("hydra/") in _HYDRA_NEEDED:
            return _hydra_group_problem(o)
        if o.key.startswith("hydra.") and (problem := _hydra_setting_problem(o, command)) is not None:
            return problem
        if o.hydra.package is not None and (problem := _package_problem(o, groups)) is not None:
            return problem
        if (o.hydra.type == OverrideType.CHANGE or o.key.startswith("hydra") or o.hydra.package is not None
                or "/" in o.key):
            continue
        section, _, name = o.key.partition(".")
        if not name and section in groups:
            problem = _group_problem(o, section)
        elif section == "rule":
            problem = _rule_problem(o, name, command)
        else:
            problem = _key_problem(o, section, name, typed, choice, command)
        if problem:
            return problem
    return None


#: Hydra's own groups every run needs (``hydra.conf.HydraConf`` leaves them mandatory, ``???``, once removed) and the
#: option that stands for removing one: ``~hydra/job_logging`` ended in Hydra's "Missing mandatory value:
#: hydra.job_logging" after composing, ``-m ~hydra/launcher`` likewise.
_HYDRA_NEEDED = {"job_logging": ("disabled", "to log errors only"), "hydra_logging": ("disabled", "to log errors only"),
                 "launcher": ("basic", "for Hydra's own"), "sweeper": ("basic", "for Hydra's own")}


def _hydra_group_problem(o: Override) -> Refusal:
    """``~`` on one of Hydra's groups every run needs: its option that stands for none (or Hydra's own) instead."""
    name = o.key.removeprefix("hydra/")
    option, meant = _HYDRA_NEEDED[name]
    return Refusal(f"{o.arg}: Hydra's {o.key} group cannot be removed (Hydra's config requires a hydra.{name})",
                   f"hydra/{name}={option}", how=f"; {meant}, write ")


def _hydra_setting_problem(o: Override, command: CommandLine) -> Refusal | None:
    """``~hydra.run.dir`` (Hydra: "RunDir (DictConfig) does not support deletion") or ``hydra.searchpath=null``
    ("field 'hydra.searchpath' is not Optional"), each in five lines naming no fix: leave it out, or ``[]``, which
    is no fix where the primary config has a search path (``-cn my``: its folders would go unsearched)."""
    path, own = o.key == "hydra.searchpath", primary_search_path(command.args)
    if o.hydra.type == OverrideType.DEL and removable_entry(o.key):  # a callback, a sweeper param: Hydra removes it
        return entry_removal_problem(o, command)
    if o.hydra.type == OverrideType.DEL:
        why = f"{o.arg}: Hydra's own settings cannot be removed; leave {o.arg} out ({o.key} keeps its default"
        why += f": {', '.join(own)})" if path and own else ")"
    elif path and o.hydra.value() is None:  # null anywhere: Hydra merges every hydra.searchpath= typed
        why = f"{o.arg}: hydra.searchpath is a list of folders, never null: leave it out" + (
            f" (the primary config's: {', '.join(own)})" if own else "")
    elif o.hydra.type == OverrideType.ADD and _holds_value(o.key, o.hydra.value()):
        # +hydra.output_subdir=x: Hydra's "Could not append to config. An item is already at ..." is several lines
        return Refusal(f"{o.arg}: {o.key} exists (+ adds a key the config lacks)", f"{o.key}={o.raw}", how="; write ")
    elif o.hydra.value() is None and o.key not in ("hydra.run.dir", "hydra.sweep.dir") and _not_optional(o.key):
        return Refusal(f"{o.arg}: Hydra's {o.key} cannot be null; leave {o.arg} out" + (
            f" ({o.key} keeps its default)" if o.hydra.type == OverrideType.CHANGE else ""), None)
    else:
        return None
    if not path or own:
        return Refusal(why + (", or write hydra.searchpath=[] for none beyond conf/" if path else ""), None)
    return Refusal(why + "; for no folder beyond conf/", "hydra.searchpath=[]", how=", write ")


def _holds_value(key: str, value: object) -> bool:
    """Whether Hydra refuses ``+key=value`` as it applies it: ``key`` holds a value (neither null nor ``???``) in its
    schema (``hydra.conf.HydraConf``) or conf/config.yaml's ``hydra`` section, and ``value`` is no dict or list (Hydra
    merges those in). ``+hydra.job.name=x``, ``+hydra.mode=RUN`` (``???``, null) and ``+hydra.searchpath=[...]``
    run."""
    from hydra.conf import HydraConf
    from omegaconf import DictConfig

    if isinstance(value, dict | list):
        return False
    before = OmegaConf.structured(HydraConf)
    try:  # the harness's own settings of Hydra's (hydra.job.chdir: false, the output folders)
        before = OmegaConf.merge(before, OmegaConf.load(CONF / "config.yaml").get("hydra", {}))
    except Exception:  # noqa: BLE001 - a config.yaml of one's own Hydra reads otherwise: its schema alone
        pass
    parent, _, name = key.removeprefix("hydra.").rpartition(".")
    node = OmegaConf.select(before, parent, default=None) if parent else before
    if not isinstance(node, DictConfig) or name not in node.keys() or OmegaConf.is_missing(node, name):
        return False
    return OmegaConf.is_interpolation(node, name) or node[name] is not None  # ${now:...}: a value, unresolved here


def _not_optional(key: str) -> bool:
    """Whether Hydra refuses ``key=null`` ("field 'hydra.job.name' is not Optional"; hydra.verbose's assert after,
    a traceback); a key HydraConf lacks is ``hydra_key_problem``'s (the run and sweep folders name their own fix)."""
    from hydra.conf import HydraConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        OmegaConf.update(OmegaConf.structured(HydraConf), key.removeprefix("hydra."), None, force_add=False)
    except OmegaConfBaseException as err:
        return "Optional" in str(err)
    return key == "hydra.verbose"


def _package_problem(o: Override, groups: Sequence[str]) -> str | None:
    """``seed@pkg=1`` (a package on a key that is no group: was Hydra's "looks like a config group override, but config
    group 'seed' does not exist") or ``rule@pkg=fsdp`` (a package conf/config.yaml does not list the group under: was
    "Could not override 'rule@pkg'. No match in the defaults list"), each in several lines; None for another."""
    plain = f"{o.typed.split('@', 1)[0]}={o.raw}"
    if "/" not in o.key and o.key not in groups and o.hydra.type != OverrideType.DEL:
        return Refusal(f"{o.arg}: @{o.hydra.package} places a config group's option (group@package=option), and "
                       f"{o.key} is no group", plain, how="; write ")
    if o.key in groups and o.hydra.type == OverrideType.CHANGE:
        return Refusal(f"{o.arg}: conf/config.yaml lists {o.key} without a package, so there is no {o.key}@"
                       f"{o.hydra.package} to change", plain, how="; write ")
    return None


def _reads(group: str) -> bool:
    """Whether an entry of conf/config.yaml's defaults list interpolates ``${group}`` (``experiment_model``)."""
    return any(f"${{{group}}}" in str(entry) for entry in OmegaConf.load(CONF / "config.yaml").get("defaults", []))


def _group_problem(o: Override, group: str) -> str | None:
    """``+``/``++``/``~`` on a group: each option is picked with ``group=option``; the groups every run reads stay."""
    picked = f"{group}={o.raw}"
    if o.hydra.type == OverrideType.ADD:
        # Hydra: "Multiple values for model. To override a value use 'override model: transformer'" (YAML)
        held = ("every run has a {0} already (conf/config.yaml picks one)" if group not in OPTIONAL_GROUPS else
                "conf/config.yaml lists {0} already (none until {0}= picks one)").format(group)
        return Refusal(f"{o.arg}: {held}, so + adds a second", picked, how="; to pick this one, write ")
    if o.hydra.type == OverrideType.FORCE_ADD:
        return Refusal(f"{o.arg}: ++ cannot pick a group's option (Hydra: force-add of config groups is not "
                       "supported)", picked, how="; to pick this one, write ")
    if group in OPTIONAL_GROUPS:
        if _reads(group):
            return (f"{o.arg}: the {group} entry cannot be removed (conf/config.yaml's defaults read ${{{group}}}); "
                    f"for no {group}, drop {o.arg} and leave {group}= out")
        if o.hydra.value() is not None and o.hydra.value() not in (options := group_options(group)):
            return (f"{o.arg}: ~{group}= takes the option to remove, and {o.raw} is none of {group}'s options ("
                    f"{', '.join(options)}); write ~{group}")  # ~sweep=inf: was Hydra's ValueError traceback
        return None  # ~sweep: nothing reads it, Hydra removes it
    extra = " (mesh=none: no mesh)" if group == "mesh" else ""
    return (f"{o.arg}: the {group} group cannot be removed, every run needs one{extra}; pick an option instead: "
            + ", ".join(f"{group}={option}" for option in group_options(group)))


def _null_of(command: CommandLine, key: str, axis: str) -> str:
    """The override that leaves ``axis`` unsplit in every job's rule: ``rule.heads=null``, or ``++rule.heads=null``
    where a job's rule file leaves it out (Hydra cannot set ``rule.heads=null`` there)."""
    from gensbi_sharding.harness.command_defaults import command_jobs, composed

    for chosen, home, name in command_jobs(command) or []:
        table = OmegaConf.select(composed(chosen, home, name)[0] or OmegaConf.create(), "rule")
        if OmegaConf.is_dict(table) and axis not in table:
            return f"++{key}=null"
    return f"{key}=null"


def _rule_problem(o: Override, name: str, command: CommandLine) -> str | None:
    """The rule table holds its name and the logical axes: ``+``/``++`` may add one (a table of one's own may lack
    it), none is removed; another name only declared unsplit (``+rule.layers=null``: ``other_name_problem``), any
    other key is no axis (the config check refused it only once composed)."""
    keys, (head, *below) = group_keys(["rule"], None), name.split(".")
    if head in keys and below:  # +rule.mlp.x=data: the config check refused it once Hydra had made the folder
        return setting_path_problem(o.arg, ["rule", head], None if o.hydra.type == OverrideType.DEL else o.raw)
    if head in keys:  # rule.name, the table's label (was called "a rule's axis", to leave "unsplit"), or an axis
        return None if o.hydra.type != OverrideType.DEL else (
            f"{o.arg}: a rule's name cannot be removed (the console and metrics.json call the rule by it); drop "
            f"{o.arg}" if head == "name" else
            f"{o.arg}: a rule's axis cannot be removed; set {_null_of(command, o.key, head)} to leave it unsplit")
    adding = o.hydra.type != OverrideType.DEL and "." not in name
    if adding and o.values() and all(other_name_problem(name, value) is None for value in o.values()):
        return None  # another name declared unsplit (a model's own stacked-layer axis), as the library takes it
    near = closest_name(name, keys)
    said = (f"{o.arg}: rule.{name} is not a logical axis" + (f" (did you mean rule.{near}?)" if near else "")
            + f"; the rule table's keys: {', '.join(keys)}")
    if adding and near:
        return Refusal(said, f"rule.{near}={o.raw}", how="; write ")
    return f"{said}; drop {o.arg}" + (f", or declare it unsplit: +rule.{name}=null (only a logical axis is split)"
                                      if adding else "")


def _key_problem(o: Override, section: str, name: str, typed: dict, choice: ModelChoice | None,
                 command: CommandLine) -> str | None:
    """``+``/``++``/``~`` on a setting: ``+`` of one that exists, ``+``/``++`` of one that does not, any ``~``."""
    kind, raw = o.hydra.type, o.raw

    top = not name
    if top:  # a top-level key: seed, strict, ... (a section, devices, is no group with options)
        section, name = "", section
        if name in typed:  # ~devices, +devices=x
            first = settings(typed[name][0])[0]
            fix = f"{name}.{first}={_suggested(command, o, typed, name, first, None)}"
            return Refusal(f"{o.arg}: the {name} section cannot be removed (every run reads it); set its settings "
                           "instead" if kind == OverrideType.DEL else
                           f"{o.arg}: {name} is a section of settings, not one value; set them one by one", fix,
                           how=", e.g. ")
    elif section in OPTIONAL_GROUPS:  # +experiment.quick=1, ++sweep.x=1: the group's options, not a guess
        return (f"{o.arg}: {section} is a group of presets, not a section of settings; its options: "
                f"{', '.join(group_options(section))}; pick one with {section}=<option>")
    elif section not in typed:  # +foo.bar=1: no such section
        name, section, top = section, "", True
    name, *below = name.split(".")  # +train.steps.x=1: the setting it goes under
    nested = bool(below)
    models = choice.models if choice and set(choice.models) <= set(model_fields()) else None
    model = section == "model"
    keys = group_keys([section] if section else [], models if model else None)
    key = f"{section}.{name}" if section else name
    if name in keys and nested:  # under a setting: an item of a list is Hydra's to set (+model.axes_dim.0=4)
        held = [section, name] if section else [name]
        return None if unknown_part([*held, *below], lambda path: group_keys(path, models), list_fields()) is None \
            else setting_path_problem(o.arg, held, None if kind == OverrideType.DEL else raw, list_fields())
    if name in keys:
        if kind == OverrideType.ADD:
            return Refusal(f"{o.arg}: {key} exists (+ adds a key the config lacks)", f"{key}={raw}", how="; write ")
        if kind == OverrideType.DEL:
            return Refusal(f"{o.arg}: a setting cannot be removed (every run reads it); set it instead",
                           f"{key}={_suggested(command, o, typed, section, name, models)}", how=", e.g. ")
        return None  # ++ on a key that exists: Hydra sets it
    if model and any(name in fields for fields in model_fields().values()):
        return None  # another model's key: model_key_problem names the model that has it
    of = f" of {choice.label}" if model and models else f" of {section}" if section else ""
    near = nearest_setting(name, below, keys)  # +mesh.shape.model=2: mesh.model_axis (not the nearest to shape)
    dotted = f"{section}.{near}" if section and near else near
    shown = ", ".join(k for k in keys if not (model and k == "name"))
    if kind == OverrideType.DEL:
        meant = (f" (did you mean {dotted}? it cannot be removed either: set it, e.g. {dotted}="
                 f"{_suggested(command, o, typed, section, near, models)})" if near else "")
        return f"{o.arg}: {key} is not a setting{of}, so there is nothing to remove{meant}; drop {o.arg}"
    said = (f"{o.arg}: {key} is not a setting{of}" + (f" (did you mean {dotted}?)" if near else "")
            + f"; its settings: {shown}; a run takes no other key, so")
    return Refusal(said, f"{dotted}={raw}", how=" write ") if near else f"{said} drop {o.arg}"


def _suggested(command: CommandLine, o: Override, typed: dict, section: str, name: str,
               models: list[str] | None) -> str:
    """The default of setting ``name`` of ``section`` ("" top-level) as typed: what the command's groups compose
    (``experiment=quick``: ``train.steps=20``; the chosen model's own), else the schema's."""
    schemas = [s for s in typed.get(section, [Config]) if name in settings(s)]
    schema = next((s for s in schemas if schema_name(s) in (models or ())), schemas[0])
    return override_literal(command_default(command, o, schema, f"{section}.{name}" if section else name))
