"""The typed run configuration: dataclasses in Hydra's ConfigStore, and ``ConfigError``.

Every YAML file under ``conf/`` is merged onto these schemas, so a mistyped key
(``mesh.modle_axis=2``) or a wrong type (``train.steps=ten``) is rejected by
Hydra with the key's name before anything runs. What a type cannot say (ranges,
choices, the rule table) is checked once by ``config_checks.validate`` and raised
as ``ConfigError`` naming the key and the fix.
"""

from __future__ import annotations

import functools
import pickle
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf, ValidationError

from gensbi_sharding.harness.groups import option_groups_text

__all__ = ["ConfigError", "Config", "register_configs", "model_schema_classes", "type_hints", "assignment_reason",
           "require", "HARNESS_FIELDS", "DTYPES"]


#: A mesh axis field: "auto", null, a mesh axis name or a list of them. Typed ``Any`` because
#: OmegaConf 2.3 types unions of primitives only; ``Union[str, List[str]]`` needs 2.4's container unions.
MeshAxesField = Any


class ConfigError(ValueError):
    """A configuration value that cannot run; the message names the key and the fix."""


@dataclass
class DevicesConfig:
    # Simulated CPU devices (CPU platform only; real GPUs/TPUs are used as they are).
    # None: JAX_NUM_CPU_DEVICES or XLA_FLAGS' count if set, else 8 (harness/devices.py).
    cpu_count: Optional[int] = None
    platform: Optional[str] = None  # force a JAX platform ("cpu"); None: JAX's default


@dataclass
class DistributedConfig:
    mode: str = "none"  # none | auto (cluster auto-detection, e.g. SLURM) | explicit
    coordinator_address: Optional[str] = None
    num_processes: Optional[int] = None
    process_id: Optional[int] = None
    local_processes: int = 1  # >1: launch.py starts this many local processes on loopback
    timeout_s: int = 120  # bound on joining the other processes (jax.distributed initialisation)
    heartbeat_s: int = 10  # a process silent this long is declared dead and the others abort
    run_timeout_s: int = 3600  # distributed=local: bound on the whole multi-process job


@dataclass
class MeshConfig:
    spec: Optional[str] = "dict"  # null (no mesh) | auto | dict (the fields below)
    model_axis: int = 1  # size of the "model" axis; "data" takes devices // model_axis
    devices: Optional[List[int]] = None  # device ids in mesh order; None: all devices


@dataclass
class ModelConfig:
    name: str = MISSING
    init: str = "sharded"  # sharded (jit with output shardings) | eager (build, then shard_model)


HARNESS_FIELDS = ("name", "init")  # ModelConfig's fields, read by the harness; the others: the factory's keywords
DTYPES = ("float32", "bfloat16", "float16")  # of GenSBI's models' param_dtype and dtype (models.common.compute_dtype)


@dataclass
class MLPConfig(ModelConfig):
    name: str = "mlp"
    width: int = 128
    depth: int = 3
    mlp_ratio: int = 2
    time_embed_dim: int = 32


@dataclass
class TransformerConfig(ModelConfig):
    name: str = "transformer"
    embed: int = 64
    depth: int = 2
    heads: int = 8
    mlp_ratio: int = 4
    time_embed_dim: int = 32


@dataclass
class Flux1Config(ModelConfig):
    """``Flux1Params`` fields, GenSBI's defaults but CPU-run sizes (GenSBI's: 6, 8, 16, [6, 0])."""
    name: str = "flux1"
    mlp_ratio: float = 4.0
    num_heads: int = 4
    depth: int = 2  # double-stream blocks
    depth_single_blocks: int = 4
    qkv_bias: bool = True
    axes_dim: Optional[List[int]] = field(default_factory=lambda: [8, 0])  # hidden = sum * num_heads
    val_emb_dim: Optional[int] = None  # these two: id_merge_mode=concat only
    id_emb_dim: Optional[int] = None
    id_merge_mode: str = "sum"  # sum | concat
    theta: Optional[int] = None  # rope base; None: 10 * (dim_theta + dim_x)
    id_embedding_strategy: List[str] = field(default_factory=lambda: ["absolute", "absolute"])
    param_dtype: str = "float32"
    dtype: str = "float32"  # compute dtype; GenSBI's default is bfloat16


@dataclass
class SimformerConfig(ModelConfig):
    """``SimformerParams`` fields, GenSBI's defaults but a CPU-run depth (GenSBI's: 8)."""
    name: str = "simformer"
    val_emb_dim: int = 40
    id_emb_dim: int = 40
    cond_emb_dim: int = 10
    num_heads: int = 4
    depth: int = 2
    num_hidden_layers: int = 1
    fourier_features: int = 128
    mlp_ratio: int = 3
    qkv_features: Optional[int] = 40  # None: val_emb_dim + id_emb_dim + cond_emb_dim
    param_dtype: str = "float32"
    dtype: str = "float32"  # compute dtype; GenSBI's default is bfloat16


@dataclass
class DataConfig:
    name: str = "two_moons"
    num_simulations: int = 10_000  # simulation budget, train + validation
    val_fraction: float = 0.1
    batch_size: int = 256  # global batch, split over the data-parallel devices
    num_observation: int = 1  # which of the task's 10 benchmark observations to condition on
    shards: Optional[int] = None  # data shards (seed streams); None: one per process
    # support (train in R^d through the prior's bijection) | none (as simulated; draws outside the prior rejected)
    theta_transform: str = "support"
    x_transform: str = "none"  # none | log (positive data spanning decades)


@dataclass
class TrainConfig:
    steps: int = 3000  # at most; early stopping may end sooner
    learning_rate: float = 3e-3  # peak of the schedule
    weight_decay: float = 1e-4
    schedule: str = "cosine"  # cosine (warm-up, then cosine decay to 0 at train.steps) | constant
    warmup_steps: int = 0
    ema_decay: float = 0.999  # EMA of the weights, validated and sampled; 0: no EMA
    val_every: int = 250  # validate (fixed keys) every N steps; 0: only at the end
    patience: int = 0  # stop after N validations without a new best; 0: never stop early
    val_draws: int = 8  # fixed (t, z) draws per validation pair: less noise in the loss that picks the best
    log_every: int = 100
    checkpoint_every: int = 0  # 0: only at the end
    keep: int = 2
    resume: Optional[str] = None


@dataclass
class EvalConfig:
    enabled: bool = True
    num_samples: int = 10_000  # posterior samples per observation, scored against as many reference rows
    batch_size: int = 2048  # posterior rows integrated at once: the sampler's device memory (flow_sampler.BATCH_ROWS)
    ode_steps: int = 32
    c2st_folds: int = 5
    observations: Optional[List[int]] = None  # e.g. [1,2,3]; None: [data.num_observation]
    c2st_jobs: int = 1  # C2ST folds fitted in parallel processes (-1: one per core); BLAS stays single-threaded
    plot: bool = True


@dataclass
class ActivationConfig:
    """Activation partition axes (``gensbi_sharding.activations.PartitionAxis``)."""

    strategy: str = "rule"  # rule (follow the weight rule) | fixed (PartitionAxis()) | none (no constraints)
    # Each field: "auto" (what the strategy gives), null (unsplit), a mesh axis, or a list of mesh axes.
    batch_axis: MeshAxesField = "auto"
    sequence_axis: MeshAxesField = "auto"
    query_sequence_axis: MeshAxesField = "auto"
    head_axis: MeshAxesField = "auto"
    key_sequence_axis: MeshAxesField = "auto"
    hidden_state_axis: MeshAxesField = "auto"
    attention_dim_axis: MeshAxesField = "auto"
    bias_head_sequence_axis: MeshAxesField = "auto"
    bias_key_sequence_axis: MeshAxesField = "auto"
    generation_query_sequence_axis: MeshAxesField = "auto"
    generation_head_axis: MeshAxesField = "auto"
    generation_key_sequence_axis: MeshAxesField = "auto"
    generation_attention_dim_axis: MeshAxesField = "auto"


@dataclass
class Config:
    mesh: MeshConfig = field(default_factory=MeshConfig)
    rule: Dict[str, MeshAxesField] = MISSING  # logical axis -> mesh axis | [mesh axes] | null, plus "name"
    model: ModelConfig = MISSING
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    activation: ActivationConfig = field(default_factory=ActivationConfig)
    devices: DevicesConfig = field(default_factory=DevicesConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    seed: int = 0
    strict: bool = False  # an unsplittable variable under a splitting rule is an error, not a warning
    dry_run: bool = False  # compile and report memory and collectives; do not train
    debug: bool = False  # full tracebacks instead of one-line errors
    verbose: bool = False  # print every variable's placement (always in sharding.txt and launch.log)


# name -> (dataclass, the ConfigNode storing it made): a schema the store still holds as stored is not stored again.
_STORED: dict = {}


def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    store = ConfigStore.instance()
    # Model schemas are stored outside every config group (conf/model/mlp.yaml pulls in "/mlp_schema"),
    # so they are never listed as options nor selectable as model=mlp_schema.
    schemas = [(f"{schema.name}_schema", schema) for schema in model_schema_classes()]
    for name, node in [("base_config", Config), *schemas]:
        # Storing builds the schema's structured config again (~23 ms for all, each call; the command checks call
        # this many times a command). Hydra deep-copies a stored node as it loads it, so the held one is unchanged.
        held = store.repo.get(f"{name}.yaml")
        if held is None or _STORED.get(name, (None, None))[0] is not node or _STORED[name][1] is not held:
            store.store(name=name, node=node)
            _STORED[name] = (node, store.repo[f"{name}.yaml"])
    # --help's group list (conf/config.yaml's template): Hydra's $APP_CONFIG_GROUPS would show internal groups.
    if not OmegaConf.has_resolver("gensbi_option_groups"):
        OmegaConf.register_new_resolver("gensbi_option_groups", option_groups_text)


def model_schema_classes() -> list[type]:
    """Every model's settings dataclass defined in this module, a user's own too, so adding the dataclass is the whole
    step (docs/gensbi_models.md#a-model-or-data-set-of-your-own-in-the-harness): what ``register_configs`` stores and
    the command-line checks know as models (not any subclass alive, one a test defined too)."""
    return [c for c in globals().values() if isinstance(c, type) and issubclass(c, ModelConfig)
            and c is not ModelConfig and "name" in vars(c)]


@functools.cache
def type_hints(schema: type) -> types.MappingProxyType:
    """``typing.get_type_hints(schema)``, read-only, resolved once per class: this module's annotations are strings
    (postponed evaluation), and resolving them per field was ~6 % of the command-line checks' CPU."""
    return types.MappingProxyType(typing.get_type_hints(schema))


def assignment_reason(schema: type, name: str, value: Any) -> str | None:
    """OmegaConf's reason (its message's first line) that ``value`` cannot be set as field ``name`` of ``schema``;
    None where it can. A command's checks ask of the same value several times (each check, job and checked fix),
    and building the schema's structured config was ~5 % of their CPU: a hashable value is judged once a process."""
    try:
        hash(value)
    except TypeError:  # a list or a dict: judged each time
        return _reason.__wrapped__(schema, name, repr(value), value)
    return _reason(schema, name, repr(value), value)


@functools.lru_cache(maxsize=1024)
def _reason(schema: type, name: str, shown: str, value: Any) -> str | None:  # shown: 1, 1.0 and True apart
    try:
        _fresh(schema)[name] = value
    except ValidationError as err:
        return str(err).strip().splitlines()[0]
    return None


def _fresh(schema: type) -> Any:
    """A structured config of ``schema`` of its own: unpickled from one built once a process (building it for each
    value judged was ~60 ms of a launch.py's checks of conf/'s files, ~1 ms a schema, ~12x its unpickling)."""
    built = _built(schema)
    return pickle.loads(built) if isinstance(built, bytes) else OmegaConf.structured(schema)


@functools.lru_cache(maxsize=None)
def _built(schema: type) -> bytes | None:
    """``schema``'s structured config, pickled; None for a schema pickle cannot name (one defined in a function)."""
    try:
        return pickle.dumps(OmegaConf.structured(schema))
    except (pickle.PicklingError, AttributeError, TypeError):
        return None


def require(ok: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``ok``.

    Parameters
    ----------
    ok : bool
        Whether the checked value can run.
    message : str
        Names the key, its value and the fix (the override to type).

    Raises
    ------
    ConfigError
        When ``ok`` is false.
    """
    if not ok:
        raise ConfigError(message)
