"""The Hydra experiment harness: config -> mesh -> sharded model and data -> train -> C2ST -> outputs.

Nothing here is imported by the library modules (``gensbi_sharding.sharding`` and friends);
the dependency points one way only.
"""
