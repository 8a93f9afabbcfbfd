"""gensbi_sharding: the GenSBI / heal_swin_nnx sharding contract, one plan at its centre, and what it lacks.

Importing it never starts JAX's backend, nor imports JAX or Flax: each name below is imported from its module
when first read (PEP 562), so the harness's config and command-line checks need neither (``launch.py --help``,
a refused command). ``gensbi_sharding.checkpoint`` (Orbax) is imported on its own.
"""

import importlib

#: Each public name's module (``gensbi_sharding.<module>``), imported when the name is first read.
_MODULES = {
    "activations": ("PartitionAxis", "constrain"),
    "annotations": ("axes", "logical_axes_of", "partitioned"),
    "batch": ("batch_axes", "batch_size_divisor", "check_batch_divisible", "pad_for_mesh", "replicate", "shard_batch",
              "shard_sample_init"),
    "batch_sizes": ("nearest_batch_sizes",),
    "host_input": ("DataPartitionType", "host_to_global_array", "input_partition_spec"),
    "init": ("abstract_sharded", "init_optimizer_sharded", "init_sharded"),
    "mesh": ("check_model_groups_local", "make_mesh", "mesh_context", "resolve_mesh"),
    "compiled": ("compiled_report",),
    "report": ("bytes_per_device", "describe", "partition_specs", "sharding_of"),
    "simulate": ("mesh_init_simulate",),
    "rules": ("ExperimentalRuleWarning", "LOGICAL_AXES", "MODEL_AXIS", "RULES", "MeshAxes", "Rule", "RuleTable",
              "ShardingFallbackWarning", "resolve_rule"),
    "specs": ("partition_spec_for",),
    "sharding": ("Plan", "place", "plan_shardings", "shard_model", "shard_model_by_table"),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_MODULE_OF)
__version__ = "0.1.0"


def __getattr__(name: str):
    """A public name, imported from its module on first read and kept here; else ``AttributeError``."""
    if name in _MODULES or name == "nodes":  # a module the package imported up front, read as an attribute (gs.rules)
        return importlib.import_module(f"gensbi_sharding.{name}")
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'gensbi_sharding' has no attribute {name!r}")
    return globals().setdefault(name, getattr(importlib.import_module(f"gensbi_sharding.{_MODULE_OF[name]}"), name))


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
