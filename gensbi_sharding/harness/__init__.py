"""The Hydra experiment harness: config -> mesh -> sharded model and data -> train -> C2ST -> outputs.

Nothing here is imported by the library modules (``gensbi_sharding.sharding`` and friends);
the dependency points one way only.
"""


def __getattr__(name: str):
    # gensbi_sharding.harness.run(cfg) with the job's module not imported yet: imported when asked, so importing the
    # package stays light (launch.py's imports start no JAX)
    if name == "run":
        import importlib

        return importlib.import_module(f"{__name__}.run")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
