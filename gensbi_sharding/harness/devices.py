"""JAX start-up: the simulated CPU device count and distributed initialisation.

The only harness code that touches JAX's start-up. Both settings only take effect
before JAX's backend starts, so both refuse, with a clear error, to run after it
has started with other settings: a silent run on the wrong device count is a bug.
"""

from __future__ import annotations

import jax
from jax._src import xla_bridge

from gensbi_sharding.harness.config import ConfigError

__all__ = ["backend_started", "configure_devices", "initialize_distributed"]


def backend_started() -> bool:
    """Whether JAX's backend has started (after which the device count is fixed)."""
    return xla_bridge.backends_are_initialized()


def configure_devices(cpu_count: int, platform: str | None = None) -> None:
    """Ask for ``cpu_count`` simulated CPU devices before JAX's backend starts.

    On GPU/TPU the real devices are used and ``cpu_count`` is ignored. Asking again
    for the count in force (a later job of a multirun in the same process) is fine.

    Raises
    ------
    ConfigError
        If the backend already started on the CPU with a different device count.
    """
    if not backend_started():
        if platform is not None:
            jax.config.update("jax_platforms", platform)
        jax.config.update("jax_num_cpu_devices", int(cpu_count))
        return
    if jax.default_backend() != "cpu":
        return
    # Count this process's devices: across processes each simulates cpu_count of its own.
    have = jax.local_device_count()
    if have != cpu_count:
        raise ConfigError(
            f"devices.cpu_count={cpu_count} was asked for, but JAX's backend already started with "
            f"{have} CPU devices in this process; the count is fixed at start-up. Run in a fresh "
            f"process, or use devices.cpu_count={have}")


def initialize_distributed(mode: str, *, coordinator_address: str | None = None,
                           num_processes: int | None = None, process_id: int | None = None,
                           timeout_s: int = 120, heartbeat_s: int = 10) -> None:
    """``jax.distributed.initialize`` for ``mode`` "auto" or "explicit"; "none" does nothing.

    Calling it when already initialised is a no-op. CPU collectives use gloo, so
    several processes on one machine (or CPU hosts) can run collectives.

    Raises
    ------
    ConfigError
        If the backend already started (initialisation must come first), or
        ``mode="explicit"`` lacks one of the three fields.
    """
    if mode == "none":
        return
    if _distributed_initialized():
        return
    if backend_started():
        raise ConfigError(
            f"distributed.mode={mode} needs jax.distributed.initialize() before JAX's backend "
            "starts, but the backend already started in this process; start a fresh process")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if mode == "auto":
        try:
            jax.distributed.initialize(initialization_timeout=timeout_s, **_bounds(heartbeat_s))
        except ValueError as err:  # JAX found no cluster environment to read its coordinates from
            raise ConfigError(
                f"distributed=auto found no cluster (SLURM, Open MPI, TPU pod) to join: {err} "
                "Use distributed=none on one machine, distributed=local to try several local "
                "processes, or distributed.mode=explicit with coordinator_address, num_processes "
                "and process_id") from None
        return
    missing = [name for name, value in (("coordinator_address", coordinator_address),
                                        ("num_processes", num_processes),
                                        ("process_id", process_id)) if value is None]
    if missing:
        raise ConfigError(f"distributed.mode=explicit needs distributed.{missing[0]} "
                          f"(missing: {', '.join(missing)})")
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes, process_id=process_id,
                               initialization_timeout=timeout_s, **_bounds(heartbeat_s))


def _bounds(heartbeat_s: int) -> dict:
    # JAX's defaults (100 s heartbeat, 300 s shutdown barrier) let a dead peer stall the
    # others for minutes; a failed process should end the job within seconds.
    return {"heartbeat_timeout_seconds": heartbeat_s, "shutdown_timeout_seconds": heartbeat_s}


def _distributed_initialized() -> bool:
    from jax._src import distributed

    return distributed.global_state.client is not None
