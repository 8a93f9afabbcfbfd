"""The simulated CPU device count a job asks JAX for, and where it comes from; before JAX is imported.

A job's device count is checked before it starts (``job_check.job_problem``, launch.py's refusal of a single run
before Hydra makes its folder): importing ``devices`` for it imported JAX (~1 s of a refusal that needs none).
``devices`` starts JAX with the count (``configure_devices``) and re-exports this. Pure Python: no JAX.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["DEFAULT_CPU_COUNT", "MAX_CPU_COUNT", "resolve_cpu_count", "cpu_devices_known", "platform_start_problem",
           "start_problem", "jit_disabled_problem", "count_setting", "accelerators_installed"]

#: Simulated CPU devices when neither the config nor the environment names a count.
DEFAULT_CPU_COUNT = 8
#: The most simulated CPU devices asked of JAX: its start-up grows with the count (14 s for 1,024 on 2 cores),
#: and 100,000 did not start in minutes, deaf to SIGTERM. Planning and the dry run's figures need no more.
MAX_CPU_COUNT = 1024
_XLA_COUNT = re.compile(r"--xla_force_host_platform_device_count=(\d+)")
_UNSET = {"JAX_NUM_CPU_DEVICES": "unset JAX_NUM_CPU_DEVICES", "XLA_FLAGS": "remove the count from XLA_FLAGS"}


def resolve_cpu_count(configured: int | None, environ: dict | None = None) -> tuple[int, str]:
    """The simulated CPU device count in force and where it comes from.

    ``devices.cpu_count`` (``configured``) when given, else ``JAX_NUM_CPU_DEVICES``, else
    the count in ``XLA_FLAGS``, else ``DEFAULT_CPU_COUNT``.

    Returns
    -------
    (int, str)
        The count and its source, e.g. ``(4, "XLA_FLAGS")``.

    Raises
    ------
    ConfigError
        If two of the sources that are set disagree; the message names both and a fix that is
        accepted (between the two environment variables: unset one; no ``devices.cpu_count`` settles it),
        or if the count in force exceeds ``MAX_CPU_COUNT``, or is an environment's 0 (JAX cannot start on none;
        beside ``devices.cpu_count`` a 0 is overridden, as JAX takes the harness's count over the environment's).
    """
    environ = os.environ if environ is None else environ
    sources = []
    if configured is not None:
        sources.append(("devices.cpu_count", int(configured)))
    if environ.get("JAX_NUM_CPU_DEVICES", "").strip().lstrip("-").isdigit():
        sources.append(("JAX_NUM_CPU_DEVICES", int(environ["JAX_NUM_CPU_DEVICES"])))
    flag = _XLA_COUNT.findall(environ.get("XLA_FLAGS", ""))
    if flag:
        sources.append(("XLA_FLAGS", int(flag[-1])))
    # the count JAX would start with (-1: "not set"); beside devices.cpu_count none (the harness sets JAX's count)
    used = None if configured is not None else next(((name, n) for name, n in sources if n >= 0), None)
    if used is not None and used[1] == 0:
        # JAX cannot start on none ("Could not determine process_index"): was replaced by 8, said "(from default)".
        zero, zeros = used[0], [name for name, n in sources if n == 0]
        said = "XLA_FLAGS's --xla_force_host_platform_device_count=0" if zero == "XLA_FLAGS" else f"{zero}=0"
        # what unsetting leaves: the other variable's count, else the default (not "8" beside XLA_FLAGS' 4)
        left, count = next(((f"{name}'s count", n) for name, n in sources if name != zero and n > 0),
                           ("the default count", DEFAULT_CPU_COUNT))
        raise ConfigError(f"{said} asks for no simulated CPU devices, on which JAX cannot start; "
                          f"{' and '.join(_UNSET[name] for name in zeros)} to use {left} ({count}), "
                          f"or set {count_setting(zero, environ)}{count}")
    sources = [(name, n) for name, n in sources if n > 0]  # JAX reads -1 as "not set"
    environment = [(name, n) for name, n in sources if name != "devices.cpu_count"]
    if len({n for _, n in environment}) > 1:  # no devices.cpu_count settles it: JAX reads both variables
        (_, n), (_, m) = environment
        raise ConfigError(
            f"the environment sets two device counts that disagree: JAX_NUM_CPU_DEVICES={n} and XLA_FLAGS's "
            f"--xla_force_host_platform_device_count={m}; unset one: {_UNSET['JAX_NUM_CPU_DEVICES']} to use {m}, "
            f"or {_UNSET['XLA_FLAGS']} to use {n}")
    if configured is not None and environment and environment[0][1] != int(configured):
        count = environment[0][1]
        names = " and ".join(name for name, _ in environment)
        raise ConfigError(Refusal(
            f"two device counts disagree: devices.cpu_count={configured} and {names} "
            f"{'gives' if len(environment) == 1 else 'give'} {count}", f"devices.cpu_count={count}", after=" (or drop "
            f"it) to use {names}'s, or {' and '.join(_UNSET[name] for name, _ in environment)} to use {configured}"))
    if not sources:
        return DEFAULT_CPU_COUNT, "default"
    name, count = sources[0]
    if count > MAX_CPU_COUNT:
        said = (f"{name}={count} asks for more simulated CPU devices than {MAX_CPU_COUNT:,}: JAX's start-up grows "
                "with the count and did not finish at 100,000")
        after = " or fewer (a plan's and the dry run's per-device figures need no more), or use real devices"
        if name != "devices.cpu_count":  # devices.cpu_count=1024 beside the environment's 2048 is refused as a conflict
            raise ConfigError(f"{said}; set {count_setting(name, environ)}{MAX_CPU_COUNT}{after}")
        raise ConfigError(Refusal(said, f"devices.cpu_count={MAX_CPU_COUNT}", after=after))
    return count, name


def count_setting(source: str, environ: Mapping[str, str] | None = None) -> str:
    """Where a CPU device count is set, by where it came from (``resolve_cpu_count``'s source), as the text the count
    follows: ``devices.cpu_count=`` beside an environment's count is refused ("two device counts disagree"), so the
    environment's is named.

    ``XLA_FLAGS``' other flags (``environ``'s, default ``os.environ``) are kept, shell-quoted, before the count: was
    ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` for ``XLA_FLAGS="--xla_dump_to=/tmp/d
    --xla_force_host_platform_device_count=3"``, which pasted dropped the dump flag. With both variables set alike,
    the count leaves ``XLA_FLAGS`` (``XLA_FLAGS=--xla_dump_to=/tmp/d JAX_NUM_CPU_DEVICES=``): was
    ``JAX_NUM_CPU_DEVICES=``, which pasted beside the other's old count was refused as two counts that disagree.
    """
    flags = (os.environ if environ is None else environ).get("XLA_FLAGS", "")
    others = re.sub(r"--xla_force_host_platform_device_count=\S*", "", flags).split()
    if source == "JAX_NUM_CPU_DEVICES" and _XLA_COUNT.search(flags):  # both set, alike: a new count in one alone
        return f"XLA_FLAGS={shlex.quote(' '.join(others))} JAX_NUM_CPU_DEVICES="  # is refused as a disagreement
    if source != "XLA_FLAGS":
        return "devices.cpu_count=" if source == "default" else f"{source}="
    # quoted up to the count, which follows unquoted: `XLA_FLAGS='--a=1 '--xla_..._count=2` is one shell word
    return f"XLA_FLAGS={shlex.quote(' '.join(others) + ' ') if others else ''}--xla_force_host_platform_device_count="


def cpu_devices_known(platform: str | None) -> bool:
    """Whether a job's devices are the simulated CPU devices, known without starting JAX's backend.

    True for ``devices.platform=cpu``, for ``JAX_PLATFORMS`` led by ``cpu``, and when no accelerator
    plugin is installed (JAX finds GPU/TPU backends as ``jax_plugins`` packages or ``libtpu``); their
    count is then ``resolve_cpu_count``'s. Otherwise only the started backend knows the devices.
    """
    if platform is not None:
        return platform == "cpu"
    chosen = _jax_platforms()[1]
    if chosen:  # as JAX reads the list: ' cpu' is no platform it knows (so not stripped here)
        return str(chosen).split(",")[0] == "cpu"
    return not accelerators_installed()


def _jax_platforms() -> tuple[str | None, str | None]:
    """``(JAX_PLATFORMS, what JAX starts)``, the one reading of the variable for both checks here: as set (what a
    refusal names, fixed in the shell), and JAX's own setting: its config once JAX is imported (it read the variable
    then), before that the variable, so that a refusal imports no JAX."""
    import sys

    env = os.environ.get("JAX_PLATFORMS")
    return env, (sys.modules["jax"].config.jax_platforms if "jax" in sys.modules else env)


def accelerators_installed() -> bool:
    """Whether a JAX plugin for another platform (GPU, TPU) is installed, known without starting JAX.

    JAX finds such backends as ``jax_plugins`` entry points or packages, or ``libtpu``.

    Returns
    -------
    bool
    """
    import importlib.metadata
    import importlib.util

    plugins = list(importlib.metadata.entry_points(group="jax_plugins"))
    return bool(plugins) or any(importlib.util.find_spec(name) is not None for name in ("jax_plugins", "libtpu"))


def platform_start_problem(platform: str | None) -> str | None:
    """Why JAX cannot start ``devices.platform`` (else ``JAX_PLATFORMS``) on this machine, known without starting it.

    Where no accelerator plugin is installed only ``cpu`` starts, so a setting that lists no ``cpu``
    (``cuda``, ``gpu``, ``tpu``, ``CPU``) is refused here as ``devices.check_platform`` refuses it once the
    backend starts (here, before the run's new folder is made). So is a list with ``cpu`` and another entry JAX
    fails on (``cpu,``, ``tpu,cpu``, ``gpu,cpu``): JAX starts every entry, skipping only an unavailable ``cuda`` (so
    that probe would refuse it, inside the run's new folder). None where it may start.
    """
    env = _jax_platforms()[0] if platform is None else None
    chosen = env if platform is None else platform
    entries = str(chosen).split(",")
    if not chosen or ("cpu" in entries and {*entries} <= {"cpu", "cuda"}) or accelerators_installed():
        return None
    failing = ", ".join(map(repr, dict.fromkeys(e for e in entries if e not in ("cpu", "cuda"))))
    have = "is not available here: JAX has cpu" + (f", and fails on {failing} in the list" if "cpu" in entries else "")
    if env:  # the environment's, not the config's: no override fixes it
        return (f"JAX_PLATFORMS={env if env.strip() == env else repr(env)} {have}; unset JAX_PLATFORMS for JAX's "
                "default, or set JAX_PLATFORMS=cpu")
    return Refusal(f"devices.platform={platform} {have}", "devices.platform=cpu",
                   after=", or devices.platform=null for JAX's default")


def jit_disabled_problem() -> str | None:
    """Why a training run cannot run with JAX's jit disabled (``JAX_DISABLE_JIT=1``, or ``jax_disable_jit`` set before
    the run); None where it is not. A run compiles its programs ahead of time (``jax.jit(...).lower()``), which JAX
    refuses then: was "ValueError: Disable jit is not supported in the AOT path ... (jit(build))" after minutes,
    inside the run's new folder. (A dry run and ``sample.py`` run with it.)"""
    import sys

    env = os.environ.get("JAX_DISABLE_JIT", "")
    on = sys.modules["jax"].config.jax_disable_jit if "jax" in sys.modules else env.lower() in (
        "y", "yes", "t", "true", "on", "1")  # JAX's own reading of the variable
    if not on:
        return None
    said = f"JAX_DISABLE_JIT={env}" if env else "jax_disable_jit=True"
    return (f"{said}: a run compiles its steps ahead of time (jax.jit(...).lower()), which JAX refuses with jit "
            f"disabled; {'unset JAX_DISABLE_JIT' if env else 'set it back to False'} (debug=true gives a failing run's "
            "whole traceback; dry_run=true runs with it)")


def start_problem(platform: str | None, dry_run: bool) -> str | None:
    """``platform_start_problem``, then (a training run) ``jit_disabled_problem``: JAX's environment a run on this
    machine cannot start with, known before its folder is made; None where it can."""
    return platform_start_problem(platform) or (None if dry_run else jit_disabled_problem())
