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

from collections.abc import Callable
from typing import Any

__all__ = [
    "register_model",
    "register_data",
    "get_model",
    "get_data",
    "model_names",
    "data_names",
]

_MODELS: dict[str, Callable[..., Any]] = {}
_DATA: dict[str, Callable[..., Any]] = {}


def _register(table: dict[str, Callable[..., Any]], kind: str, name: str):
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} name must be a non-empty string, got {name!r}")

    def decorator(factory: Callable[..., Any]) -> Callable[..., Any]:
        if name in table and table[name] is not factory:
            raise ValueError(
                f"{kind} {name!r} is already registered (by {table[name].__module__}."
                f"{table[name].__qualname__}); pick another name")
        table[name] = factory
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


def _load_builtins() -> None:
    # Imported lazily so that this module stays importable from the modules it registers.
    from gensbi_sharding.harness import data, models  # noqa: F401


def register_model(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a model factory under ``name``.

    The factory is called as ``factory(dim_theta=..., dim_x=..., rngs=..., **hparams)``
    and returns a Flax NNX module ``v(theta_t, x, t) -> velocity`` whose parameters
    carry logical axis annotations (``gensbi_sharding.axes``).

    Raises
    ------
    ValueError
        If ``name`` is empty or already taken by another factory.
    """
    return _register(_MODELS, "model", name)


def register_data(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a data-set factory under ``name`` (see ``harness.data``).

    Raises
    ------
    ValueError
        If ``name`` is empty or already taken by another factory.
    """
    return _register(_DATA, "data", name)


def get_model(name: str) -> Callable[..., Any]:
    """The model factory registered as ``name``; ``ValueError`` listing known names otherwise."""
    return _lookup(_MODELS, "model", name)


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
