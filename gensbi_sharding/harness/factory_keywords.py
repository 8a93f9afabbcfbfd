"""The keywords the run calls a model of one's own with, checked against its factory's signature before any folder.

``model_builder`` (the one call, for ``state.builder`` and the pre-run checks) calls every model's factory as
``factory(dim_theta=..., dim_x=..., rngs=..., partition_axis=..., **hparams)`` (``hparams``: ``model_settings``, the
model's section but ``name`` and ``init``). A factory registered without one of them
(``def make_gated(*, dim_theta, dim_x, rngs, hidden=64)``) failed once the run's folder was made and the data
simulated: "[ERROR] TypeError: make_gated() got an unexpected keyword argument 'partition_axis'", then "error after
11.8 s; traceback in outputs/.../error.txt". A data set's factory of one's own is called with ``DATA_KEYWORDS`` and
failed alike (``data_factory_keyword_problem``). ``partition_axis`` is passed to every factory rather than only to those
that take it: a model that drops it would ignore ``activation=`` silently, its activations laid out by XLA alone, so
the factory is told to take it (None without a mesh), as docs/gensbi_models.md says. The harness's own models are
tested to take them all. Importing this module imports no JAX.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import HARNESS_FIELDS
from gensbi_sharding.harness.registry import factory_name, get_model

if TYPE_CHECKING:  # imports JAX, which this module's importers (launch.py's checks) go without
    from gensbi_sharding import PartitionAxis

__all__ = ["RUN_KEYWORDS", "DATA_KEYWORDS", "HARNESS_FIELDS", "model_settings", "model_builder",
           "factory_keyword_problem", "data_factory_keyword_problem", "own_data_problem"]

#: The keywords every model factory is called with besides its settings, and what each gives it.
RUN_KEYWORDS = {
    "dim_theta": "the task's parameter dimension",
    "dim_x": "the task's observation dimension",
    "rngs": "the run's nnx.Rngs(seed)",
    "partition_axis": "the activation layout that activation= and the rule give, None without a mesh",
}


def model_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords ``model`` (the run's ``cfg.model``) gives its factory: every key but ``HARNESS_FIELDS``, as
    plain values (lists, not ``ListConfig``). The one place they are read: ``model_builder`` calls the factory
    with them, the memory check traces it with them."""
    plain = OmegaConf.to_container(model) if OmegaConf.is_config(model) else dict(model)
    return {k: v for k, v in plain.items() if k not in HARNESS_FIELDS}


def model_builder(cfg: DictConfig, *, dim_theta: int, dim_x: int, partition_axis: PartitionAxis | None,
                  settings: dict | None = None) -> Callable[[], Any]:
    """``build() -> model``: the one call of ``cfg.model``'s factory, with ``RUN_KEYWORDS`` and its settings, as
    ``state.builder`` makes the run's model (and its optimizer) and the pre-run checks trace it (``state_check``'s
    strict check, ``memory_check``'s estimate).

    ``build`` makes its own ``nnx.Rngs(cfg.seed)``. ``settings``: the factory's keywords
    (``factory_keywords.model_settings(cfg.model)`` where None), e.g. the memory check's smaller depth.
    """
    from flax import nnx

    factory = get_model(cfg.model.name)
    hparams = model_settings(cfg.model) if settings is None else settings
    return lambda: factory(dim_theta=dim_theta, dim_x=dim_x, rngs=nnx.Rngs(cfg.seed), partition_axis=partition_axis,
                           **hparams)


#: The keywords ``pipeline.build_pipeline`` calls every data set's factory with (docs/gensbi_models.md), and what
#: each is.
DATA_KEYWORDS = {
    "num_simulations": "data.num_simulations, over all shards",
    "val_fraction": "data.val_fraction",
    "seed": "the run's seed",
    "num_observation": "data.num_observation",
    "theta_transform": "data.theta_transform",
    "x_transform": "data.x_transform",
    "process_index": "this shard's index",
    "process_count": "the number of shards",
}


def _where(factory: Callable[..., Any]) -> str:
    """``make_gated (gensbi_sharding/harness/models/gated.py)``: the factory and its file, relative where it can be."""
    name = factory_name(factory)
    inner = factory
    while isinstance(inner, functools.partial):  # the file of the function it binds
        inner = inner.func
    try:
        # a callable object's file is its class's (a bound method's is its function's, not its type's)
        path = inspect.getsourcefile(inner if inspect.isroutine(inner) or inspect.isclass(inner) else type(inner))
    except TypeError:  # a builtin: no file of its own
        path = None
    if path is None:
        return name
    relative = os.path.relpath(path)
    return f"{name} ({path if relative.startswith('..') else relative})"


def _parameters(factory: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    """The parameters the run's call meets: a decorator's own where it names any (``functools.wraps`` of one that
    takes ``partition_axis`` itself and passes the rest on: was refused by the wrapped factory's signature, which
    lacks it), the wrapped factory's behind one that only passes everything on (``*args, **kwargs``)."""
    own = inspect.signature(factory, follow_wrapped=False).parameters
    passing = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if own and all(p.kind in passing for p in own.values()):
        if inspect.isclass(factory) and factory.__init__ is not object.__init__:
            # An nnx.Module subclass as its own factory: nnx's metaclass __call__ takes (*args, **kwargs), which
            # hides __init__'s keywords from the check. Its __init__'s, less self.
            return dict(list(inspect.signature(factory.__init__).parameters.items())[1:])
        return inspect.signature(factory).parameters
    return own


def _mismatch(parameters: Mapping[str, inspect.Parameter], passed: list[str]) -> tuple[list[str], list[str]]:
    """The keywords passed that the signature does not take, and those it needs that nothing passes."""
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unexpected = [k for k in passed if not takes_any and (k not in parameters or parameters[k].kind not in by_keyword)]
    missing = [k for k, p in parameters.items() if k not in passed and p.default is inspect.Parameter.empty
               and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    return unexpected, missing


def factory_keyword_problem(name: str, factory: Callable[..., Any], settings: Mapping[str, Any]) -> str | None:
    """The one-line refusal of a model factory whose signature does not take the run's call; None where it does.

    Parameters
    ----------
    name : str
        The model's name, e.g. ``"gated"`` (``model=gated``).
    factory : callable
        Its registered factory.
    settings : mapping
        The model's section (``cfg.model``): its keys but ``name`` and ``init`` are passed as keywords.

    Returns
    -------
    str or None
        E.g. ``"model=gated's factory make_gated (gensbi_sharding/harness/models/gated.py) takes no keyword
        partition_axis, which the run passes every model's factory (the activation layout ...): add partition_axis=None
        to its keywords and pass it on (docs/gensbi_models.md: A model of your own in the harness)"``.
    """
    try:
        parameters = _parameters(factory)
    except (TypeError, ValueError):  # no signature Python can read (a builtin): its call is the only check
        return None
    hparams = [k for k in settings if k not in HARNESS_FIELDS]
    passed = [*RUN_KEYWORDS, *hparams]
    unexpected, missing = _mismatch(parameters, passed)
    whose = f"model={name}'s factory {_where(factory)}"
    guide = " (docs/gensbi_models.md: A model of your own in the harness)"
    if unexpected:
        run_words = [k for k in unexpected if k in RUN_KEYWORDS]
        words = ", ".join(unexpected)
        if run_words:
            why = "; ".join(f"{k}: {RUN_KEYWORDS[k]}" for k in run_words)
            add = ", ".join(f"{k}=None" if k == "partition_axis" else k for k in unexpected)
            return (f"{whose} takes no keyword {words}, which the run passes every model's factory ({why}): add "
                    f"{add} to its keywords{' and pass it on to the layers' * ('partition_axis' in run_words)}{guide}")
        fields = " ".join(f"model.{k}" for k in unexpected)
        return (f"{whose} takes no keyword {words}, which the run passes from {fields} (a field of its schema): add "
                f"{', '.join(unexpected)} to its keywords, or drop the field from its schema{guide}")
    if missing:
        words = ", ".join(missing)
        return (f"{whose} needs keyword {words}, which the run never passes (it passes {', '.join(RUN_KEYWORDS)} and "
                f"the fields of model={name}'s schema{': ' + ', '.join(hparams) if hparams else ', none'}): give "
                f"{words} a default, or add {'them' if len(missing) > 1 else 'it'} to the schema{guide}")
    return None


def data_factory_keyword_problem(name: str, factory: Callable[..., Any]) -> str | None:
    """The one-line refusal of a data set's factory whose signature does not take the run's call; None where it does.

    Before the run's folder is made, not ``TypeError: load_noisy() got an unexpected keyword argument ...`` in it.

    Parameters
    ----------
    name : str
        The data set's name, e.g. ``"noisy_gauss"`` (``data=noisy_gauss``).
    factory : callable
        Its registered factory, called with every one of ``DATA_KEYWORDS``, and nothing else.

    Returns
    -------
    str or None
        E.g. ``"data=noisy_gauss's factory load_noisy (my_data.py) takes no keyword process_count, which the run
        passes every data set's factory (process_count: the number of shards): add process_count to its keywords
        (docs/gensbi_models.md: A model or data set of your own in the harness)"``.
    """
    try:
        parameters = _parameters(factory)
    except (TypeError, ValueError):  # no signature Python can read (a builtin): its call is the only check
        return None
    unexpected, missing = _mismatch(parameters, list(DATA_KEYWORDS))
    whose = f"data={name}'s factory {_where(factory)}"
    guide = " (docs/gensbi_models.md: A model or data set of your own in the harness)"
    if unexpected:
        why = "; ".join(f"{k}: {DATA_KEYWORDS[k]}" for k in unexpected)
        return (f"{whose} takes no keyword {', '.join(unexpected)}, which the run passes every data set's factory "
                f"({why}): add {', '.join(unexpected)} to its keywords{guide}")
    if missing:
        words = ", ".join(missing)
        return (f"{whose} needs keyword {words}, which the run never passes (it passes {', '.join(DATA_KEYWORDS)}): "
                f"give {words} a default{guide}")
    return None


def own_data_problem(name: str) -> str | None:
    """``data_factory_keyword_problem`` of ``data=<name>`` where it is a registered data set of one's own; else None
    (the built-in tasks' ``load_task`` is tested to take the call; an unknown name is ``registered_name_problem``'s)."""
    from gensbi_sharding.harness import registry
    from gensbi_sharding.harness.tasks import TASKS

    if not isinstance(name, str) or name in TASKS or not registry.is_registered("data", name):
        return None
    return data_factory_keyword_problem(name, registry.get_data(name))
