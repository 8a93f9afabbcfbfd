"""What a stop (Ctrl-C, a preemption signal) heard during a dry run says: the stage it cut short.

A dry run trains nothing, so "preempted by SIGTERM before training (nothing trained: no checkpoint to save)", the
words of a training run stopped before its first step, read as if training had been about to start. The dry run's
stop says what it was doing instead: "preempted by SIGTERM during the dry run's compile (a dry run trains nothing: no
checkpoint, no report)".
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["dry_run_stop_text", "stopped_during", "staged_check"]


def dry_run_stop_text(stop: BaseException, stage: str) -> str:
    """The one line of a dry run's ``Preempted`` ``stop`` heard during ``stage`` (e.g. ``"compile"``).

    Parameters
    ----------
    stop : Preempted
        The stop (its ``signum`` and ``interrupted``).
    stage : str
        What the dry run was doing: ``"setup"``, ``"model trace"``, ``"abstract build"``, ``"lowering"``,
        ``"compile"``, ``"sampler compile"``, ``"report"``.

    Returns
    -------
    str
        ``"<interrupted|preempted> by <signal> during the dry run's <stage> (a dry run trains nothing: no checkpoint,
        no report)"``; at ``"report"``, whose figures are printed already: ``"..., its figures printed above, not
        written to metrics.json)"``.
    """
    name = ("Ctrl-C (SIGINT)" if stop.interrupted
            else signal.Signals(stop.signum).name if stop.signum else "a preemption notice")
    # At the report stage its figures are already printed, none of them yet in metrics.json
    left = "its figures printed above, not written to metrics.json" if stage == "report" else "no report"
    return (f"{'interrupted' if stop.interrupted else 'preempted'} by {name} during the dry run's {stage} "
            f"(a dry run trains nothing: no checkpoint, {left})")


@contextmanager
def stopped_during(stage: str) -> Iterator[None]:
    """A ``Preempted`` raised inside says it stopped the dry run during ``stage`` (reworded, raised again)."""
    from gensbi_sharding.harness.preemption import Preempted

    try:
        yield
    except Preempted as stop:
        stop.args = (dry_run_stop_text(stop, stage),)  # str(stop) is what the run records and logs
        raise


def staged_check(stop_check: Callable[[], None] | None) -> Callable[[str], None]:
    """``check(stage)``: the run's ``stop_check`` (none: nothing), its stop naming the dry run's ``stage``."""
    def check(stage: str) -> None:
        if stop_check is not None:
            with stopped_during(stage):
                stop_check()
    return check
