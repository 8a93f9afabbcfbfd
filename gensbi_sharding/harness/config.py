"""The typed run configuration: dataclasses in Hydra's ConfigStore, validated once.

Every YAML file under ``conf/`` is merged onto these schemas, so a mistyped key
(``mesh.modle_axis=2``) or a wrong type (``train.steps=ten``) is rejected by
Hydra with the key's name before anything runs. What a type cannot say (ranges,
choices, the rule table) is checked by ``validate`` and raised as
``ConfigError`` naming the key and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from gensbi_sharding import LOGICAL_AXES, RULES, PartitionAxis, Rule
from gensbi_sharding.harness.groups import chosen_options, option_groups_text
from gensbi_sharding.harness.hints import mesh_axis_fix
from gensbi_sharding.harness.name_hints import registered_name_problem

__all__ = ["ConfigError", "Config", "register_configs", "validate", "rule_table", "as_rule", "mesh_spec",
           "partition_axis_from_config"]


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
    theta_transform: str = "support"  # support (train in R^d through the prior's bijection) | none
    x_transform: str = "none"  # none | log (positive data spanning decades)


@dataclass
class TrainConfig:
    steps: int = 4000  # at most; early stopping may end sooner
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


def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    store = ConfigStore.instance()
    store.store(name="base_config", node=Config)
    # Model schemas are stored outside every config group (conf/model/mlp.yaml pulls in "/mlp_schema"),
    # so they are never listed as options nor selectable as model=mlp_schema.
    store.store(name="mlp_schema", node=MLPConfig)
    store.store(name="transformer_schema", node=TransformerConfig)
    store.store(name="flux1_schema", node=Flux1Config)
    store.store(name="simformer_schema", node=SimformerConfig)
    # --help's group list (conf/config.yaml's template): Hydra's $APP_CONFIG_GROUPS would show internal groups.
    if not OmegaConf.has_resolver("gensbi_option_groups"):
        OmegaConf.register_new_resolver("gensbi_option_groups", option_groups_text)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(cfg: DictConfig) -> None:
    """Check what the types cannot: ranges, choices, registered names and the rule table.

    Raises
    ------
    ConfigError
        Naming the first bad key, its value and the override that fixes it (a message
        that names none gets the key's schema default, which every check accepts).
    """
    try:
        _validate(cfg)
    except ConfigError as err:
        raise ConfigError(_with_fix(str(err))) from None
    problem = registered_name_problem(cfg, chosen_options())  # model.name, data.name, rule.name
    if problem:
        raise ConfigError(problem)


def _with_fix(message: str) -> str:
    """``message`` + "; e.g. <key>=<schema default>" when it names a ``key=value`` but no override to type."""
    if re.search(r"(e\.g\.|set|add|use) [a-z_]+\.[a-z0-9_.]+=", message):
        return message
    named = re.match(r"([a-z_]+)\.([a-z0-9_]+)=", message)
    if not named:
        return message
    group, key = named.groups()
    schema = _SECTIONS.get(group)
    defaults = {f.name: f.default for f in dataclasses.fields(schema)} if schema else {}
    default = defaults.get(key, MISSING)
    if default is MISSING or default is dataclasses.MISSING:
        return message
    text = "null" if default is None else str(default).replace(" ", "")
    return f"{message}; e.g. {group}.{key}={text}"


#: Config sections whose dataclass defaults are valid values, named as the fix of a refused one.
_SECTIONS = {"mesh": MeshConfig, "model": ModelConfig, "data": DataConfig, "train": TrainConfig, "eval": EvalConfig,
             "devices": DevicesConfig, "distributed": DistributedConfig}


def _validate(cfg: DictConfig) -> None:
    _check(cfg.mesh.spec in (None, "auto", "dict"),
           f"mesh.spec={cfg.mesh.spec!r} is not one of null, auto, dict (e.g. mesh=auto)")
    _check(cfg.mesh.model_axis >= 1, f"mesh.model_axis={cfg.mesh.model_axis} must be >= 1")
    _check(cfg.mesh.spec == "dict" or (cfg.mesh.model_axis == 1 and cfg.mesh.devices is None),
           f"mesh.model_axis / mesh.devices need the dict form: use mesh=dict "
           f"mesh.model_axis={cfg.mesh.model_axis} instead of mesh={cfg.mesh.spec or 'none'}")
    _check(cfg.model.init in ("sharded", "eager"),
           f"model.init={cfg.model.init!r} is not one of sharded, eager")
    for key in ("num_simulations", "batch_size", "num_observation"):
        _check(cfg.data[key] >= 1, f"data.{key}={cfg.data[key]} must be >= 1")
    _check(0.0 < cfg.data.val_fraction < 1.0,
           f"data.val_fraction={cfg.data.val_fraction} must lie strictly between 0 and 1")
    _check(cfg.train.steps >= 1, f"train.steps={cfg.train.steps} must be >= 1")
    _check(cfg.train.log_every >= 1, f"train.log_every={cfg.train.log_every} must be >= 1")
    _check(cfg.train.learning_rate > 0, f"train.learning_rate={cfg.train.learning_rate} must be > 0")
    _check(cfg.train.checkpoint_every >= 0,
           f"train.checkpoint_every={cfg.train.checkpoint_every} must be >= 0 (0: only at the end)")
    _check(cfg.train.keep >= 1, f"train.keep={cfg.train.keep} must be >= 1")
    _check(cfg.eval.num_samples >= 2 * cfg.eval.c2st_folds and cfg.eval.c2st_folds >= 2,
           f"eval.num_samples={cfg.eval.num_samples} must be >= 2 * eval.c2st_folds and "
           f"eval.c2st_folds={cfg.eval.c2st_folds} >= 2; set "
           + ("eval.c2st_folds=5" if cfg.eval.c2st_folds < 2 else f"eval.num_samples={2 * cfg.eval.c2st_folds}"))
    _check(cfg.eval.ode_steps >= 1, f"eval.ode_steps={cfg.eval.ode_steps} must be >= 1")
    _check(all(1 <= o <= 10 for o in cfg.eval.observations or ()) and cfg.eval.observations != [],
           f"eval.observations={cfg.eval.observations} must list sbibm observations 1..10, e.g. "
           "eval.observations=[1,2,3], or be null for data.num_observation")
    unique = list(dict.fromkeys(cfg.eval.observations or ()))
    _check(len(unique) == len(cfg.eval.observations or ()),
           f"eval.observations={list(cfg.eval.observations or ())} lists an observation twice (it would be scored and "
           f"averaged twice); set eval.observations=[{','.join(map(str, unique))}]")
    _check(cfg.eval.c2st_jobs >= 1 or cfg.eval.c2st_jobs == -1,
           f"eval.c2st_jobs={cfg.eval.c2st_jobs} must be >= 1, or -1 for one per core")
    _check(cfg.train.schedule in ("cosine", "constant"),
           f"train.schedule={cfg.train.schedule!r} is not one of cosine, constant")
    _check(0 <= cfg.train.warmup_steps < cfg.train.steps,
           f"train.warmup_steps={cfg.train.warmup_steps} must lie in 0..train.steps-1 ({cfg.train.steps - 1})")
    _check(0.0 <= cfg.train.ema_decay < 1.0,
           f"train.ema_decay={cfg.train.ema_decay} must lie in [0, 1) (0: no EMA), e.g. train.ema_decay=0.999")
    for key in ("val_every", "patience"):
        _check(cfg.train[key] >= 0, f"train.{key}={cfg.train[key]} must be >= 0 (0: off)")
    every = max(1, min(250, cfg.train.steps // 4))
    # (val_every >= steps is let through: a short run of a preset with patience, e.g. experiment=sbibm train.steps=100)
    _check(cfg.train.patience == 0 or cfg.train.val_every > 0,
           f"train.patience={cfg.train.patience} needs validations during training, but train.val_every=0 "
           f"validates only after the last step; set train.val_every={every}, or train.patience=0 for no early "
           "stopping")
    _check(cfg.train.val_draws >= 1, f"train.val_draws={cfg.train.val_draws} must be >= 1")
    resume = cfg.train.resume
    # An unset shell variable (train.resume=$CKPT) must not start a fresh run without a word.
    _check(resume is None or str(resume).strip() != "",
           f"train.resume={resume!r} is empty: pass train.resume=auto (this run's folder), a run or checkpoint "
           "folder, or leave it out to start fresh")
    _check(resume is None or str(resume) == "auto" or str(resume).strip().lower() != "auto",
           f"train.resume={resume!r} is read as a folder name; to continue from this run's own folder, "
           "pass train.resume=auto (lower case)")
    _check(cfg.data.theta_transform in ("support", "none"),
           f"data.theta_transform={cfg.data.theta_transform!r} is not one of support, none")
    _check(cfg.data.x_transform in ("none", "log"),
           f"data.x_transform={cfg.data.x_transform!r} is not one of none, log")
    _check(cfg.train.weight_decay >= 0, f"train.weight_decay={cfg.train.weight_decay} must be >= 0")
    _check(cfg.data.shards is None or cfg.data.shards >= 1,
           f"data.shards={cfg.data.shards} must be >= 1, or null for one per process")
    _check(cfg.devices.cpu_count is None or cfg.devices.cpu_count >= 1,
           f"devices.cpu_count={cfg.devices.cpu_count} must be >= 1")
    for key in ("local_processes", "timeout_s", "heartbeat_s", "run_timeout_s"):
        _check(cfg.distributed[key] >= 1, f"distributed.{key}={cfg.distributed[key]} must be >= 1")
    _check(cfg.distributed.mode in ("none", "auto", "explicit"),
           f"distributed.mode={cfg.distributed.mode!r} is not one of none, auto, explicit")
    name, table = rule_table(cfg.rule)
    try:  # keys and strategy only: the mesh axes are checked once the mesh exists
        partition_axis_from_config(OmegaConf.to_container(cfg.activation), table, None)
    except ValueError as err:
        raise ConfigError(f"activation: {err}") from None


def mesh_spec(mesh: DictConfig) -> Any:
    """The contract's mesh spec for ``resolve_mesh``: None, "auto" or a mapping."""
    if mesh.spec is None:
        return None
    if mesh.spec == "auto":
        return "auto"
    return {"model_axis": mesh.model_axis, "devices": mesh.devices}


def rule_table(rule: Any) -> tuple[str, dict[str, Any]]:
    """``(name, table)`` of a rule config: a mapping of logical axes plus an optional ``name``.

    Table values are a mesh axis name, a list of mesh axis names, or null. Whether
    the mesh has those axes is checked later, against the resolved mesh
    (``check_table_against_mesh``).

    Raises
    ------
    ConfigError
        For a key outside ``LOGICAL_AXES`` or a value of another type.
    """
    if isinstance(rule, str):  # rule given as a bare name, e.g. from Python
        _check(rule in RULES, f"unknown rule {rule!r}; choose one of {', '.join(RULES)} "
                              "or write a table in conf/rule/")
        return rule, dict(RULES[rule])
    _check(isinstance(rule, (DictConfig, dict)),
           f"rule must be a mapping of logical axes to mesh axes, got {rule!r}")
    raw = OmegaConf.to_container(rule, resolve=True) if isinstance(rule, DictConfig) else dict(rule)
    name = raw.pop("name", None) or "custom"
    table: dict[str, Any] = {}
    for key, value in raw.items():
        _check(key in LOGICAL_AXES, f"rule.{key} is not a logical axis; valid keys: "
                                    f"{', '.join(LOGICAL_AXES)} (and name)")
        if isinstance(value, (list, tuple, ListConfig)):
            _check(len(value) > 0 and all(isinstance(v, str) for v in value),
                   f"rule.{key}={value!r}: a list must hold mesh axis names")
            _check(len(set(value)) == len(value), f"rule.{key}={list(value)!r} names a mesh axis twice; "
                                                  "list each mesh axis once")
            value = tuple(value)
        else:
            _check(value is None or isinstance(value, str),
                   f"rule.{key}={value!r} must be a mesh axis name, a list of them, or null")
        table[key] = value
    for key in LOGICAL_AXES:
        table.setdefault(key, None)
    if name in RULES and table != dict(RULES[name]):  # e.g. rule=fsdp rule.mlp=model
        name = f"{name}+overrides"
    return name, table


def as_rule(name: str, table: dict[str, Any]) -> Rule:
    """The library's ``Rule`` for ``rule_table``'s ``(name, table)``.

    A table equal to the contract's rule of that name is that rule (placed with the
    contract's semantics, e.g. "replicated" ignores annotations); any other is a table.
    """
    return Rule(name, dict(table), builtin=name in RULES and table == dict(RULES[name]))


def check_table_against_mesh(name: str, table: dict[str, Any], mesh_axes: tuple[str, ...]) -> None:
    """Every mesh axis a rule table names must exist on the resolved mesh.

    Raises
    ------
    ConfigError
        Naming the entry, the mesh's axes and the valid values.
    """
    for key, value in table.items():
        for axis in (value,) if isinstance(value, str) else (value or ()):
            _check(axis in mesh_axes,
                   f"rule.{key}={axis!r} (rule {name!r}) names a mesh axis the mesh lacks; valid "
                   f"values: {', '.join(mesh_axes) or '(none: no mesh)'} or null; "
                   f"set rule.{key}={mesh_axis_fix(value, mesh_axes)}")


#: ``activation.strategy`` values: from the weight rule, ``PartitionAxis()`` defaults, or none.
ACTIVATION_STRATEGIES = ("rule", "fixed", "none")
AUTO = "auto"  # an activation field left to the strategy


def partition_axis_from_config(cfg: Mapping[str, Any], rule: Any, mesh: Any) -> PartitionAxis | None:
    """The strategy an ``activation`` config selects: ``strategy`` plus per-field overrides.

    ``strategy`` is "rule" (``PartitionAxis.for_rule(rule, mesh)``), "fixed"
    (``PartitionAxis()``) or "none" (no constraints: returns None). Every other key is
    a ``PartitionAxis`` field; a value other than "auto" (None, a mesh axis or a list
    of them) replaces what the strategy chose. Without a mesh, returns None.

    Raises
    ------
    ValueError
        For an unknown strategy or key, or a value that does not resolve on ``mesh``.
    """
    strategy = cfg.get("strategy", "rule")
    if strategy not in ACTIVATION_STRATEGIES:
        raise ValueError(f"activation strategy {strategy!r} is not one of "
                         f"{', '.join(ACTIVATION_STRATEGIES)}; e.g. activation.strategy=rule")
    fields = {k: v for k, v in cfg.items() if k != "strategy"}
    unknown = [k for k in fields if k not in PartitionAxis._fields]
    if unknown:
        raise ValueError(f"activation key {unknown[0]!r} is not a PartitionAxis field; valid keys: "
                         f"strategy, {', '.join(PartitionAxis._fields)}")
    if strategy == "none" or mesh is None:
        return None
    base = PartitionAxis.for_rule(rule, mesh) if strategy == "rule" else PartitionAxis()
    changes = {k: v for k, v in fields.items() if not (isinstance(v, str) and v == AUTO)}
    for key, value in changes.items():  # named as the override to type, with a value that works
        lacking = [a for a in ((value,) if isinstance(value, str) else value or ()) if a not in mesh.axis_names]
        if lacking:
            fix = mesh_axis_fix(value, mesh.axis_names)
            raise ValueError(f"{key}={value!r} names mesh axis {lacking[0]!r}, which the mesh lacks (axes: "
                             f"{', '.join(mesh.axis_names)}); set activation.{key}={fix}"
                             + ("" if fix == "null" else " (or null: unsplit)"))
    return base._replace(**changes).resolve(mesh)
