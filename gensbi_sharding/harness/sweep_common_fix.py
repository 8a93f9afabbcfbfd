"""The one override that fixes every refused job of a sweep, where the jobs' own fixes differ.

``-m rule=replicated,fsdp mesh.model_axis=1,2 data.num_simulations=1000`` is refused for every job (the default batch
of 1,024 is over the 900 training pairs), each job offering its own fix: ``set data.batch_size=896`` on (8, 1),
``set data.batch_size=900`` on (4, 2). A key the sweep does not vary takes one value in the command, so copying one
job's fix got the others refused again. ``common_fix`` tries each fix a refused job offers on every job, and names
the first under which none is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gensbi_sharding.harness.refusal import fix_of, fixes_of, parts_of, said
from gensbi_sharding.harness.sweep_plan import job_configuration
from gensbi_sharding.harness.sweep_retyped import swept_keys

__all__ = ["TRIED_AT_MOST", "common_fix", "with_fix"]

#: The jobs' own fixes tried on every job, in the order offered: each try checks the whole sweep again (0.5-0.8 s a
#: job on 2 cores), so a 48-job sweep offering 8 values would keep its refusal waiting for minutes.
TRIED_AT_MOST = 3


def with_fix(job: Sequence[str], fix: Sequence[str]) -> list[str]:
    """``job``'s overrides with ``fix`` typed into them: an override of a key the job sets already replaces it (Hydra
    refuses a key given twice in one command), any other is added.

    Parameters
    ----------
    job : sequence of str
        One job's overrides, e.g. ``["rule=fsdp", "data.batch_size=1024"]``.
    fix : sequence of str
        Overrides, e.g. ``["data.batch_size=896"]``.

    Returns
    -------
    list of str
    """
    keys = {f.lstrip("+~").split("=", 1)[0] for f in fix}
    return [o for o in job if o.lstrip("+~").split("=", 1)[0] not in keys] + list(fix)


def common_fix(refused: Sequence[tuple[int, Sequence[str], str]], jobs: Sequence[Sequence[str]],
               still_refused: Callable[[list[list[str]]], Sequence[object]]) -> str:
    """The line a refused sweep ends with when its jobs offer different fixes of keys the sweep does not vary.

    Parameters
    ----------
    refused : sequence of (int, sequence of str, str)
        ``sweep_check.refused_jobs``' answer: job number, its overrides, its refusal.
    jobs : sequence of sequence of str
        Every job of the sweep, each its overrides.
    still_refused : callable
        Given every job's overrides (a list of lists), the jobs still refused (``sweep_check.refused_jobs`` on them).

    Returns
    -------
    str
        ``"one value for every job (their own fixes differ: ...): set data.batch_size=896"`` (saying how many jobs
        it leaves refused over other settings only, if any); where none of the fixes offered fixes every job, the
        line says so; ``""`` where the refused jobs offer at most one fix of keys not swept (that fix is the
        message's own), or where the fixes name a swept key (``sweep_drop``'s line).
    """
    swept = set(swept_keys([job_configuration(job) for job in jobs]))
    offered: list[tuple[str, ...]] = []
    for _, _, problem in refused:
        for part in parts_of(problem) or [problem]:
            # a fix offered as "set" is the value computed for that job; "e.g." offers one of several that all do
            # (data.theta_transform=nonee: none for two_moons, support for sir, either valid for both)
            offers = "set" in getattr(part, "how", "")
            fix = tuple(f for f in fixes_of(fix_of(part)) if not f.startswith("~")) if offers else ()
            if fix and not any(f.lstrip("+").split("=", 1)[0] in swept for f in fix) and fix not in offered:
                offered.append(fix)
    keys = [tuple(sorted(f.lstrip("+").split("=", 1)[0] for f in fix)) for fix in offered]
    if len(offered) < 2 or len(set(keys)) != 1:  # one fix, or fixes of different settings: each is needed
        return ""
    differ = ", ".join(said(fix) for fix in offered)
    for fix in offered[:TRIED_AT_MOST]:
        # a job refused under the fix for another setting only (the next check, reached now) does not make the value
        # wrong: "run them in sweeps of their own" would send the user away from the one value that fixes this one
        left = list(still_refused([with_fix(job, fix) for job in jobs]))
        if not any(_about(entry, keys[0]) for entry in left):
            other = f"; with it, {len(left)} job(s) are refused for other settings (run it to see them)" if left else ""
            return (f"one value for every job (their own fixes differ: {differ}; a setting the sweep does not vary "
                    f"takes one value): set {said(fix)}{other}")
    untried = (f"; {len(offered) - TRIED_AT_MOST} more not tried: try them in the command"
               if len(offered) > TRIED_AT_MOST else "")
    return (f"no one of the jobs' own fixes ({differ}) fixes every job (a setting the sweep does not vary takes one "
            f"value{untried}): run the jobs that need different values in sweeps of their own")


def _about(entry: object, keys: Sequence[str]) -> bool:
    """Whether a job still refused (``refused_jobs``' (number, overrides, refusal)) is refused over one of ``keys``: its
    refusal names the setting; an answer holding no refusal counts as one."""
    problem = entry[-1] if isinstance(entry, tuple) else None
    return problem is None or any(key in str(problem) for key in keys)
