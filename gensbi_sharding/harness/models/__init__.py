"""Velocity-field models, registered by name (importing this package registers them)."""

from gensbi_sharding.harness.models import mlp, transformer  # noqa: F401
