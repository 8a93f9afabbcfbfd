"""``list_override_problem(args)``: a scalar typed on the command line where the schema wants a list.

Hydra rejects ``eval.observations=3`` only while merging it ("Invalid value assigned:
int is not a ListConfig, list or tuple"), naming no fix. The list-typed keys are read
from the structured-config dataclasses of ``harness/config.py`` (every model schema:
the model is chosen at compose time), so a new ``List[...]`` field is covered as it
is added. Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, QuotedString, ValueType
from omegaconf import ListConfig, ValidationError

from gensbi_sharding.harness.config import Config, ModelConfig
from gensbi_sharding.harness.model_checks import ID_STRATEGIES_1D

__all__ = ["ListField", "list_fields", "list_override_problem"]


class ListField(typing.NamedTuple):
    """A list-typed key: its element type, a value of it to show, and the model names whose schema has it."""

    element: type
    example: str
    models: frozenset


def _list_element(hint) -> type | None:
    """The element type of ``List[T]`` or ``Optional[List[T]]`` (``Any`` as ``object``); None for other types."""
    options = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    for option in options:
        if typing.get_origin(option) is list:
            element = (typing.get_args(option) or (object,))[0]
            return element if isinstance(element, type) else object
    return None


def _schemas(cls: type) -> list[type]:
    """``cls`` and, for the model group, every model schema (``ModelConfig``'s subclasses, recursively)."""
    found, todo = [], [cls]
    while todo:
        found.append(todo.pop())
        todo.extend(found[-1].__subclasses__() if issubclass(cls, ModelConfig) else ())
    return found


def list_fields(root: type = Config, prefix: str = "") -> dict[str, ListField]:
    """The dotted keys whose schema type is a list (``List[T]``, ``Optional[List[T]]``).

    Parameters
    ----------
    root : type
        A structured-config dataclass; its dataclass-typed fields are walked as groups.
    prefix : str
        The dotted path of ``root`` (empty for the whole config).

    Returns
    -------
    dict of str to ListField
        ``{"eval.observations": ListField(int, "1", frozenset()), "model.axes_dim": ListField(int, "8,0",
        frozenset({"flux1"})), ...}``: the example is the schema's default (else 1 or x); the model
        names are empty outside the model group.
    """
    found: dict[str, ListField] = {}
    for schema in _schemas(root):
        hints = typing.get_type_hints(schema)  # config.py's annotations are strings (postponed evaluation)
        model = next((f.default for f in dataclasses.fields(schema) if f.name == "name"), None)
        names = frozenset({model}) if issubclass(schema, ModelConfig) and isinstance(model, str) else frozenset()
        for f in dataclasses.fields(schema):
            key, element = f"{prefix}{f.name}", _list_element(hints[f.name])
            if dataclasses.is_dataclass(hints[f.name]):
                for sub, field in list_fields(hints[f.name], key + ".").items():
                    found[sub] = field._replace(models=field.models | found[sub].models) if sub in found else field
            elif element is not None:
                default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
                example = ",".join(map(str, default)) if default else {int: "1", float: "1.0"}.get(element, "x")
                found[key] = ListField(element, example, names | (found[key].models if key in found else frozenset()))
    return found


def _scalar(value) -> bool:
    """A value Hydra would assign to a list key as is: not a list, dict, null or interpolation.

    A quoted ``"[a]"`` is one string (a scalar); one spelling a list of the right type is ``_quoted_list``'s.
    """
    return not (value is None or isinstance(value, (list, dict)) or (isinstance(value, str) and "${" in value))


def _quoted_list(value, parser, element: type) -> str | None:
    """The list a quoted value spells (``"[3]"`` -> ``[3]``): quotes make it one string, which no list key takes.

    None when the text is no list of ``element`` values (``"[a]"`` for ints): showing it as the fix would be refused.
    """
    if not isinstance(value, str) or "${" in value or not value.strip().startswith("["):
        return None
    try:
        parsed = parser.parse_override(f"key={value.strip()}").value()
        ListConfig(parsed, element_type=typing.Any if element is object else element)
    except Exception:  # not a list Hydra could read, or not of the element type
        return None
    return value.strip()


def _text(value):
    """A swept value as typed: a quoted one (Hydra's ``QuotedString``) as its text, others as they are."""
    return value.text if isinstance(value, QuotedString) else value


def _as_list(value) -> str:
    """A swept value written as the list a job should get: ``3`` -> ``[3]``, ``[1,2]`` -> ``[1,2]``."""
    inner = value if isinstance(value, list) else [value]
    return "[" + ",".join(map(str, inner)) + "]"


def list_override_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of the first override giving a list-typed key a scalar; None when there is none.

    Refused: a plain, ``+`` or ``++`` assignment of one scalar (``eval.observations=3``,
    ``++eval.observations=3``, ``...=bogus``; the fix keeps the prefix typed) and a sweep
    any of whose values is a scalar (``-m eval.observations=3,4``, ``choice(3,4)``,
    ``range(1,3)``: every job would get a scalar), and a quoted list (``'eval.observations="[3]"'``:
    the quotes make it one string; the fix is the list unquoted). Lists, ``null``, interpolations, sweeps
    of lists (``[1],[2]``), ``~`` overrides, ``hydra.*`` keys, flags and anything Hydra's
    grammar rejects are left to Hydra and the config checks. A model key is left alone when
    ``model=<name>`` picks a model whose schema lacks it (Hydra names the missing key); with
    no ``model=`` given, the message names the model whose key it is.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        ``"eval.observations=3: a list is expected; write eval.observations=[3]"``.
    """
    fields, parser = list_fields(), OverridesParser.create()
    overrides = []
    for arg in args:
        if "=" not in arg or arg.startswith("-"):  # flags (-m, --cfg job, --help) and their values
            continue
        try:
            overrides.append((parser.parse_override(arg), *arg.split("=", 1)))
        except Exception:  # not Hydra's grammar: Hydra names it
            continue
    chosen = {o.value() for o, _, _ in overrides if o.key_or_group == "model" and o.type == OverrideType.CHANGE
              and o.value_type == ValueType.ELEMENT and isinstance(o.value(), str)}
    sweeps = (ValueType.SIMPLE_CHOICE_SWEEP, ValueType.CHOICE_SWEEP, ValueType.RANGE_SWEEP)
    for override, typed, raw in overrides:  # typed: the key as written, with its + or ++
        key = override.key_or_group
        if (key not in fields or override.type == OverrideType.DEL or override.package is not None
                or override.value_type not in (ValueType.ELEMENT, *sweeps)):
            continue
        field = fields[key]
        if field.models and chosen and not chosen & field.models:  # e.g. model=mlp model.axes_dim=8
            continue
        # with no model= given the default model may lack the key: name the model it belongs to
        owner = (f" a key of model={'/'.join(sorted(field.models))} (add model={sorted(field.models)[0]} "
                 "unless your experiment picks it);" if field.models and not chosen else "")
        if override.value_type in sweeps:
            values = [_text(v) for v in override.sweep_iterator()]
            quoted = [_quoted_list(v, parser, field.element) for v in values]
            if any(quoted):  # -m 'eval.observations="[1]","[2]"': every job would get a string
                each = ",".join(q or _as_list(v) for q, v in zip(quoted, values))
                return (f"{typed}={raw}:{owner} the quotes make {next(filter(None, quoted))} a string, and a list "
                        f"is expected; write {typed}={each} (quote the whole override for the shell: "
                        f"'{typed}={each}')")
            if any(map(_scalar, values)):  # every job would be given that scalar
                each = ",".join(_as_list(v) for v in values)
                flat = _as_list([x for v in values for x in (v if isinstance(v, list) else [v])])
                return (f"{typed}={raw}:{owner} a sweep of {key} gives each job one value, and a list is "
                        f"expected; write {typed}={each} (one job per value) or {typed}={flat} (one job, one list)")
            continue
        value = override.value()
        if (listed := _quoted_list(value, parser, field.element)) is not None:  # 'eval.observations="[3]"'
            return (f"{typed}={raw}:{owner} the quotes make {listed} a string, and a list is expected; write "
                    f"{typed}={listed} (quote the whole override for the shell: '{typed}={listed}')")
        if not _scalar(value):
            continue
        shown = value if isinstance(value, str) and raw.strip()[:1] in "'\"" else raw  # "3": [3], not ["3"]
        if key == "model.id_embedding_strategy":
            strategy = value if value in ID_STRATEGIES_1D else "absolute"
            return (f"{typed}={raw}:{owner} a list is expected: give two of {', '.join(ID_STRATEGIES_1D)} "
                    f"(parameters, observations), e.g. {typed}=[{strategy},{strategy}]")
        try:  # OmegaConf's own conversion: "3" is an int, true and 1.5 are not (any value is an object)
            ListConfig([value], element_type=typing.Any if field.element is object else field.element)
        except ValidationError:  # [true] would be refused in turn: show a value of the element type
            name = field.element.__name__
            return (f"{typed}={raw}:{owner} a list of {name} values is expected and {raw!r} is not one; "
                    f"write e.g. {typed}=[{field.example}]")
        return f"{typed}={raw}:{owner} a list is expected; write {typed}=[{shown}]"
    return None

