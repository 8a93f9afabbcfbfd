"""The sweep a refused multirun can run instead: its refused values dropped.

``-m mesh.model_axis=2,3`` on 8 devices is refused for job 1 with "set mesh.model_axis=2", the fix a lone run
needs: typed into the sweep it gives ``mesh.model_axis=2,2``, the same job twice. A value every one of whose jobs is
refused is better dropped; ``dropped_sweep`` gives the line ``sweep_check.refused_jobs_message`` ends with.
"""

from __future__ import annotations

from collections.abc import Sequence

from gensbi_sharding.harness.sweep_plan import job_configuration
from gensbi_sharding.harness.sweep_retyped import swept_keys

__all__ = ["dropped_sweep"]


def dropped_sweep(refused: Sequence[tuple[int, Sequence[str], str]], jobs: Sequence[Sequence[str]]) -> str:
    """``"or drop the values refused from the sweep: mesh.model_axis=2 (was mesh.model_axis=2,3)"``, or ``""``.

    Parameters
    ----------
    refused : sequence of (int, sequence of str, str)
        ``sweep_check.refused_jobs``' answer: job number, its overrides, its refusal.
    jobs : sequence of sequence of str
        Every job of the sweep, each its overrides (``sweep_plan.sweep_jobs``).

    Returns
    -------
    str
        The swept keys whose values changed, each with the values kept in the sweep's order, as ``-m`` takes them;
        ``""`` where no value can be dropped so that every refused job goes and one job stays (a job refused for a
        combination, ``rule=tensor`` with ``mesh.model_axis=4``, whose values each run in other jobs).
    """
    wanted = [job_configuration(job) for job in jobs]
    bad = {number for number, _, _ in refused}
    swept = swept_keys(wanted)
    values = {k: list(dict.fromkeys(w.get(k) for w in wanted)) for k in swept}  # in the sweep's order
    drop = {(k, v) for k in swept for v in values[k]
            if all(n in bad for n, w in enumerate(wanted) if w.get(k) == v)}  # every job with it refused
    kept = [n for n, w in enumerate(wanted) if not any((k, w.get(k)) in drop for k in swept)]
    if not drop or not kept or any(n in bad for n in kept):
        return ""
    changed = [k for k in swept if any((k, v) in drop for v in values[k])]
    now = " ".join(f"{k}={','.join(v for v in values[k] if (k, v) not in drop)}" for k in changed)
    was = " ".join(f"{k}={','.join(values[k])}" for k in changed)
    return f"or drop the values refused from the sweep: {now} (was {was})"
