"""gensbi_sharding: the GenSBI / heal_swin_nnx sharding contract, and what it lacks.

Importing this package never starts JAX's backend: no arrays, keys or device
queries happen at import time, so a caller may still set the device count.
"""

from gensbi_sharding.sharding import *  # noqa: F401,F403
from gensbi_sharding.sharding import __all__ as _contract_all
from gensbi_sharding.sharding import _is_array  # noqa: F401  (part of the contract)

from gensbi_sharding.multihost import *  # noqa: F401,F403
from gensbi_sharding.multihost import __all__ as _multihost_all

from gensbi_sharding.activations import PartitionAxis, constrain  # noqa: E402
from gensbi_sharding.compiled import abstract_sharded, compiled_report  # noqa: E402
from gensbi_sharding.init import init_optimizer_sharded, init_sharded  # noqa: E402
from gensbi_sharding.report import bytes_per_device, describe, mesh_init_simulate, partition_specs  # noqa: E402

__all__ = list(_contract_all) + list(_multihost_all) + [
    "PartitionAxis", "constrain", "abstract_sharded", "compiled_report", "init_sharded",
    "init_optimizer_sharded", "bytes_per_device", "describe", "mesh_init_simulate", "partition_specs"]
__version__ = "0.1.0"
