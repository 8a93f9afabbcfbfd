"""Name -> factory registries for velocity-field models and SBI data sets.

Configs name a model (``model=transformer``) or a data set (``data=slcp``); the
harness looks the name up here. Registration happens at import time of the
modules that define the factories (``harness.models``, ``harness.data``), which
never touch JAX's backend, so importing them is cheap and safe before the
device count is set. They register in ``factories`` (the tables, below this module and them);
``register_model`` / ``register_data`` are named here too, the documented entry.

Examples
--------
>>> @register_model("my_mlp")
... def make_my_mlp(*, dim_theta, dim_x, rngs, width=64):
...     ...
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from gensbi_sharding.harness.factories import (BUILT_IN, DATA, GENSBI, MODELS, REQUIRES, Requirement, factory_name,
                                               import_required, missing_package, register_data, register_model)

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


def get_model(name: str) -> Callable[..., Any]:
    """The model factory registered as ``name``.

    Raises
    ------
    ValueError
        Listing the known names, for an unknown ``name``.
    ModuleNotFoundError
        Naming the install command, when the optional package the model needs is missing.
    """
    factory = _lookup(MODELS, "model", name)
    requirement = REQUIRES.get(name)
    # find_spec looks the package up without importing it (nor starting JAX's backend).
    if requirement is not None and importlib.util.find_spec(requirement.package) is None:
        raise missing_package(requirement, name)
    return factory


def get_data(name: str) -> Callable[..., Any]:
    """The data-set factory registered as ``name``; ``ValueError`` listing known names otherwise."""
    return _lookup(DATA, "data", name)


def model_names() -> tuple[str, ...]:
    """Names of every registered model, sorted."""
    _load_builtins()
    return tuple(sorted(MODELS))


def data_names() -> tuple[str, ...]:
    """Names of every registered data set, sorted."""
    _load_builtins()
    return tuple(sorted(DATA))


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
    table = MODELS if kind == "model" else DATA
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
    table = MODELS if kind == "model" else DATA
    factory = _lookup(table, kind, name)
    if (kind, name) in BUILT_IN:
        raise ValueError(f"{kind} {name!r} is built in ({factory_name(factory, qualified=True)}): it stays registered; "
                         "register yours under another name")
    del table[name]
    if kind == "model":
        REQUIRES.pop(name, None)
    return factory
