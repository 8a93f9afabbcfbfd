"""``check_model(cfg.model)``: the model section (GenSBI's ``model=flux1``, ``model=simformer``, and the harness's
``mlp`` and ``transformer``), before any simulation.

GenSBI checks its ``Flux1Params`` / ``SimformerParams`` only when the network is built, after
the simulations, and some values fail deeper still (``mlp_ratio=0``: an IndexError,
``axes_dim=[0,0]``: a ZeroDivisionError). Each refusal here is one ``ConfigError`` line
naming the override, the allowed choices or range, and a value that works (GenSBI's
default, ``gensbi.recipes.flux1.get_default_flux1_params`` / ``...simformer...``).
Pure Python: no JAX, no GenSBI import.
"""

from __future__ import annotations

from omegaconf import DictConfig, ListConfig

from gensbi_sharding.harness.config import DTYPES, ConfigError, Flux1Config
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.units import is_int

__all__ = ["check_model", "platform_problem", "ignored_settings", "ID_STRATEGIES_1D", "DTYPES", "MERGE_MODES",
           "ROPE_ID_AXES", "ACTIVATION_FIELDS_READ"]

#: The id builders that fit one vector of parameters and one of observations (GenSBI's 1-D strategies).
ID_STRATEGIES_1D = ("absolute", "pos1d", "rope1d")
MERGE_MODES = ("sum", "concat")  # Flux1Params.id_merge_mode
#: Axes of GenSBI's ``init_ids_1d`` ids with a semantic id (position, then 0 for parameters / 1 for observations):
#: the rope id strategy takes one ``axes_dim`` size per axis.
ROPE_ID_AXES = 2


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
    checks = {"flux1": _flux1, "simformer": _simformer, "mlp": _own, "transformer": _own}.get(model.get("name"))
    if checks is _flux1:
        _flux1(model, traced=traced, dry_run=dry_run)
    elif checks is not None:
        checks(model)
    else:  # a model of one's own: its factory's keywords against the run's call, before its folder
        _factory_takes_the_call(model)


def _factory_takes_the_call(model: DictConfig) -> None:
    """Refuse a registered model of one's own whose factory cannot take the keywords the run calls it with."""
    from gensbi_sharding.harness import registry
    from gensbi_sharding.harness.factory_keywords import factory_keyword_problem

    name = model.get("name")
    if not isinstance(name, str) or name in registry.BUILT_IN_MODELS or not registry.is_registered("model", name):
        return  # the built-ins are tested to take it; an unknown name is registered_name_problem's
    try:
        factory = registry.get_model(name)
    except ModuleNotFoundError:  # the package it requires is missing: said as the run builds it, with its install
        return
    _require((problem := factory_keyword_problem(name, factory, model)) is None, problem)


def _own(model: DictConfig) -> None:
    """The harness's mlp and transformer: their factories refused these only once the simulations were done,
    naming ``depth=8`` (no ``model.``), "pass 4" or no value at all (``embed % heads``)."""
    # By the section's keys, not its name: model.name=transformer on the mlp's section is registered_name_problem's.
    # The fix is validate's: the default the command composes (experiment=quick's width 32; the schema's was named).
    for key in ("width", "embed", "depth", "heads", "mlp_ratio", "time_embed_dim"):
        if key in model:
            _require(model[key] >= 1, f"model.{key}={model[key]} must be >= 1")
    dim = model.get("time_embed_dim", 2)
    _require(dim % 2 == 0, Refusal(f"model.time_embed_dim={dim} must be even (as many sines as cosines)",
                                   f"model.time_embed_dim={dim + 1}", how="; e.g. "))
    if "embed" in model and "heads" in model and model.embed % model.heads:
        divisors = [d for d in range(1, model.embed + 1) if model.embed % d == 0]
        near = min(divisors, key=lambda d: (abs(d - model.heads), d))
        _require(False, Refusal(f"model.embed={model.embed} must be a multiple of model.heads={model.heads} (each "
                                "head takes embed / heads features)", f"model.heads={near}",
                                after=f", or model.embed={-(-model.embed // model.heads) * model.heads}"))


def platform_problem(model: DictConfig, platform: str) -> str | None:
    """The one-line refusal of a model section that compiles on no device of ``platform``; None when it runs.

    ``model=flux1 model.dtype=float16`` on ``cpu``: Flux1's matmuls ask for float16
    inputs with float32 accumulation, which XLA's CPU backend lacks ("The precision
    'F16_F16_F32' is not supported by dot_general on CPU", at compile time, after the
    simulations). Simformer computes in float16 on CPU. (float16 parameters are refused on every platform: ``_dtypes``.)
    """
    if model.get("name") == "flux1" and model.get("dtype") == "float16" and platform == "cpu":
        return Refusal("model.dtype=float16 does not compile for model=flux1 on cpu: XLA's CPU backend has no "
                       "float16 matmul with float32 accumulation (F16_F16_F32, GPU only)", "model.dtype=bfloat16",
                       after=" or model.dtype=float32, or run on a GPU")
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
    if placed_nowhere and (fields := [f"activation.{k}={_literal(v)}" for k, v in activation.items()
                                      if k != "strategy" and v != "auto"]):
        unused.append(f"{' '.join(fields)} ({placed_nowhere})")
    elif read is not None and activation is not None and activation.strategy != "none":
        fields = [f"activation.{k}={_literal(v)}" for k, v in activation.items()
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
        unused.append(f"model.axes_dim={_literal(axes)} (only model.id_merge_mode=sum uses it, as hidden size = "
                      "sum(axes_dim) * num_heads; model.id_merge_mode=concat sizes the tokens by model.val_emb_dim "
                      "and model.id_emb_dim)")
    rope = any(str(s).startswith("rope") for s in model.id_embedding_strategy)
    if model.id_merge_mode == "sum" and axes and not rope and any(axes[1:]):  # measured: [4,4] trains as [8,0]
        unused.append(f"the split of model.axes_dim={_literal(axes)} (without a rope1d id strategy only its sum is "
                      f"used: the same model as model.axes_dim=[{sum(axes)},0]; rope1d gives each id axis its size)")
    # GenSBI's single-stream blocks build their query/key/value projection with a bias whatever qkv_bias says.
    if model.get("depth") == 0 and model.get("qkv_bias") != Flux1Config().qkv_bias:
        unused.append(f"model.qkv_bias={_literal(model.qkv_bias)} (only the double-stream blocks read it, and "
                      "model.depth=0 builds none; the single-stream blocks always have query/key/value biases)")
    return "no effect: " + "; ".join(unused) if unused else None


def _literal(value) -> str:
    """As typed in an override: ``null``, ``[data,model]``, ``[8,0]`` (a list's repr, ``[8, 0]``, is two words)."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # as YAML reads it back
        return str(value).lower()
    return "[" + ",".join(_literal(v) for v in value) + "]" if isinstance(value, (ListConfig, list)) else str(value)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _at_least(model: DictConfig, key: str, low: int, default) -> None:
    value = model[key]
    _require(is_int(value) and value >= low,
             Refusal(f"model.{key}={value} must be an integer >= {low}", f"model.{key}={default}", how="; e.g. ",
                     after=" (GenSBI's default)"))


def _dtypes(model: DictConfig) -> None:
    for key in ("param_dtype", "dtype"):
        _require(model[key] in DTYPES, Refusal(f"model.{key}={model[key]!r} is not one of {', '.join(DTYPES)}",
                                               f"model.{key}=float32", how="; e.g. "))
    # Measured: NaN from the first steps at any learning rate (1e-7 too), both models. AdamW keeps its
    # moments in the parameters' dtype, where eps=1e-8 and small squared gradients round to 0.
    _require(model["param_dtype"] != "float16",
             Refusal("model.param_dtype=float16 trains to NaN from the first steps at any learning rate (AdamW keeps "
                     "its moments in the parameters' dtype, where its eps=1e-8 and small squared gradients round to 0; "
                     "model.dtype=float16, the compute dtype, is allowed where it compiles)",
                     "model.param_dtype=bfloat16", how="; e.g. ", after=" (float32's range)"))


def _flux1(model: DictConfig, *, traced: bool = True, dry_run: bool = False) -> None:
    mode = model.id_merge_mode
    _require(mode in MERGE_MODES, Refusal(f"model.id_merge_mode={_literal(mode)} is not one of "
                                          f"{', '.join(MERGE_MODES)}", "model.id_merge_mode=sum", how="; e.g. ",
                                          after=" (GenSBI's default)"))
    strategies = list(model.id_embedding_strategy)
    _require(len(strategies) == 2 and all(s in ID_STRATEGIES_1D for s in strategies),
             Refusal(f"model.id_embedding_strategy={_literal(strategies)}: give two of {', '.join(ID_STRATEGIES_1D)} "
                     "(parameters, observations)", "model.id_embedding_strategy=[absolute,absolute]", how=", e.g. ",
                     after=" (GenSBI's default)"))
    for key, low, default in (("num_heads", 1, 6), ("depth", 0, 8), ("depth_single_blocks", 0, 16)):
        _at_least(model, key, low, default)
    # GenSBI builds either kind of block 0 times (depth=0: single-stream blocks only), but with neither the
    # parameter tokens never attend to the observation's: a velocity that ignores x.
    _require(model.depth + model.depth_single_blocks >= 1,
             Refusal("model.depth=0 and model.depth_single_blocks=0: no block lets the parameter tokens attend to the "
                     "observation tokens, so the velocity would ignore x", "model.depth_single_blocks=1", how="; e.g. ",
                     after=" (single-stream blocks only) or model.depth=1"))
    rope = any(s.startswith("rope") for s in strategies)
    if mode == "sum":
        axes = list(model.axes_dim) if model.axes_dim is not None else None
        _require(axes is not None and len(axes) >= 1 and all(a >= 0 for a in axes) and sum(axes) >= 1,
                 Refusal(f"model.axes_dim={_literal(axes)} must list sizes >= 0 with a sum >= 1 (hidden size = sum * "
                         "num_heads) for model.id_merge_mode=sum", "model.axes_dim=[6,0]", how="; e.g. ",
                         after=" (GenSBI's default)"))
        # GenSBI's rope embeds id axis i with axes_dim[i] features, and the 1-D ids have two axes (position,
        # then parameter/observation): a third size was never used (a shape error in the first step), a
        # single one indexed past the end (an IndexError there).
        _require(not rope or len(axes) == ROPE_ID_AXES,
                 Refusal(f"model.axes_dim={_literal(axes)} must list {ROPE_ID_AXES} sizes for the rope1d id strategy, "
                         "one per axis of the 1-D token ids (position, then parameter or observation)",
                         f"model.axes_dim=[{sum(axes) + sum(axes) % 2},0]", how="; e.g. ",
                         after=" (every size on the position)"))
        _require(not rope or all(a % 2 == 0 for a in axes),
                 Refusal(f"model.axes_dim={_literal(axes)} must hold even sizes for the rope1d id strategy (rotary "
                         f"pairs)", f"model.axes_dim=[{','.join(str(a + a % 2) for a in axes)}]", how="; e.g. "))
        hidden = sum(axes) * model.num_heads
        # GenSBI's pos1d table is sin | cos halves of the id embedding's width: hidden size here (odd: its
        # "Hidden size (3) must be divisible by 2" after the simulations, naming no setting).
        _require("pos1d" not in strategies or hidden % 2 == 0,
                 Refusal(f"model.axes_dim={_literal(axes)} with model.num_heads={model.num_heads}: the pos1d id "
                         f"strategy needs an even hidden size (sum(axes_dim) * num_heads = {hidden}, sine and cosine "
                         "halves)",
                         f"model.axes_dim=[{','.join(str(a + (i == 0)) for i, a in enumerate(axes))}]", how="; e.g. "))
    else:
        bad = [k for k in ("val_emb_dim", "id_emb_dim") if not (is_int(model[k]) and model[k] >= 1)]
        said = (f"{' and '.join(f'model.{k}={_literal(model[k])}' for k in bad)}: model.id_merge_mode=concat needs "
                "val_emb_dim and id_emb_dim, integers >= 1 (features per head)")
        after = " (GenSBI suggests 1:1), or model.id_merge_mode=sum"
        # With both keys refused, the fix is the two together (as overrides, which a check can try)
        _require(not bad, Refusal(said, tuple(f"model.{k}=4" for k in bad), how="; e.g. ", after=after))
        _require(not rope, Refusal(f"model.id_embedding_strategy={_literal(strategies)}: rope1d does not combine "
                                   "with model.id_merge_mode=concat", "model.id_embedding_strategy=[absolute,absolute]",
                                   how="; e.g. "))
        hidden = (model.val_emb_dim + model.id_emb_dim) * model.num_heads
        _require("pos1d" not in strategies or model.id_emb_dim * model.num_heads % 2 == 0,
                 Refusal(f"model.id_emb_dim={model.id_emb_dim} with model.num_heads={model.num_heads}: the pos1d id "
                         "strategy needs an even id width (id_emb_dim * num_heads = "
                         f"{model.id_emb_dim * model.num_heads}, sine and cosine halves)",
                         f"model.id_emb_dim={model.id_emb_dim + 1}", how="; e.g. "))
    _require(model.mlp_ratio > 0 and int(hidden * model.mlp_ratio) >= 1,
             Refusal(f"model.mlp_ratio={model.mlp_ratio} must be > 0 with an MLP width int(hidden size {hidden} * "
                     "mlp_ratio) >= 1", "model.mlp_ratio=4.0", how="; e.g. ", after=" (GenSBI's default)"))
    _require(model.theta is None or model.theta >= 1,
             Refusal(f"model.theta={model.theta} (the rope base) must be >= 1", "model.theta=null", how="; e.g. ",
                     after=" (10 * (dim_theta + dim_x), GenSBI's default)"))
    _dtypes(model)
    # Known from the config: refused here, not once the model is traced after the simulations (in each process).
    # Not without a mesh (built whole whatever model.init says); a dry run traces it whatever model.init says, so
    # its refusal names the whole fix, before a run folder of its own.
    _require("pos1d" not in strategies or not dry_run,
             Refusal(f"model.id_embedding_strategy=[{','.join(strategies)}] with dry_run=true: GenSBI's pos1d id "
                     "embedding sizes its table with jnp.maximum inside the constructor, which the dry run's trace (it "
                     "allocates nothing) cannot evaluate, so this model has no dry run", ("dry_run=false",
                     "model.init=eager"), how="; ", shown="drop dry_run=true and train it with model.init=eager"))
    _require("pos1d" not in strategies or model.init == "eager" or not traced,
             Refusal(f"model.id_embedding_strategy=[{','.join(strategies)}] with model.init={model.init}: GenSBI's "
                     "pos1d id embedding sizes its table with jnp.maximum inside the constructor, which no trace can "
                     "evaluate", "model.init=eager", how="; e.g. ",
                     after=" (built whole on one device, then placed), or absolute or rope1d ids"))


def _simformer(model: DictConfig) -> None:
    defaults = dict(val_emb_dim=40, id_emb_dim=40, cond_emb_dim=10, num_heads=4, depth=8, num_hidden_layers=1,
                    fourier_features=128, mlp_ratio=3)
    for key, default in defaults.items():
        _at_least(model, key, 1, default)
    if model.qkv_features is not None:
        _at_least(model, "qkv_features", 1, 40)
    qkv = model.qkv_features or model.val_emb_dim + model.id_emb_dim + model.cond_emb_dim
    divisors = [d for d in range(1, qkv + 1) if qkv % d == 0]
    _require(qkv % model.num_heads == 0,
             Refusal(f"model.num_heads={model.num_heads} must divide the attention size {qkv} (model.qkv_features, or "
                     f"the token size when null); pick one of {divisors[:8]}",
                     f"model.num_heads={max(d for d in divisors if d <= model.num_heads)}", how=", e.g. "))
    _dtypes(model)
