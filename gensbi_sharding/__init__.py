"""gensbi_sharding: the GenSBI / heal_swin_nnx sharding contract, and what it lacks.

Importing this package never starts JAX's backend: no arrays, keys or device
queries happen at import time, so a caller may still set the device count.
"""

from gensbi_sharding.sharding import *  # noqa: F401,F403
from gensbi_sharding.sharding import __all__ as _contract_all
from gensbi_sharding.sharding import _is_array  # noqa: F401  (part of the contract)

from gensbi_sharding.multihost import *  # noqa: F401,F403
from gensbi_sharding.multihost import __all__ as _multihost_all

__all__ = list(_contract_all) + list(_multihost_all)
__version__ = "0.1.0"
