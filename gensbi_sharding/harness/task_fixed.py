"""``model.<field>`` overrides of what the harness sets from the task, named as such before Hydra composes.

GenSBI's ``Flux1Params`` / ``SimformerParams`` hold fields the harness fills from the task and its calling
convention (``harness/models/flux1.py``, ``simformer.py``): the token counts (``dim_obs``, ``dim_cond``,
``dim_joint``) from the task's theta and x sizes, one channel per token, no extra vector input, no guidance
embedding, the RNG from ``seed``. Every model's factory also takes ``dim_theta``/``dim_x`` from the task and
``partition_axis`` from ``activation=``. None of them is a ``model.*`` setting: an override of one
(``model.guidance_embed=true``, ``+model.dim_obs=3``, ``~model.in_channels``) read "not a setting of model=flux1",
and ``model.dim_theta=3`` offered ``model.theta=3`` (Flux1's rope base). ``task_fixed_problem`` says where the value
comes from and what to change instead. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.override_keys import model_fields
from gensbi_sharding.harness.tasks import TASK_DIMS

__all__ = ["TASK_FIXED", "task_fixed_problem"]

_WIDTH = {"flux1": "a token's width is sum(model.axes_dim) * model.num_heads: set those",
          "simformer": "a token's width is model.val_emb_dim + model.id_emb_dim + model.cond_emb_dim: set those"}
_PARAMS = {"flux1": "Flux1Params", "simformer": "SimformerParams"}
_TASK = "pick the task with data=<task> ({examples})"

#: Field -> (where it is a field: GenSBI's Params class and the models, or the harness's factories), what the harness
#: sets it to and from what (``{dims}``: the task's sizes), and what to change instead. ``tests/test_noticed36.py``
#: checks the Params fields listed here are exactly those of GenSBI's classes that no model schema holds.
TASK_FIXED: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "dim_theta": ("every model's factory", (), "the task's parameter size, dim_theta{dims}", _TASK),
    "dim_x": ("every model's factory", (), "the task's observation size, dim_x{dims}", _TASK),
    "dim_obs": ("Flux1Params", ("flux1",), "one parameter token per theta dimension: the task's dim_theta{dims}",
                _TASK),
    "dim_cond": ("Flux1Params", ("flux1",), "one observation token per x dimension: the task's dim_x{dims}", _TASK),
    "dim_joint": ("SimformerParams", ("simformer",), "one token per theta and x dimension: the task's dim_theta + "
                  "dim_x{dims}", _TASK),
    "in_channels": ("Flux1Params and SimformerParams", ("flux1", "simformer"), "1: each theta and x value is one "
                    "token of one channel", "width"),
    "context_in_dim": ("Flux1Params", ("flux1",), "1: each x value is one observation token of one channel", "width"),
    "vec_in_dim": ("Flux1Params", ("flux1",), "null: Flux1 is conditioned on t and the observation tokens, with no "
                   "extra vector", ""),
    "guidance_embed": ("Flux1Params", ("flux1",), "false: the harness's velocity passes no guidance strength (a "
                       "Flux1 built with one is refused)", ""),
    "rngs": ("Flux1Params and SimformerParams", ("flux1", "simformer"), "nnx.Rngs(seed): the run's seed",
             "set seed=<n> for other initial weights"),
    "partition_axis": ("every model's factory", (), "the activation layout that activation= and the rule give",
                       "pick activation=rule, fixed or none (conf/activation/)"),
}


def _defaults(path) -> list:
    """The defaults list of the config file at ``path``, as plain Python (entries ``str`` or one-key ``dict``)."""
    return OmegaConf.to_container(OmegaConf.load(path)).get("defaults", []) if path.is_file() else []


def _tasks(command: CommandLine) -> list[str]:
    """The task(s) the command trains on: ``data=``'s (each swept one), else the experiment's, else the default's."""
    picks = [o for o in command.parsed if o.key == "data" and o.hydra.package is None
             and o.hydra.type == OverrideType.CHANGE]
    experiments = [o for o in command.parsed if o.key == "experiment" and not o.hydra.is_sweep_override()]
    if picks:
        found = [str(v) for v in picks[-1].values()]
    else:
        found = [e["override /data"] for o in experiments[-1:]  # experiment=quick picks none: the default's
                 for e in _defaults(CONF / "experiment" / f"{o.hydra.value()}.yaml") if "override /data" in e]
        found = found or [e["data"] for e in _defaults(CONF / "config.yaml") if isinstance(e, dict) and "data" in e]
    return [t for t in found if t in TASK_DIMS]


def _dims(field: str, tasks: list[str]) -> str:
    """`` (data=two_moons: 2)``: the value ``field`` takes for each task the command names."""
    size = {"dim_theta": 0, "dim_obs": 0, "dim_x": 1, "dim_cond": 1}
    shown = [f"data={t}: {sum(TASK_DIMS[t]) if field == 'dim_joint' else TASK_DIMS[t][size[field]]}" for t in tasks]
    return f" ({', '.join(shown)})" if shown else ""


def task_fixed_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first ``model.<field>`` override (``=``, ``+``, ``++``, ``~``, a sweep) of a field
    the harness sets from the task (``TASK_FIXED``); None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``), or one job's overrides.

    Returns
    -------
    str or None
        E.g. ``"model.dim_obs=3: Flux1Params.dim_obs (model=flux1) is no setting: the harness sets it to one
        parameter token per theta dimension: the task's dim_theta (data=two_moons: 2); to change it pick the task with
        data=<task> (data=slcp: dim_theta=5, dim_x=8, ...), and drop model.dim_obs=3"``.
    """
    command, settings = parse(args), set().union(*model_fields().values())
    for o in command.parsed:
        parts = o.key.split(".")
        if (len(parts) != 2 or parts[0] != "model" or parts[1] not in TASK_FIXED or parts[1] in settings
                or o.hydra.package is not None):  # a schema of one's own may have such a setting
            continue
        owner, models, value, instead = TASK_FIXED[parts[1]]
        models = [m for m in command.models if m in models] or list(models)  # the chosen model's, else each
        of = (" and ".join(f"{_PARAMS[m]}.{parts[1]} (model={m})" for m in models) if models
              else f"{parts[1]}, an argument of {owner},")
        value = value.format(dims=_dims(parts[1], _tasks(command)) if "{dims}" in value else "")
        if instead == _TASK:
            instead = "to change it " + _TASK.format(examples="; ".join(
                f"data={t}: dim_theta={d[0]}, dim_x={d[1]}" for t, d in TASK_DIMS.items() if t in ("slcp", "sir")))
        elif instead == "width":
            instead = "; ".join((f"model={m}: " if len(models) > 1 else "") + _WIDTH[m] for m in models)
        return (f"{o.arg}: {of} {'are no settings' if len(models) > 1 else 'is no setting'}: the harness sets it to "
                f"{value}; "
                + (f"{instead}, and drop {o.arg}" if instead else f"nothing replaces it: drop {o.arg}"))
    return None
