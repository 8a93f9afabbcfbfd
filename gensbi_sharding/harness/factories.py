"""Registration of velocity-field models and SBI data sets: the tables ``registry`` looks names up in.

``harness.models`` and ``harness.data`` register their factories here at import; ``registry`` (the lookups:
``get_model``, ``get_data``, ...) imports them to load the built-ins, and re-exports ``register_model`` /
``register_data`` as the documented entry. Below both, so that each import points one way: the modules that
register once imported ``registry``, which imported them back (an import cycle).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["Requirement", "GENSBI", "factory_name", "register_model", "register_data", "import_required",
           "missing_package", "MODELS", "DATA", "REQUIRES", "BUILT_IN"]


@dataclasses.dataclass(frozen=True)
class Requirement:
    """An optional package a registered model needs, and the command that installs it."""

    package: str  # the top-level module, e.g. "gensbi"
    install: str  # e.g. 'pip install -e ".[gensbi]"'
    extra: str  # the gensbi_sharding extra that pulls it


GENSBI = Requirement("gensbi", 'pip install -e ".[gensbi]"', "gensbi")

#: The registered factories by name (``registry``'s lookups read them; ``register_model`` / ``register_data`` fill
#: them), the optional package a model needs, and the names the harness's own modules registered.
MODELS: dict[str, Callable[..., Any]] = {}
DATA: dict[str, Callable[..., Any]] = {}
REQUIRES: dict[str, Requirement] = {}  # model name -> optional package it needs
# (kind, name) registered by the harness's own modules. Judged by name, not by the factory's module: a user's alias
# of a built-in factory (register_model("mlp2")(get_model("mlp"))) is the user's to unregister.
BUILT_IN: set[tuple[str, str]] = set()


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
            BUILT_IN.add((kind, name))
        return factory

    return decorator


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
    register = _register(MODELS, "model", name, built_in)

    def decorator(factory: Callable[..., Any]) -> Callable[..., Any]:
        register(factory)
        if requires is not None:
            REQUIRES[name] = requires
        return factory

    return decorator


def missing_package(requirement: Requirement, model: str) -> ModuleNotFoundError:
    """The error for model ``model`` whose optional package is not installed: one line naming the model, the package
    and the install command (raised by ``import_required`` and ``registry.get_model``).

    Parameters
    ----------
    requirement : Requirement
        The package the model needs.
    model : str
        The model's registered name.

    Returns
    -------
    ModuleNotFoundError
        With ``name`` the missing package, as Python's own has it.
    """
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
            raise missing_package(requirement, model) from None
        raise


def register_data(name: str, *, built_in: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a data-set factory under ``name`` (see ``harness.data``); ``built_in``: for the harness's own
    data sets only (``unregister`` refuses them).

    Raises
    ------
    ValueError
        If ``name`` is empty or already taken by another factory.
    """
    return _register(DATA, "data", name, built_in)
