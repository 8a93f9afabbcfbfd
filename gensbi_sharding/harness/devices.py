"""JAX start-up: the simulated CPU device count and distributed initialisation.

The only harness code that touches JAX's start-up. Both settings only take effect
before JAX's backend starts, so both refuse, with a clear error, to run after it
has started with other settings: a silent run on the wrong device count is a bug.
The device count has three sources (``devices.cpu_count``, ``JAX_NUM_CPU_DEVICES``,
``XLA_FLAGS=--xla_force_host_platform_device_count=N``); ``resolve_cpu_count``
(``cpu_count``'s, which needs no JAX) picks one and says which, or stops when two disagree.
"""

from __future__ import annotations

import contextlib
import os

import jax

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.cpu_count import (DEFAULT_CPU_COUNT, MAX_CPU_COUNT,  # noqa: F401 (re-exported)
                                               resolve_cpu_count)
from gensbi_sharding.harness.distributed_checks import check_cluster_ranks, partial_cluster
from gensbi_sharding.harness.processes import CLUSTER_VARIABLES
from gensbi_sharding.harness.rendezvous import check_coordinator  # noqa: F401 (re-exported)

__all__ = ["DEFAULT_CPU_COUNT", "MAX_CPU_COUNT", "resolve_cpu_count", "configure_devices", "initialize_distributed",
           "check_coordinator", "check_platform", "peak_bytes_in_use", "job_peak_metrics"]


def configure_devices(cpu_count: int, platform: str | None = None) -> None:
    """Ask for ``cpu_count`` simulated CPU devices before JAX's backend starts.

    On GPU/TPU the real devices are used and ``cpu_count`` is ignored. Asking again
    for the count in force (a later job of a multirun in the same process) is fine.

    Raises
    ------
    ConfigError
        If the backend already started on the CPU with a different device count, or JAX cannot start
        ``platform`` here (naming the platforms it has).
    """
    try:
        # JAX refuses to change this once its backend started (RuntimeError); there is no
        # public "has the backend started" query, so the refusal itself is the signal.
        jax.config.update("jax_num_cpu_devices", int(cpu_count))
    except RuntimeError:
        check_platform(platform, started=True)
        if jax.default_backend() != "cpu":
            return
        # Count this process's devices: across processes each simulates cpu_count of its own.
        have = jax.local_device_count()
        if have != cpu_count:
            raise ConfigError(
                f"devices.cpu_count={cpu_count} was asked for, but JAX's backend already started with "
                f"{have} CPU devices in this process; the count is fixed at start-up. Run in a fresh "
                f"process, or use devices.cpu_count={have}") from None
        return
    flags = _note_xla_flags(os.environ.get("XLA_FLAGS", ""))
    if platform is not None:
        jax.config.update("jax_platforms", platform)
    from gensbi_sharding.harness.native_console import straight_to_console

    # XLA reads XLA_FLAGS as the backend starts and exits at a flag it does not know, its one line on stderr: started
    # here with stderr on the console, so the user reads that line (the launch.log note above says the fix).
    with straight_to_console() if flags else contextlib.nullcontext():
        check_platform(platform, started=False)
        if flags:
            jax.devices()


def _note_xla_flags(flags: str) -> list[str]:
    """Name in launch.log (only: ``console.NATIVE``), before JAX's backend starts, the ``XLA_FLAGS`` it reads there;
    return them (the device count alone, the harness's own and checked, is neither named nor returned).

    XLA ends the process (exit 1) at a flag it does not know, with one line on stderr ("Unknown flag in XLA_FLAGS:
    --xla_bogus_flag=1", on the console: ``configure_devices``); no Python runs after it, and XLA lists its flags
    nowhere public (a probe process would cost every launch a second). The folder keeps ``.hydra/`` and a launch.log
    whose last line names the flags and the fix."""
    import logging
    import re

    from gensbi_sharding.harness.console import NATIVE

    if (others := re.sub(r"--xla_force_host_platform_device_count=\S*", "", flags).split()):
        logging.getLogger(NATIVE).info(
            "XLA_FLAGS holds %s, which XLA reads as JAX's backend starts, next: a flag it does not know ends the "
            "process there (exit 1; XLA's \"Unknown flag in XLA_FLAGS\" line, if it reaches stderr) and nothing more "
            "is written here: if this is the attempt's last line, remove that flag from XLA_FLAGS and run the same "
            "command again (this folder holds no outputs of it; the next run uses it)", " ".join(others))
    return others


#: Probed as fixes (JAX's "gpu" asks for cuda, rocm and oneapi); as default_backend names them; JAX_PLATFORMS refused.
_PLATFORMS, _GPU, _REFUSED = ("cpu", "cuda", "rocm", "tpu"), {"cuda": "gpu", "rocm": "gpu"}, set()


def check_platform(platform: str | None, *, started: bool) -> None:
    """``ConfigError`` naming ``devices.platform`` (else ``JAX_PLATFORMS``), the platforms JAX has, and the fix."""
    env = os.environ.get("JAX_PLATFORMS") if platform is None else None
    if platform is None and not env:
        return
    try:  # a multirun's later job: refused again (JAX keeps what it started of 'cpu,tpu'), on a platform it names
        if env and (env in _REFUSED or jax.default_backend() not in {_GPU.get(n, n) for n in env.split(",")}):
            raise RuntimeError(env)
        jax.devices(platform)  # starts the backend on it (as the run would a line later)
        return
    except (RuntimeError, AssertionError):  # JAX_PLATFORMS=cuda without a CUDA jaxlib: a bare AssertionError
        _REFUSED.add(env)
    if not started:  # back to JAX's default, for the probe below and a later job in this process
        jax.config.update("jax_platforms", None)
    available = []
    for name in _PLATFORMS:
        try:
            jax.devices(name)
            available.append(name)
        except RuntimeError:  # jax.devices' answer for a platform it cannot start
            pass
    have, fit = f"is not available here: JAX has {', '.join(available) or 'none'}", (available or ["cpu"])[0]
    if env:  # the environment's, not the config's
        raise ConfigError(f"JAX_PLATFORMS={env if env.strip() == env else repr(env)} {have}; unset JAX_PLATFORMS for "
                          f"JAX's default, or set JAX_PLATFORMS={fit}")
    raise ConfigError(f"devices.platform={platform} {have}; set devices.platform={fit}, or devices.platform=null for "
                      "JAX's default")


def peak_bytes_in_use() -> int | None:
    """The largest peak of allocated device memory (bytes) over this process's devices so far.

    From ``jax.Device.memory_stats()`` (the allocator's ``peak_bytes_in_use``, GPU and TPU).
    Returns None where the backend keeps no statistics (XLA:CPU).
    """
    peaks = [stats["peak_bytes_in_use"] for stats in (d.memory_stats() for d in jax.local_devices())
             if stats and "peak_bytes_in_use" in stats]
    return max(peaks) if peaks else None


def job_peak_metrics(before: int | None, after: int | None) -> dict[str, int | None]:
    """A job's ``device_peak_bytes`` from ``peak_bytes_in_use()`` at its start and at its end.

    The allocator's peak is the process's high-water mark, never reset: the jobs of a multirun
    that share one process (Hydra's basic launcher) would each report the largest peak of the
    jobs before them. A peak that rose during the job is the job's own; one that did not only
    bounds it: then ``device_peak_bytes`` is None and ``device_peak_bytes_at_most`` holds the
    bound. Both None where the backend keeps no statistics (XLA:CPU).
    """
    if after is not None and before is not None and after <= before:
        return {"device_peak_bytes": None, "device_peak_bytes_at_most": after}
    return {"device_peak_bytes": after}


def initialize_distributed(mode: str, *, coordinator_address: str | None = None,
                           num_processes: int | None = None, process_id: int | None = None,
                           timeout_s: int = 120, heartbeat_s: int = 10) -> None:
    """``jax.distributed.initialize`` for ``mode`` "auto" or "explicit"; "none" does nothing.

    Calling it when already initialised is a no-op. CPU collectives use gloo, so
    several processes on one machine (or CPU hosts) can run collectives. In explicit
    mode the coordinator is checked first (``check_coordinator``), so an address
    nobody serves ends the job with an error naming it instead of an abort in C++.

    Raises
    ------
    ConfigError
        If the backend already started (initialisation must come first),
        ``mode="explicit"`` lacks one of the three fields, or the coordinator cannot be
        reached within ``timeout_s``.
    """
    if mode == "none" or jax.distributed.is_initialized():
        return
    if mode == "explicit":
        missing = [name for name, value in (("coordinator_address", coordinator_address),
                                            ("num_processes", num_processes),
                                            ("process_id", process_id)) if value is None]
        if missing:
            raise ConfigError(f"distributed.mode=explicit needs distributed.{missing[0]} "
                              f"(missing: {', '.join(missing)})")
        check_coordinator(coordinator_address, process_id, num_processes, timeout_s)
        kwargs = {"coordinator_address": coordinator_address, "num_processes": num_processes,
                  "process_id": process_id}
    else:
        kwargs = check_cluster_ranks(CLUSTER_VARIABLES)  # {}: JAX reads them; inconsistent ones refused first
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(initialization_timeout=timeout_s, **kwargs, **_bounds(heartbeat_s))
    except ValueError as err:  # auto: JAX found no cluster environment to read its coordinates from
        if mode == "explicit":  # JAX's own value checks: not a missing cluster, which the message below would say
            raise ConfigError(f"distributed.mode=explicit refused by jax.distributed.initialize: {err}") from None
        raise ConfigError(
            f"distributed=auto found no cluster (SLURM, Open MPI, TPU pod) to join: {err}"
            f"{partial_cluster(CLUSTER_VARIABLES)} Use distributed=none on one machine, distributed=local to try "
            "several local processes, or distributed.mode=explicit with coordinator_address, num_processes "
            "and process_id") from None
    except RuntimeError as err:  # JAX refuses once its backend started
        raise ConfigError(f"distributed.mode={mode} needs jax.distributed.initialize() before JAX's backend "
                          f"starts, but it refused ({err}); start a fresh process") from None


def _bounds(heartbeat_s: int) -> dict:
    # JAX's defaults (100 s heartbeat, 300 s shutdown barrier) let a dead peer stall the
    # others for minutes; a failed process should end the job within seconds.
    return {"heartbeat_timeout_seconds": heartbeat_s, "shutdown_timeout_seconds": heartbeat_s}
