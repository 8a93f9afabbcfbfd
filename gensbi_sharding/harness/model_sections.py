"""The checks of the built-in models' sections (GenSBI's ``flux1`` and ``simformer``, the harness's ``mlp`` and
``transformer``): ``check_built_in``, one ``ConfigError`` line naming the override, the allowed choices or range, and
a value that works. Pure Python: no JAX, no GenSBI import.

Below ``model_checks`` (``check_model``: these, or the check of a model of one's own through the registry) and
``models.flux1`` (which checks a Python caller's arguments with them): flux1 imported ``model_checks``, which reaches
the registry that imports the models (an import cycle).
"""

from __future__ import annotations

from omegaconf import DictConfig, ListConfig

from gensbi_sharding.harness.config import DTYPES, ConfigError
from gensbi_sharding.harness.python_words import setting
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.units import is_int

__all__ = ["check_built_in", "as_typed", "ID_STRATEGIES_1D", "MERGE_MODES", "ROPE_ID_AXES"]

#: The id builders that fit one vector of parameters and one of observations (GenSBI's 1-D strategies).
ID_STRATEGIES_1D = ("absolute", "pos1d", "rope1d")
MERGE_MODES = ("sum", "concat")  # Flux1Params.id_merge_mode
#: Axes of GenSBI's ``init_ids_1d`` ids with a semantic id (position, then 0 for parameters / 1 for observations):
#: the rope id strategy takes one ``axes_dim`` size per axis.
ROPE_ID_AXES = 2


def check_built_in(model: DictConfig, *, traced: bool = True, dry_run: bool = False) -> bool:
    """Refuse a built-in model's section that cannot be built (``model_checks.check_model``'s checks of one).

    Parameters
    ----------
    model : DictConfig
        The run's ``model`` section.
    traced, dry_run : bool
        As ``model_checks.check_model`` takes them.

    Returns
    -------
    bool
        Whether ``model.name`` is a built-in model's (checked); False for a model of one's own (not checked here).

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
    return checks is not None


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


def as_typed(value) -> str:
    """As typed in an override: ``null``, ``[data,model]``, ``[8,0]`` (a list's repr, ``[8, 0]``, is two words)."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # as YAML reads it back
        return str(value).lower()
    return "[" + ",".join(as_typed(v) for v in value) + "]" if isinstance(value, (ListConfig, list)) else str(value)


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
    _require(mode in MERGE_MODES, Refusal(f"model.id_merge_mode={as_typed(mode)} is not one of "
                                          f"{', '.join(MERGE_MODES)}", "model.id_merge_mode=sum", how="; e.g. ",
                                          after=" (GenSBI's default)"))
    strategies = list(model.id_embedding_strategy)
    _require(len(strategies) == 2 and all(s in ID_STRATEGIES_1D for s in strategies),
             Refusal(f"model.id_embedding_strategy={as_typed(strategies)}: give two of {', '.join(ID_STRATEGIES_1D)} "
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
                 Refusal(f"model.axes_dim={as_typed(axes)} must list sizes >= 0 with a sum >= 1 (hidden size = sum * "
                         "num_heads) for model.id_merge_mode=sum", "model.axes_dim=[6,0]", how="; e.g. ",
                         after=" (GenSBI's default)"))
        # GenSBI's rope embeds id axis i with axes_dim[i] features, and the 1-D ids have two axes (position,
        # then parameter/observation): a third size was never used (a shape error in the first step), a
        # single one indexed past the end (an IndexError there).
        _require(not rope or len(axes) == ROPE_ID_AXES,
                 Refusal(f"model.axes_dim={as_typed(axes)} must list {ROPE_ID_AXES} sizes for the rope1d id strategy, "
                         "one per axis of the 1-D token ids (position, then parameter or observation)",
                         f"model.axes_dim=[{sum(axes) + sum(axes) % 2},0]", how="; e.g. ",
                         after=" (every size on the position)"))
        _require(not rope or all(a % 2 == 0 for a in axes),
                 Refusal(f"model.axes_dim={as_typed(axes)} must hold even sizes for the rope1d id strategy (rotary "
                         f"pairs)", f"model.axes_dim=[{','.join(str(a + a % 2) for a in axes)}]", how="; e.g. "))
        hidden = sum(axes) * model.num_heads
        # GenSBI's pos1d table is sin | cos halves of the id embedding's width: hidden size here (odd: its
        # "Hidden size (3) must be divisible by 2" after the simulations, naming no setting).
        _require("pos1d" not in strategies or hidden % 2 == 0,
                 Refusal(f"model.axes_dim={as_typed(axes)} with model.num_heads={model.num_heads}: the pos1d id "
                         f"strategy needs an even hidden size (sum(axes_dim) * num_heads = {hidden}, sine and cosine "
                         "halves)",
                         f"model.axes_dim=[{','.join(str(a + (i == 0)) for i, a in enumerate(axes))}]", how="; e.g. "))
    else:
        bad = [k for k in ("val_emb_dim", "id_emb_dim") if not (is_int(model[k]) and model[k] >= 1)]
        said = (f"{' and '.join(f'model.{k}={as_typed(model[k])}' for k in bad)}: model.id_merge_mode=concat needs "
                "val_emb_dim and id_emb_dim, integers >= 1 (features per head)")
        after = " (GenSBI suggests 1:1), or model.id_merge_mode=sum"
        # With both keys refused, the fix is the two together (as overrides, which a check can try)
        _require(not bad, Refusal(said, tuple(f"model.{k}=4" for k in bad), how="; e.g. ", after=after))
        _require(not rope, Refusal(f"model.id_embedding_strategy={as_typed(strategies)}: rope1d does not combine "
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
                     "model.init=eager"), how="; ", shown="drop dry_run=true and train it with model.init=eager",
                     python=f"set {setting('dry_run', False)} and train it with {setting('model.init', 'eager')}"))
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
