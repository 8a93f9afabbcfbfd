"""The console line of a process that another process's stop ended (several processes started by hand).

JAX's preemption service stops every process of a job at the same step when any one of them gets Ctrl-C or a
preemption signal. Process 0 says on its console how the job stopped and the command that continues it; the others
say their stop into their log only (``console.stop_level``: ``distributed=local``'s processes share one console, which
their parent speaks on). A process started by hand (``distributed.mode=explicit``, its own terminal) that another
process's Ctrl-C stopped would then exit 75 without a word on its console: it says why in one warning line, with the
command that continues it on its own host.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["stopped_by_peer", "peer_stop_line"]


def stopped_by_peer(watch: Any) -> bool:
    """Whether this process, not process 0 and not one of ``distributed=local``'s, stopped for another process's
    signal: it received none itself (``watch.signum`` None at a step boundary; ``watch.elsewhere`` at a check).

    Parameters
    ----------
    watch : PreemptionWatch
        The run's watch, once it stopped the run.

    Returns
    -------
    bool
    """
    import jax

    from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV

    if not (jax.distributed.is_initialized() and jax.process_count() > 1 and jax.process_index() != 0):
        return False
    return not os.environ.get(LOCAL_CHILD_ENV) and (watch.signum is None or bool(watch.elsewhere))


def peer_stop_line(step: int | None, command: str) -> str:
    """"stopped at step 40 with the job's other processes: another process of this job got Ctrl-C or a preemption
    signal (this one got none; process 0 says how the job stopped); continue this process with: <command>".

    Parameters
    ----------
    step : int or None
        The step the job's newest checkpoint holds; None: stopped before training.
    command : str
        The command that continues this process (``sweep_hints.continue_command``).

    Returns
    -------
    str
    """
    where = f"at step {step}" if step is not None else "before training (nothing trained: no checkpoint to save)"
    return (f"stopped {where} with the job's other processes: another process of this job got Ctrl-C or a preemption "
            f"signal (this one got none; process 0 says how the job stopped); continue this process with: {command}")
