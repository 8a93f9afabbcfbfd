"""``stopped_at_step``: the step a stopped attempt saved at, read from its ``metrics.json`` record.

Below ``stop_record`` (which writes those records) and ``resume_settings`` (which reads the attempt that saved a
checkpoint), so that ``resume_settings`` no longer imports ``stop_record``, which reaches it back through the
continue commands. Pure Python: no JAX.
"""

from __future__ import annotations

from typing import Any

__all__ = ["stopped_at_step"]


def stopped_at_step(metrics: dict[str, Any]) -> int | None:
    """The step a preempted or Ctrl-C'd attempt stopped (and saved) at: ``stopped_at_step``, or in a folder of an
    earlier version ``preempted_at_step``, which it wrote for a Ctrl-C too (its ``status`` said "interrupted")."""
    return metrics.get("stopped_at_step", metrics.get("preempted_at_step"))
