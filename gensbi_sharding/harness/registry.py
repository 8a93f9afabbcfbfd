"""Name -> factory registries for velocity-field models and SBI data sets.

Configs name a model (``model=transformer``) or a data set (``data=slcp``); the
harness looks the name up here. Registration happens at import time of the
modules that define the factories (``harness.models``, ``harness.data``), which
never touch JAX's backend, so importing them is cheap and safe before the
device count is set.

Examples
--------
>>> @register_model("my_mlp")
... def make_my_mlp(*, dim_theta, dim_x, rngs, width=64):
...     ...
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = [
    "register_model",
    "register_data",
    "get_model",
    "get_data",
    "model_names",
    "data_names",
    "is_registered",
    "BUILT_IN_MODELS",
    "unregister",
    "Requirement",
    "GENSBI",
    "import_required",
    "factory_name",
]


@dataclasses.dataclass(frozen=True)
class Requirement:
    """An optional package a registered model needs, and the command that installs it."""

    package: str  # the top-level module, e.g. "gensbi"
    install: str  # e.g. 'pip install -e ".[gensbi]"'
    extra: str  # the gensbi_sharding extra that pulls it


GENSBI = Requirement("gensbi", 'pip install -e ".[gensbi]"', "gensbi")

_MODELS: dict[str, Callable[..., Any]] = {}
_DATA: dict[str, Callable[..., Any]] = {}
_REQUIRES: dict[str, Requirement] = {}  # model name -> optional package it needs
# (kind, name) registered by the harness's own modules. Judged by name, not by the factory's module: a user's alias
# of a built-in factory (register_model("mlp2")(get_model("mlp"))) is the user's to unregister.
_BUILT_IN: set[tuple[str, str]] = set()


def factory_name(factory: Callable[..., Any], *, qualified: bool = False) -> str:
    """The factory as a user wrote it: ``make_gated``, ``functools.partial(make_gated, hidden=32)`` (not its repr,
    ``functools.partial(<function make_gated at 0x7f...>, hidden=32)``).

    Here, not in a check module: the registry names a factory in its own errors, and ``factory_keywords`` in its.

    Parameters
    ----------
    factory : callable
        A function, a ``functools.partial`` of one, or a callable object (named by its class).
    qualified : bool
        With its module (``mypkg.models.make_gated``).

    Returns
    -------
    str
        The name.
    """
    if isinstance(factory, functools.partial):
        bound = [factory_name(factory.func, qualified=qualified), *map(repr, factory.args),
                 *(f"{k}={v!r}" for k, v in factory.keywords.items())]
        return f"functools.partial({', '.join(bound)})"
    name, module = getattr(factory, "__qualname__", None), getattr(factory, "__module__", None)
    if name is None:  # a callable object (its repr, an address, names nothing): its class's
        name, module = f"a {type(factory).__qualname__} object", None
    return f"{module}.{name}" if qualified and module else name


def _describe(factory: Callable[..., Any]) -> str:
    # A functools.partial or a callable object has no __qualname__: named as written, not by its repr (an address).
    return factory_name(factory, qualified=True)


def _register(table: dict[str, Callable[..., Any]], kind: str, name: str, built_in: bool = False):
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} name must be a non-empty string, got {name!r}")

    def decorator(factory: Callable[..., Any]) -> Callable[..., Any]:
        if name in table and table[name] is not factory:
            raise ValueError(f"{kind} {name!r} is already registered (by {_describe(table[name])}); pick another name")
        table[name] = factory
        if built_in:
            _BUILT_IN.add((kind, name))
        return factory

    return decorator


def _lookup(table: dict[str, Callable[..., Any]], kind: str, name: str) -> Callable[..., Any]:
    _load_builtins()
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(table)) or "(none)"
        raise ValueError(
            f"unknown {kind} {name!r}; known {'data sets' if kind == 'data' else kind + 's'}: {known}. "
            f"Register a new one with @register_{kind}({name!r}).") from None


#: The models ``harness.models`` registers (tests/test_models.py checks they are the same), so that a check of a
#: built-in name (every run's ``validate``, and the check of a refusal's suggested value) imports neither it nor JAX.
BUILT_IN_MODELS = ("flux1", "mlp", "simformer", "transformer")


def _built_in_names(kind: str) -> tuple[str, ...]:
    from gensbi_sharding.harness.tasks import TASKS  # pure Python: harness.data registers one per task

    return BUILT_IN_MODELS if kind == "model" else TASKS


def _load_builtins() -> None:
    # Imported lazily so that this module stays importable from the modules it registers.
    from gensbi_sharding.harness import data, models  # noqa: F401


def register_model(name: str, *, requires: Requirement | None = None, built_in: bool = False
                   ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a model factory under ``name``.

    The factory is called as ``factory(dim_theta=..., dim_x=..., rngs=..., partition_axis=...,
    **hparams)`` (``partition_axis``: the activation layout, None without a mesh; ``hparams``:
    the model's config section but ``name`` and ``init``) and returns a Flax NNX module
    ``v(theta_t, x, t) -> velocity`` whose parameters carry logical axis annotations
    (``gensbi_sharding.axes``). ``requires`` names an
    optional package the factory imports when called (never at registration):
    ``get_model`` checks it is installed and otherwise says how to install it. ``built_in``: for the
    harness's own models only (``unregister`` refuses them).

    Raises
    ------
    ValueError
        If ``name`` is empty or already taken by another factory.
    """
    register = _register(_MODELS, "model", name, built_in)

    def decorator(factory: Callable[..., Any]) -> Callable[..., Any]:
        register(factory)
        if requires is not None:
            _REQUIRES[name] = requires
        return factory

    return decorator


def _missing(requirement: Requirement, model: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(
        f"model={model} needs {requirement.package}, which is not installed: {requirement.install} "
        f"(the gensbi_sharding[{requirement.extra}] extra)", name=requirement.package)


def import_required(module: str, model: str, requirement: Requirement):
    """Import ``module`` of an optional package for model ``model``.

    Raises
    ------
    ModuleNotFoundError
        One line naming the model, the package and the install command, when the package
        is missing.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] == requirement.package:
            raise _missing(requirement, model) from None
        raise


def register_data(name: str, *, built_in: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a data-set factory under ``name`` (see ``harness.data``); ``built_in``: for the harness's own
    data sets only (``unregister`` refuses them).

    Raises
    ------
    ValueError
        If ``name`` is empty or already taken by another factory.
    """
    return _register(_DATA, "data", name, built_in)


def get_model(name: str) -> Callable[..., Any]:
    """The model factory registered as ``name``.

    Raises
    ------
    ValueError
        Listing the known names, for an unknown ``name``.
    ModuleNotFoundError
        Naming the install command, when the optional package the model needs is missing.
    """
    factory = _lookup(_MODELS, "model", name)
    requirement = _REQUIRES.get(name)
    # find_spec looks the package up without importing it (nor starting JAX's backend).
    if requirement is not None and importlib.util.find_spec(requirement.package) is None:
        raise _missing(requirement, name)
    return factory


def get_data(name: str) -> Callable[..., Any]:
    """The data-set factory registered as ``name``; ``ValueError`` listing known names otherwise."""
    return _lookup(_DATA, "data", name)


def model_names() -> tuple[str, ...]:
    """Names of every registered model, sorted."""
    _load_builtins()
    return tuple(sorted(_MODELS))


def data_names() -> tuple[str, ...]:
    """Names of every registered data set, sorted."""
    _load_builtins()
    return tuple(sorted(_DATA))


def is_registered(kind: str, name: str) -> bool:
    """Whether a ``kind`` factory is registered as ``name``; a built-in name is known without importing the
    modules that register it (``harness.models``, ``harness.data``: JAX, Flax, optax), any other name after.

    Parameters
    ----------
    kind : {"model", "data"}
        The registry: ``register_model``'s or ``register_data``'s.
    name : str
        E.g. ``"mlp"`` or ``"two_moons"``.

    Returns
    -------
    bool
    """
    table = _MODELS if kind == "model" else _DATA
    if name in table or name in _built_in_names(kind):
        return True
    _load_builtins()  # a name of the user's own registers where harness.models or harness.data imports it
    return name in table


def unregister(kind: str, name: str) -> Callable[..., Any]:
    """Remove your factory registered as ``name``, so that another can take the name (a notebook cell run again with
    its factory edited, a test that registers one for itself); a built-in one stays.

    Parameters
    ----------
    kind : {"model", "data"}
        The registry: ``register_model``'s or ``register_data``'s.
    name : str
        The name it was registered under.

    Returns
    -------
    callable
        The factory removed.

    Raises
    ------
    ValueError
        For another ``kind``, a name not registered (listing the known names) or a built-in's (``harness.models``,
        ``harness.data``: every run may need it).
    """
    if kind not in ("model", "data"):
        raise ValueError(f"kind={kind!r} is no registry: pass 'model' or 'data'")
    table = _MODELS if kind == "model" else _DATA
    factory = _lookup(table, kind, name)
    if (kind, name) in _BUILT_IN:
        raise ValueError(f"{kind} {name!r} is built in ({_describe(factory)}): it stays registered; register yours "
                         "under another name")
    del table[name]
    if kind == "model":
        _REQUIRES.pop(name, None)
    return factory
