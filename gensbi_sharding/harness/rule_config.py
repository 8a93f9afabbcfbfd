"""The rule, mesh and activation sections of a config as the library's objects.

``rule_table`` / ``as_rule`` (the library's ``Rule``), ``check_table_against_mesh``,
``mesh_spec`` (for ``resolve_mesh``) and ``partition_axis_from_config`` (``PartitionAxis``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from gensbi_sharding.rules import LOGICAL_AXES, RULES, Rule
from gensbi_sharding.harness.config import ActivationConfig, ConfigError, require
from gensbi_sharding.harness.hints import closest_name, mesh_axis_fix, override_literal
from gensbi_sharding.harness.refusal import Refusal

if TYPE_CHECKING:  # imported where used: it imports JAX, which launch.py's imports (this module's) go without
    from gensbi_sharding.activations import PartitionAxis
    from jax.sharding import Mesh
    from gensbi_sharding.rules import RuleTable

__all__ = ["rule_table", "as_rule", "check_table_against_mesh", "mesh_spec", "partition_axis_from_config",
           "activation_axes_problem", "other_name_problem", "rule_problem", "MESH_AXES"]

#: The axes of every mesh the harness builds (``make_mesh``'s, under mesh=auto and mesh=dict alike): a setting
#: naming another is refused with the config, before any device starts or any simulation (``validate``).
MESH_AXES = ("data", "model")


def mesh_spec(mesh: DictConfig) -> Any:
    """The contract's mesh spec for ``resolve_mesh``: None, "auto" or a mapping."""
    if mesh.spec is None:
        return None
    if mesh.spec == "auto":
        return "auto"
    return {"model_axis": mesh.model_axis, "devices": mesh.devices}


def rule_table(rule: Mapping[str, Any] | str) -> tuple[str, dict[str, Any]]:
    """``(name, table)`` of a rule config: a mapping of logical axes plus an optional ``name``.

    Table values are a mesh axis name, a list of mesh axis names, or null. Whether
    the mesh has those axes is checked later, against the resolved mesh
    (``check_table_against_mesh``).

    Raises
    ------
    ConfigError
        For a key outside ``LOGICAL_AXES`` not declared unsplit (``other_name_problem``), or a value of another type.
    """
    if isinstance(rule, str):  # rule given as a bare name, e.g. from Python
        require(rule in RULES, f"unknown rule {rule!r}; choose one of {', '.join(RULES)} "
                              "or write a table in conf/rule/")
        return rule, dict(RULES[rule])
    require(isinstance(rule, (DictConfig, dict)),
           f"rule must be a mapping of logical axes to mesh axes, got {rule!r}")
    raw = OmegaConf.to_container(rule, resolve=True) if isinstance(rule, DictConfig) else dict(rule)
    name = raw.pop("name", None) or _chosen_file()
    require(isinstance(name, str), f"rule.name={override_literal(name)} must be one word naming the rule (the console "
                                   f"and metrics.json call the rule by it): e.g. name: my_rule in the rule's file")
    table: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in LOGICAL_AXES:  # another name (a model's own stacked-layer axis): only declared unsplit
            require((problem := other_name_problem(key, value)) is None, problem)
            table[key] = None
            continue
        if isinstance(value, (list, tuple, ListConfig)):
            require(len(value) > 0 and all(isinstance(v, str) for v in value),
                   Refusal(f"rule.{key}={override_literal(list(value))}: a list must hold mesh axis names",
                           f"rule.{key}=model", how="; e.g. ", after=f", or rule.{key}=null (unsplit)"))
            require(len(set(value)) == len(value), Refusal(f"rule.{key}={override_literal(list(value))} names a mesh "
                                                           "axis twice", f"rule.{key}={_once(value)}",
                                                           how="; list each mesh axis once: set "))
            value = tuple(value)
        else:
            require(value is None or isinstance(value, str),
                   Refusal(f"rule.{key}={override_literal(value)} must be a mesh axis name, a list of them, or null",
                           f"rule.{key}=data", how="; e.g. ", after=f", or rule.{key}=null (unsplit)"))
        table[key] = value
    for key in LOGICAL_AXES:
        table.setdefault(key, None)
    if table != dict(RULES[name]) if name in RULES else _file_overridden(name, table):  # rule=fsdp rule.mlp=model
        name = f"{name}+overrides"
    return name, table


def _file_overridden(name: str, table: dict[str, Any]) -> bool:
    """Whether the command line gave rule file ``rule=<option>`` another table than its file's (rule=my_rule
    ++rule.heads=model was reported as rule 'my_rule', the file's name for a table the file does not hold)."""
    from pathlib import Path

    from hydra.core.hydra_config import HydraConfig

    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    typed = OmegaConf.select(hydra, "overrides.task", default=None) if hydra is not None else None
    if not any(str(o).lstrip("+~").startswith("rule.") for o in typed or ()):
        return False  # the common case, and a config set by hand: no override, the file's own table
    choice = OmegaConf.select(hydra, "runtime.choices.rule", default=None)
    for source in OmegaConf.select(hydra, "runtime.config_sources", default=None) or ():
        path = Path(str(source.path)) / "rule" / f"{choice}.yaml"
        if source.schema == "file" and path.is_file():
            raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
            if not isinstance(raw, dict) or "defaults" in raw:
                return True  # a file built on another: an override typed is taken to change it
            own = {key: tuple(v) if isinstance(v, list) else v if key in LOGICAL_AXES else None
                   for key, v in raw.items() if key != "name"}
            return {**dict.fromkeys(LOGICAL_AXES), **own} != table  # rule.name=x alone renames it: no mark
    return True


def _chosen_file() -> str:
    """The ``rule=`` option a table without ``name:`` came from, so no such file is reported as "custom"."""
    from hydra.core.hydra_config import HydraConfig

    # a config set by hand (a test, compose()) may have no runtime.choices
    known = HydraConfig.initialized()
    choice = OmegaConf.select(HydraConfig.get(), "runtime.choices.rule", default=None) if known else None
    return choice if isinstance(choice, str) and choice else "custom"


def other_name_problem(key: Any, value: Any) -> str | None:
    """Why ``rule.<key>``, a name outside ``LOGICAL_AXES``, cannot be in a rule table; None where it may be.

    As the library's tables take it (``rules.check_table``): another name, such as the stacked-layer axis a model of
    one's own annotates (``transform_metadata={nnx.PARTITION_NAME: "layers"}``), may be declared unsplit (null, or
    ``[]``), so that model's other dimensions split; only a logical axis is split over a mesh axis. A name close to a
    logical axis (``embd``) is refused as a typo of it: declared unsplit, it would leave that axis as it was.

    Parameters
    ----------
    key : Any
        The table's key (``rule.<key>``).
    value : Any
        Its value: None or an empty list declares it unsplit.

    Returns
    -------
    str or None
        One line naming the key, the logical axes and the fix.
    """
    valid = f"rule.{key} is not a logical axis; valid keys: {', '.join(LOGICAL_AXES)} (and name)"
    near = closest_name(key, LOGICAL_AXES) if isinstance(key, str) else None
    if near is not None:
        return f"{valid}; did you mean rule.{near}?"
    if isinstance(key, str) and key and (value is None or (isinstance(value, (list, tuple, ListConfig)) and not value)):
        return None
    return (f"{valid}; another name (a stacked-layer axis of a model of one's own, say) can only be declared "
            f"unsplit: rule.{key}=null" if isinstance(key, str) and key else f"{valid}; a key names a logical axis")


def as_rule(name: str, table: dict[str, Any]) -> Rule:
    """The library's ``Rule`` for ``rule_table``'s ``(name, table)``.

    A table equal to the contract's rule of that name is that rule (placed with the
    contract's semantics, e.g. "replicated" ignores annotations); any other is a table.
    """
    return Rule(name, dict(table))  # Rule derives builtin: name in RULES with its table


def check_table_against_mesh(name: str, table: dict[str, Any], mesh_axes: tuple[str, ...]) -> None:
    """Every mesh axis a rule table names must exist on the resolved mesh.

    Raises
    ------
    ConfigError
        Naming the entry, the mesh's axes and the valid values.
    """
    for key, value in table.items():
        for axis in (value,) if isinstance(value, str) else (value or ()):
            valid = ", ".join(mesh_axes) or "(none: no mesh)"
            require(axis in mesh_axes, Refusal(
                f"rule.{key}={override_literal(value if isinstance(value, str) else list(value))} (rule {name}) "
                f"names mesh axis {override_literal(axis)}, which the mesh lacks; valid values: {valid} or null",
                f"rule.{key}={mesh_axis_fix(value, mesh_axes)}"))


def rule_problem(rule: Mapping[str, Any] | str, mesh_axes: tuple[str, ...] | None) -> str | None:
    """The run's refusal of the rule config ``rule`` (``rule_table``, then ``check_table_against_mesh`` against
    ``mesh_axes``; None: no mesh), as one line; None where the run takes it, or where only the run can tell (an
    interpolation: ``validate`` names it).

    Parameters
    ----------
    rule : mapping or str
        A rule config: a mapping of logical axes (a rule file, as composed) or a built-in rule's name.
    mesh_axes : tuple of str or None
        The mesh's axes (``MESH_AXES`` under any mesh the harness builds).

    Returns
    -------
    str or None
    """
    try:
        name, table = rule_table(rule)
        if mesh_axes is not None:
            check_table_against_mesh(name, table, mesh_axes)
    except ConfigError as err:
        return err.args[0] if err.args else str(err)  # a Refusal keeps its fix
    except Exception:  # noqa: BLE001 (e.g. ${...} that does not resolve: validate's first check names it)
        return None
    return None


#: ``activation.strategy`` values: from the weight rule, ``PartitionAxis()`` defaults, or none.
ACTIVATION_STRATEGIES = ("rule", "fixed", "none")
AUTO = "auto"  # an activation field left to the strategy


def partition_axis_from_config(cfg: Mapping[str, Any], rule: str | RuleTable | Rule,
                               mesh: Mesh | None) -> PartitionAxis | None:
    """The strategy an ``activation`` config selects: ``strategy`` plus per-field overrides.

    ``strategy`` is "rule" (``PartitionAxis.for_rule(rule, mesh)``), "fixed"
    (``PartitionAxis()``) or "none" (no constraints: returns None). Every other key is
    a ``PartitionAxis`` field; a value other than "auto" (None, a mesh axis or a list
    of them) replaces what the strategy chose. Without a mesh, returns None.

    Raises
    ------
    ValueError
        For an unknown strategy or key, or a value that does not resolve on ``mesh``.
    """
    strategy = cfg.get("strategy", "rule")
    if strategy not in ACTIVATION_STRATEGIES:
        raise ValueError(Refusal(f"activation strategy {strategy!r} is not one of {', '.join(ACTIVATION_STRATEGIES)}",
                                 "activation.strategy=rule", how="; e.g. "))
    fields = {k: v for k, v in cfg.items() if k != "strategy"}
    # PartitionAxis's fields, as the config's schema lists them: validate's check without a mesh imports no JAX
    names = [f.name for f in dataclasses.fields(ActivationConfig) if f.name != "strategy"]
    unknown = [k for k in fields if k not in names]
    if unknown:
        raise ValueError(f"activation key {unknown[0]!r} is not a PartitionAxis field; valid keys: "
                         f"strategy, {', '.join(names)}")
    for key, value in fields.items():  # known without a mesh: refused at validation, before any work
        if isinstance(value, (list, tuple)) and not value:  # refused here, before the run makes its folder
            raise ValueError(Refusal(f"{key}=[] lists no mesh axis", f"activation.{key}=null", how="; for none set ",
                                     after=" (unsplit)"))
        if isinstance(value, (list, tuple)) and len(set(value)) != len(value):
            raise ValueError(Refusal(f"{key}={override_literal(list(value))} names a mesh axis twice",
                                     f"activation.{key}={_once(value)}", how="; list each mesh axis once: set "))
    if strategy == "none" or mesh is None:
        return None
    from gensbi_sharding.activations import PartitionAxis  # not at the top (TYPE_CHECKING's note)

    base = PartitionAxis.for_rule(rule, mesh) if strategy == "rule" else PartitionAxis()
    changes = {k: v for k, v in fields.items() if not (isinstance(v, str) and v == AUTO)}
    if (problem := activation_axes_problem(changes, tuple(mesh.axis_names))) is not None:
        raise ValueError(problem)
    return base._replace(**changes).resolve(mesh)


def activation_axes_problem(fields: Mapping[str, Any], mesh_axes: tuple[str, ...]) -> str | None:
    """The refusal of the first ``activation`` field naming a mesh axis outside ``mesh_axes`` (None: none does).

    ``fields``: ``PartitionAxis`` field -> a mesh axis, a list of them, None or "auto" (the strategy's: not checked).
    Named as the override to type, with a value that works.
    """
    for key, value in fields.items():
        if isinstance(value, str) and value == AUTO:
            continue
        lacking = [a for a in ((value,) if isinstance(value, str) else value or ()) if a not in mesh_axes]
        if lacking:
            fix = mesh_axis_fix(value, mesh_axes)
            return Refusal(f"{key}={override_literal(value)} names mesh axis {override_literal(lacking[0])}, which the "
                           f"mesh lacks (axes: {', '.join(mesh_axes)})", f"activation.{key}={fix}",
                           after="" if fix == "null" else " (or null: unsplit)")
    return None


def _once(axes: Any) -> str:
    """A list of mesh axes with each named once, as an override value: ``[model,model]`` -> ``model``."""
    kept = list(dict.fromkeys(axes))
    return kept[0] if len(kept) == 1 else "[" + ",".join(kept) + "]"
