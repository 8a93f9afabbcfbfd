"""Velocity-field models, registered by name (importing this package registers them).

``flux1`` and ``simformer`` wrap GenSBI's own models; importing their modules does not
import GenSBI (only building one does), so the harness runs without the ``gensbi`` extra.
"""

from gensbi_sharding.harness.models import flux1, mlp, simformer, transformer  # noqa: F401
