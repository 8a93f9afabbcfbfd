"""Waiting for a ``distributed=local`` job's processes within its bounds, and the line that says how they ended."""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from gensbi_sharding.harness.child_errors import stuck_errors
from gensbi_sharding.harness.preemption import EXIT_INTERRUPTED, EXIT_PREEMPTED, PREEMPT_SIGNALS

__all__ = ["DEATH_GRACE_S", "PREEMPT_GRACE_S", "STOPPED", "FORWARDED", "STARTUP_DEATHS", "wait_children",
           "failure_line"]

log = logging.getLogger("gensbi_sharding")

DEATH_GRACE_S = 5  # beyond distributed.heartbeat_s, for the survivors to notice a dead peer
PREEMPT_GRACE_S = 120  # for the children to reach a step boundary and checkpoint after a signal
STOPPED = (EXIT_PREEMPTED, EXIT_INTERRUPTED)  # a child that checkpointed and stopped for a signal
FORWARDED = (*PREEMPT_SIGNALS, signal.SIGINT)  # what ends a child still starting up (no handler yet) for a stop
# A child ended by a stop it had no handler for: it was still starting up, before its run (after it its watch ignores
# them, run.py), so it never reached the coordinator, and none of the others got past it.
STARTUP_DEATHS = tuple(-s for s in FORWARDED)


def wait_children(children: list[subprocess.Popen], timeout_s: float, grace_s: float, signalled: list[int],
                  time_up: Any = None, on_death: Any = None) -> tuple[list[int], int | None, float | None]:
    """Exit codes, the rank that failed first (None if none) and how long the rest took after it.

    ``on_death(ranks)``, when one fails: the ranks still running (XLA's teardown of them is noise).

    At ``timeout_s``, with no child dead and no signal received, ``time_up()`` (once) asks the children
    to stop as a preemption does; they get the preemption's grace to checkpoint, then are killed.
    """
    deadline, first_dead, died_at, preempt_bound = time.monotonic() + timeout_s, None, None, False
    while time.monotonic() < deadline or (time_up is not None and first_dead is None and not signalled):
        if time.monotonic() >= deadline:
            time_up()
            time_up, deadline, preempt_bound = None, time.monotonic() + PREEMPT_GRACE_S, True
        codes = [child.poll() for child in children]
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0, *STOPPED)]
        if failed and first_dead is None:
            # Several seen at once: one killed by a signal died; the others noticed it, and XLA ends those by SIGABRT,
            # within one poll when a collective fails at once: the killed one is named, not a SIGABRT survivor.
            first_dead = min(failed, key=lambda rank: (codes[rank] >= 0, codes[rank] == -signal.SIGABRT, rank))
            died_at = time.monotonic()
            deadline = min(deadline, died_at + grace_s)
            if on_death is not None:
                on_death([rank for rank, code in enumerate(codes) if code is None])
        if signalled and not preempt_bound:
            deadline, preempt_bound = min(deadline, time.monotonic() + PREEMPT_GRACE_S), True
        if all(code is not None for code in codes):
            return codes, first_dead, (time.monotonic() - died_at if died_at else None)
        if signalled and any(code in STARTUP_DEATHS for code in codes):  # none joined: the rest, at the coordinator
            for child in children:  # for it, hold nothing: ended now, not as a dead peer's survivors 15 s later
                if child.poll() is None:
                    child.kill()
            return [child.wait() for child in children], first_dead, None
        time.sleep(0.1)
    for child in children:
        if child.poll() is None:
            child.kill()
    log.error("local processes did not finish within the bound; killed the rest")
    codes = [child.wait() for child in children]  # a killed child reports -9
    return codes, first_dead, (time.monotonic() - died_at if died_at else None)


def failure_line(codes: list[int], first_dead: int | None, lag: float | None, cfg: DictConfig, out: Path) -> str:
    """The error of a job whose processes failed (``wait_children``'s codes, first failed rank and lag): which one
    failed first and how the others ended, or that the run bound killed them (and what they logged, if stuck)."""
    def how(code):  # exit code 0: it finished its part (process 0 failed, say, writing what only it writes)
        return ("ended (exit code 0)" if code == 0 else f"died (killed by {signal.Signals(-code).name})" if code < 0
                else f"failed (exit code {code})")

    if first_dead is None:  # nobody failed on their own: the run bound killed them (stuck, if they logged why)
        return (f"local processes killed after distributed.run_timeout_s={cfg.distributed.run_timeout_s} s "
                f"(exit codes {codes}){stuck_errors(out, len(codes))}")
    others = [f"process {rank} {how(code)}" for rank, code in enumerate(codes) if rank != first_dead]
    return (f"process {first_dead} of {len(codes)} {how(codes[first_dead])}; the others ended "
            f"{lag:.1f} s later (bound: distributed.heartbeat_s={cfg.distributed.heartbeat_s} + "
            f"{DEATH_GRACE_S} s): {', '.join(others)}")
