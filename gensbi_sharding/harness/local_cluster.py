"""``distributed=local``: run one job as N JAX processes on this machine.

The parent never starts JAX. It starts N copies of the entry script with the
job's own overrides plus the coordinates of a loopback coordinator, each child
simulating ``devices.cpu_count // N`` CPU devices and talking over gloo, and
waits for them with a deadline: so the multi-host path (per-process data,
``host_to_global_array``, cross-process collectives) runs on a laptop and in CI.
When one child fails the others are given the heartbeat bound to notice, then
killed; nothing waits forever.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from gensbi_sharding.harness.config import ConfigError

__all__ = ["run_local_processes"]

log = logging.getLogger("gensbi_sharding")

# Keys the parent sets for every child; the job's own overrides of them are dropped.
_CHILD_KEYS = ("distributed.mode", "distributed.coordinator_address", "distributed.num_processes",
               "distributed.process_id", "distributed.local_processes", "devices.cpu_count",
               "hydra.run.dir", "hydra.job.name", "hydra.output_subdir", "hydra.mode")


def run_local_processes(cfg: DictConfig, out: Path) -> dict[str, Any]:
    """Run the job of ``cfg`` as ``cfg.distributed.local_processes`` local JAX processes.

    Returns the metrics process 0 wrote (status "error" if any process failed).

    Raises
    ------
    ConfigError
        If ``devices.cpu_count`` does not split evenly over the processes, or no Hydra
        job is running (the children are started from the job's overrides).
    """
    from hydra.core.hydra_config import HydraConfig

    n, cpu = cfg.distributed.local_processes, cfg.devices.cpu_count
    if cpu % n:
        raise ConfigError(f"devices.cpu_count={cpu} does not split over distributed.local_processes={n}; "
                          f"use a multiple of {n}")
    if not HydraConfig.initialized():
        raise ConfigError("distributed.local_processes > 1 needs a Hydra job: run it through launch.py")
    overrides = [o for o in HydraConfig.get().overrides.task if _key(o) not in _CHILD_KEYS]
    port = _free_port()
    script = Path(sys.argv[0]).absolute()
    children = []
    for rank in range(n):
        command = [sys.executable, str(script), *overrides,
                   "distributed.mode=explicit", f"distributed.coordinator_address=127.0.0.1:{port}",
                   f"distributed.num_processes={n}", f"distributed.process_id={rank}",
                   "distributed.local_processes=1", f"devices.cpu_count={cpu // n}",
                   f"hydra.run.dir={out}", f"hydra.job.name=process_{rank}", "hydra.output_subdir=null"]
        children.append(subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                         preexec_fn=_die_with_parent))
    log.info("started %d local processes (coordinator 127.0.0.1:%d, %d CPU devices each)", n, port, cpu // n)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        codes = _wait(children, cfg.distributed.run_timeout_s, cfg.distributed.heartbeat_s + 15)
    finally:  # Ctrl-C or SIGTERM here: no child outlives the parent
        signal.signal(signal.SIGTERM, previous)
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    metrics_path = out / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if any(codes):
        timed_out = any(code == -signal.SIGKILL for code in codes)
        metrics.update(status="error", error=f"local processes exited with codes {codes}" + (
            f"; killed after distributed.run_timeout_s={cfg.distributed.run_timeout_s} s" if timed_out else ""))
    metrics.setdefault("status", "error")
    return metrics


def _wait(children: list[subprocess.Popen], timeout_s: float, grace_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        codes = [child.poll() for child in children]
        if all(code is not None for code in codes):
            return codes
        if any(code not in (None, 0) for code in codes):
            deadline = min(deadline, time.monotonic() + grace_s)  # the others should fail soon too
        time.sleep(0.2)
    for child in children:
        if child.poll() is None:
            child.kill()
    log.error("local processes did not finish within the bound; killed the rest")
    return [child.wait() for child in children]  # a killed child reports -9


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGKILL it when the parent dies (PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's cleanup still covers Ctrl-C and SIGTERM
        pass


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
