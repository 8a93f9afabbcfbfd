"""``check_model(cfg.model)``: the model section (GenSBI's ``model=flux1``, ``model=simformer``, and the harness's
``mlp`` and ``transformer``), before any simulation.

GenSBI checks its ``Flux1Params`` / ``SimformerParams`` only when the network is built, after
the simulations, and some values fail deeper still (``mlp_ratio=0``: an IndexError,
``axes_dim=[0,0]``: a ZeroDivisionError). Each refusal here is one ``ConfigError`` line
naming the override, the allowed choices or range, and a value that works (GenSBI's
default, ``gensbi.recipes.flux1.get_default_flux1_params`` / ``...simformer...``): the built-ins' checks are
``model_sections``'; a model of one's own is checked here, its factory's keywords against the run's call.
Pure Python: no JAX, no GenSBI import.
"""

from __future__ import annotations

from omegaconf import DictConfig

from gensbi_sharding.harness import registry
from gensbi_sharding.harness.config import DTYPES, ConfigError, Flux1Config
from gensbi_sharding.harness.factory_keywords import factory_keyword_problem
from gensbi_sharding.harness.model_sections import (ID_STRATEGIES_1D, MERGE_MODES, ROPE_ID_AXES,
                                                    check_built_in, as_typed)
from gensbi_sharding.harness.python_words import setting
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["check_model", "platform_problem", "ignored_settings", "ID_STRATEGIES_1D", "DTYPES", "MERGE_MODES",
           "ROPE_ID_AXES", "ACTIVATION_FIELDS_READ"]

def check_model(model: DictConfig, *, traced: bool = True, dry_run: bool = False) -> None:
    """Refuse a model section that cannot be built (GenSBI's ``flux1`` / ``simformer``, ``mlp``, ``transformer``).

    Parameters
    ----------
    model : DictConfig
        The run's ``model`` section.
    traced : bool
        Whether ``model.init=sharded`` would trace the constructor to build it: False without a mesh (built
        whole, nothing placed) and in a dry run (which traces it whatever ``model.init`` says: a constructor that
        cannot be traced is refused there, naming the dry run, not ``model.init``, as what to change).
    dry_run : bool
        Whether the run is a dry run, which traces the constructor whatever ``model.init`` and the mesh say.

    Raises
    ------
    ConfigError
        One line: ``model.<field>=<value>``, what it must be, and ``model.<field>=<a value that works>``.
    """
    # A model of one's own: its factory's keywords against the run's call, before its folder.
    if not check_built_in(model, traced=traced, dry_run=dry_run):
        _factory_takes_the_call(model)


def _factory_takes_the_call(model: DictConfig) -> None:
    """Refuse a registered model of one's own whose factory cannot take the keywords the run calls it with."""
    name = model.get("name")
    if not isinstance(name, str) or name in registry.BUILT_IN_MODELS or not registry.is_registered("model", name):
        return  # the built-ins are tested to take it; an unknown name is registered_name_problem's
    try:
        factory = registry.get_model(name)
    except ModuleNotFoundError:  # the package it requires is missing: said as the run builds it, with its install
        return
    if (problem := factory_keyword_problem(name, factory, model)) is not None:
        raise ConfigError(problem)


def platform_problem(model: DictConfig, platform: str) -> str | None:
    """The one-line refusal of a model section that compiles on no device of ``platform``; None when it runs.

    ``model=flux1 model.dtype=float16`` on ``cpu``: Flux1's matmuls ask for float16
    inputs with float32 accumulation, which XLA's CPU backend lacks ("The precision
    'F16_F16_F32' is not supported by dot_general on CPU", at compile time, after the
    simulations). Simformer computes in float16 on CPU. (float16 parameters are refused on every platform:
    ``model_sections``.)
    """
    if model.get("name") == "flux1" and model.get("dtype") == "float16" and platform == "cpu":
        return Refusal("model.dtype=float16 does not compile for model=flux1 on cpu: XLA's CPU backend has no "
                       "float16 matmul with float32 accumulation (F16_F16_F32, GPU only)", "model.dtype=bfloat16",
                       after=f" or {setting('model.dtype', 'float32', 'model.dtype=float32')}, or run on a GPU")
    return None


#: The activation fields each built-in model reads (the names it passes to ``constrain``): one it does not read
#: changes nothing. GenSBI's blocks set no layouts of their own; the wrappers constrain the tokens in and out.
ACTIVATION_FIELDS_READ = {"flux1": ("batch_axis",), "simformer": ("batch_axis",),
                          "mlp": ("batch_axis", "hidden_state_axis"),
                          "transformer": ("batch_axis", "sequence_axis", "query_sequence_axis", "head_axis",
                                          "key_sequence_axis", "hidden_state_axis", "attention_dim_axis")}


def ignored_settings(model: DictConfig, activation: DictConfig | None = None,
                     mesh: DictConfig | None = None) -> str | None:
    """The one-line warning naming ``model=flux1`` settings that have no effect, and what would make them apply.

    GenSBI's ``Flux1Params`` reads ``val_emb_dim`` / ``id_emb_dim`` only under
    ``id_merge_mode=concat``, ``theta`` (the rope base) only with a rope1d id strategy,
    and ``axes_dim`` only under ``id_merge_mode=sum`` (concat sizes the tokens by the two
    emb dims and refuses rope1d, the other reader of ``axes_dim``). Their presets are null
    (unused), or for ``axes_dim`` the schema's default, so another value was set by the
    user; ``qkv_bias`` is read by the double-stream blocks only (none under ``depth=0``). None when nothing
    set is ignored. ``activation`` (the run's section): an ``activation.*`` field set
    that the built-in model does not read (``ACTIVATION_FIELDS_READ``) is named too, for every model; under
    ``activation=none`` or ``mesh=none`` (``mesh``: the run's section), any field set is named too (it places nothing).
    """
    unused, read = [], ACTIVATION_FIELDS_READ.get(model.get("name"))
    placed_nowhere = ("activation=none adds no activation constraints; activation=rule or activation=fixed applies "
                      "them" if activation is not None and activation.strategy == "none" else
                      "mesh=none: one device, no activation is placed" if mesh is not None and mesh.spec is None
                      else None)
    if placed_nowhere and (fields := [f"activation.{k}={as_typed(v)}" for k, v in activation.items()
                                      if k != "strategy" and v != "auto"]):
        unused.append(f"{' '.join(fields)} ({placed_nowhere})")
    elif read is not None and activation is not None and activation.strategy != "none":
        fields = [f"activation.{k}={as_typed(v)}" for k, v in activation.items()
                  if k != "strategy" and k not in read and v != "auto"]
        why = (f"GenSBI's {model.name} blocks set no activation layouts: the harness constrains the tokens it passes "
               "in and reads out" if model.name in ("flux1", "simformer") else f"model={model.name} constrains")
        if fields:
            unused.append(f"{' '.join(fields)} ({why} by {', '.join('activation.' + f for f in read)} only)")
    if model.get("name") != "flux1":
        return "no effect: " + "; ".join(unused) if unused else None
    set_emb = [k for k in ("val_emb_dim", "id_emb_dim") if model.get(k) is not None]
    if set_emb and model.id_merge_mode != "concat":
        unused.append(f"{' and '.join(f'model.{k}={model[k]}' for k in set_emb)} (only model.id_merge_mode=concat "
                      f"uses them; model.id_merge_mode={model.id_merge_mode} sizes the tokens by model.axes_dim)")
    if model.get("theta") is not None and not any(str(s).startswith("rope") for s in model.id_embedding_strategy):
        unused.append(f"model.theta={model.theta} (the rope base: only a rope1d id strategy uses it, e.g. "
                      "model.id_embedding_strategy=[rope1d,rope1d] with model.id_merge_mode=sum)")
    axes = list(model.axes_dim) if model.get("axes_dim") is not None else None
    if model.id_merge_mode == "concat" and axes is not None and axes != Flux1Config().axes_dim:
        unused.append(f"model.axes_dim={as_typed(axes)} (only model.id_merge_mode=sum uses it, as hidden size = "
                      "sum(axes_dim) * num_heads; model.id_merge_mode=concat sizes the tokens by model.val_emb_dim "
                      "and model.id_emb_dim)")
    rope = any(str(s).startswith("rope") for s in model.id_embedding_strategy)
    if model.id_merge_mode == "sum" and axes and not rope and any(axes[1:]):  # measured: [4,4] trains as [8,0]
        unused.append(f"the split of model.axes_dim={as_typed(axes)} (without a rope1d id strategy only its sum is "
                      f"used: the same model as model.axes_dim=[{sum(axes)},0]; rope1d gives each id axis its size)")
    # GenSBI's single-stream blocks build their query/key/value projection with a bias whatever qkv_bias says.
    if model.get("depth") == 0 and model.get("qkv_bias") != Flux1Config().qkv_bias:
        unused.append(f"model.qkv_bias={as_typed(model.qkv_bias)} (only the double-stream blocks read it, and "
                      "model.depth=0 builds none; the single-stream blocks always have query/key/value biases)")
    return "no effect: " + "; ".join(unused) if unused else None
