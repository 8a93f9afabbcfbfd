"""gensbi_sharding: the GenSBI / heal_swin_nnx sharding contract, one plan at its centre, and what it lacks.

Importing it never starts JAX's backend; ``gensbi_sharding.checkpoint`` (Orbax) is imported on its own.
"""

from gensbi_sharding.activations import PartitionAxis, constrain
from gensbi_sharding.batch import (batch_axes, batch_size_divisor, check_batch_divisible, nearest_batch_sizes,
                                   pad_for_mesh, replicate, shard_batch, shard_sample_init)
from gensbi_sharding.host_input import DataPartitionType, host_to_global_array, input_partition_spec
from gensbi_sharding.init import abstract_sharded, init_optimizer_sharded, init_sharded
from gensbi_sharding.mesh import check_model_groups_local, make_mesh, mesh_context, resolve_mesh
from gensbi_sharding.compiled import compiled_report
from gensbi_sharding.report import bytes_per_device, describe, mesh_init_simulate, partition_specs
from gensbi_sharding.rules import (LOGICAL_AXES, MODEL_AXIS, RULES, MeshAxes, Rule, RuleTable, partition_spec_for,
                                   resolve_rule)
from gensbi_sharding.sharding import (ExperimentalRuleWarning, Plan, ShardingFallbackWarning, axes, logical_axes_of,
                                      partitioned, place, plan_shardings, shard_model, shard_model_by_table,
                                      sharding_of)

__all__ = [
    # the contract (pinned against heal_swin_nnx)
    "LOGICAL_AXES", "MODEL_AXIS", "RULES", "ShardingFallbackWarning", "ExperimentalRuleWarning",
    "axes", "partitioned", "logical_axes_of", "shard_model", "sharding_of",
    "make_mesh", "batch_axes", "batch_size_divisor", "check_batch_divisible", "shard_batch",
    # rules and the plan
    "MeshAxes", "RuleTable", "Rule", "Plan", "resolve_rule", "partition_spec_for", "plan_shardings",
    "place", "shard_model_by_table",
    # mesh and batches
    "resolve_mesh", "mesh_context", "check_model_groups_local", "nearest_batch_sizes", "pad_for_mesh", "shard_sample_init",
    "replicate", "DataPartitionType", "input_partition_spec", "host_to_global_array",
    # initialisation and reports
    "init_sharded", "abstract_sharded", "init_optimizer_sharded",
    "describe", "bytes_per_device", "partition_specs", "mesh_init_simulate", "compiled_report",
    # activations
    "PartitionAxis", "constrain",
]
__version__ = "0.1.0"
