"""A refusal that carries the override it suggests as data, not only in its words.

A check's refusal ends with a fix to type ("...; set eval.num_samples=4"); ``command_checks`` puts that fix through
the checks the run makes and, where they refuse it too, offers the value they accept instead. It read the fix back
out of the message's last word (after "set", "write" or "e.g."), and the better one out of the next refusal's text:
a fix reworded, or followed by a note, was lost or misread. Here the check that makes the suggestion keeps it:
``Refusal`` is a ``str`` (every caller, log and ``metrics.json`` reads the message as before) with ``fix`` beside it.
Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Refusal", "fix_of", "fixes_of", "said", "listed", "parts_of", "sweep_parts", "fix_refusal", "refused_too",
           "rephrased"]


class Refusal(str):
    """A refusal's message, ``reason + how + fix + after``, with its parts kept.

    Parameters
    ----------
    reason : str
        What is refused and why, e.g. ``"eval.num_samples=3 must be >= 2 * eval.c2st_folds (eval.c2st_folds=2)"``.
    fix : str or tuple of str or None
        The override the message says to type instead, e.g. ``"eval.num_samples=4"``; a tuple where the fix is several
        typed together (``("model.val_emb_dim=4", "model.id_emb_dim=4")``), checked together, a key to drop as Hydra
        deletes it (``("~model.dpeth=2", "model.depth=2")``, said "drop +model.dpeth=2 and set model.depth=2"); None:
        the message offers none, or a fix that is no override (an environment variable, another command), which no
        check can try.
    how : str
        The words that offer it, e.g. ``"; set "``, ``"; e.g. "``, ``"; write "``.
    after : str
        What the message says after the fix (the divisors it chose from, another way out).
    shown : str, optional
        The words that give a tuple ``fix`` (e.g. ``"raise data.num_simulations to at least 40 and set
        data.batch_size=8"``); by default its overrides as typed, space-separated. launch.py's words: to a Python
        caller (``python_words.python_caller``) whose fix is settings of ``cfg``, ``python`` is said instead.
    python : str, optional
        ``shown``'s words to a Python caller (``"set cfg.dry_run=False and train it with cfg.model.init='eager'"``);
        by default the fix's settings of ``cfg`` (``refusal.said``).
    """

    reason: str
    fix: str | tuple[str, ...] | None
    how: str
    after: str
    shown: str | None
    python: str | None

    def __new__(cls, reason: str, fix: str | tuple[str, ...] | None = None, *, how: str = "; set ", after: str = "",
                shown: str | None = None, python: str | None = None) -> Refusal:
        fix = fix[0] if isinstance(fix, tuple) and len(fix) == 1 else fix  # one override: a str, as fix_of compares
        words = (said(fix) if python is None else python) if _to_python(fix) else said(fix) if shown is None else shown
        message = super().__new__(cls, reason if fix is None else f"{reason}{how}{words}{after}")
        message.reason, message.fix, message.how, message.after = str(reason), fix, how, after
        message.shown, message.python = shown, python
        return message

    def fixed_by(self, fix: str | tuple[str, ...], note: str = "") -> Refusal:
        """The same refusal offering ``fix`` instead, ``note`` said right after it.

        Parameters
        ----------
        fix : str or tuple of str
            The override (or overrides) offered now, e.g. ``"eval.num_samples=4"``.
        note : str
            E.g. ``" (eval.num_samples=2 is refused too: it must be >= 2 * eval.c2st_folds (eval.c2st_folds=2))"``.

        Returns
        -------
        Refusal
        """
        return Refusal(self.reason, fix, how=self.how, after=note + self.after)


def _to_python(fix: str | tuple[str, ...] | None) -> bool:
    """Whether ``fix`` is said to a Python caller, as settings of ``cfg`` (``shown``'s words are launch.py's)."""
    from gensbi_sharding.harness.python_words import python_caller, settings_of

    return python_caller() and fix is not None and settings_of(fixes_of(fix)) is not None


def fix_of(problem: str | None) -> str | tuple[str, ...] | None:
    """The override ``problem`` offers as its fix (``Refusal.fix``, a tuple for several); None for a message that
    carries none.

    Parameters
    ----------
    problem : str or None
        A check's refusal.

    Returns
    -------
    str or tuple of str or None
    """
    return problem.fix if isinstance(problem, Refusal) else None


def fixes_of(fix: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """A fix (``Refusal.fix``) as the tuple of overrides it types: ``"a=1"`` -> ``("a=1",)``, None -> ``()``.

    Parameters
    ----------
    fix : str or tuple of str or None

    Returns
    -------
    tuple of str
    """
    return (fix,) if isinstance(fix, str) else tuple(fix or ())


def said(fix: str | tuple[str, ...] | None) -> str:
    """A fix as a message offers it: its overrides as typed, space-separated; the keys it drops (``~key=value``, as
    Hydra deletes them) first, as "drop +key=value and set ..." (with the set alone, the command the message leads to
    would still hold the ``+key`` refused).

    Parameters
    ----------
    fix : str or tuple of str or None
        E.g. ``("~model.dpeth=2", "model.depth=2")``.

    Returns
    -------
    str
        E.g. ``"drop +model.dpeth=2 and set model.depth=2"``; to a Python caller (``python_words.python_caller``)
        the settings of ``cfg`` where each override is one (``"cfg.model.depth=2"``).
    """
    from gensbi_sharding.harness.python_words import python_caller, settings_of

    if python_caller() and (settings := settings_of(fixes_of(fix))) is not None:  # run(cfg): cfg's settings
        return settings
    drops = [f"+{f[1:]}" for f in fixes_of(fix) if f.startswith("~")]
    sets = " ".join(f for f in fixes_of(fix) if not f.startswith("~"))
    return f"drop {' '.join(drops)}" + (f" and set {sets}" if sets else "") if drops else sets


def listed(head: str, problems: Sequence[str], labels: Sequence[str] = (), *, lead: str = "",
           together: bool = True) -> Refusal:
    """Several refusals as one: ``head``, then each problem on a line of its own (its key, value and fix), ``parts``
    the problems; its fix, with ``together``, every problem's fix typed together, where each offers one, a later fix
    of a key in place of an earlier (every one, so one run of the command names them all).

    Parameters
    ----------
    head : str
        The first line, e.g. ``"ConfigError: 2 settings are refused, each with its fix:"``.
    problems : sequence of str
        The refusals, e.g. ``["ConfigError: seed=-1 must be >= 0; e.g. seed=0", ...]``.
    labels : sequence of str
        Said before each problem, e.g. ``"job 0 (seed=0): "``; none by default.
    lead : str
        Left off the start of each problem's line (said once in ``head``), e.g. ``"ConfigError: "``.
    together : bool
        Whether the problems' fixes are one command's (a sweep's jobs' are not: each job's values differ).

    Returns
    -------
    Refusal
        Its ``parts``: ``problems``.
    """
    fixes = [fixes_of(fix_of(problem)) for problem in problems]
    # a later fix of one key wins: it was found with the earlier set (+model.dpeth=0: write model.depth=0; then
    # model.depth=0 must be >= 1; e.g. model.depth=3), so the earlier is the value it refused: one fix, typed together
    typed = tuple({f.split("=", 1)[0].lstrip("+~"): f for each in fixes for f in each}.values())
    one_each = together and all(fixes)
    lines = "".join(f"\n  {label}{problem.removeprefix(lead)}"
                    for label, problem in zip([*labels] or [""] * len(problems), problems))
    # one shell word each (as typed, "+hydra.job.env_set.MY_FLAG='true'" pasted gives Hydra the bare true it
    # refuses, and [1] is a glob); a key to drop is said before the colon: it is taken out of the command, not pasted
    from gensbi_sharding.harness.paste_command import pasted

    drops, words = pasted(typed)
    how = f"\n  all fixed together{f' (drop {drops})' if drops and words else ''}: "
    python = said(typed) if not drops else None  # to a Python caller: cfg's settings (said), not shell words
    refusal = Refusal(head + lines, typed if one_each else None, how=how,
                      shown=python if python and python != " ".join(typed) else words or f"drop {drops}")
    refusal.parts = tuple(problems)
    return refusal


def parts_of(problem: str | None) -> list[str]:
    """The refusals ``problem`` lists (``listed``), else ``[problem]``; ``[]`` for None.

    Parameters
    ----------
    problem : str or None

    Returns
    -------
    list of str
    """
    return list(getattr(problem, "parts", None) or ([problem] if problem else []))


def sweep_parts(problem: str | None, job: Sequence[str], jobs: Sequence[Sequence[str]]) -> list[str]:
    """``parts_of(problem)``, a sweep job's refusal, with each fix that prefixes a swept override (``+key=v``,
    ``++key=v``: the job's own value) naming the sweep's values: the prefix fixes every job, where job 0 would say
    ``++rule.heads=model``, job 1 ``++rule.heads=data``, and neither is the sweep's fix (``++rule.heads=model,data``).
    A fix of a value (``set data.batch_size=64``) is the job's own and stays.
    """
    import re

    values: dict[str, list[str]] = {}
    for key, _, value in (o.lstrip("+~").partition("=") for each in jobs for o in each):
        if value not in values.setdefault(key, []):  # in the sweep's order: Hydra's jobs are its cartesian product
            values[key].append(value)
    parts = parts_of(problem)
    for key, _, value in (o.lstrip("+~").partition("=") for o in job):
        if len(values.get(key, ())) > 1:
            typed = f"{key}={','.join(values[key])}"
            pattern = rf"(?<![\w.+~])(\+\+?){re.escape(f'{key}={value}')}(?![\w.,=])"
            parts = [re.sub(pattern, lambda m: m[1] + typed, p) if re.search(pattern, p) else p for p in parts]
    return parts


def fix_refusal(check: Any, apply: Any, fixed: Any, fixes: tuple[str, ...], tries: int = 4) -> str | None:
    """The run's refusal of ``fixed`` (a config or command with ``fixes`` typed) that names a key of ``fixes``; None
    where none does. A refusal of another value, typed wrong beside it (``seed=-1``), is no verdict on the fix: its
    own fix is applied and the check made again, ``tries`` times at most (so no "e.g. data.batch_size=2, though
    data.batch_size=2 is refused too: seed=-1 must be >= 0").

    Parameters
    ----------
    check : callable
        ``check(fixed)``: the run's refusal, or None.
    apply : callable
        ``apply(fixed, overrides)``: ``fixed`` with ``overrides`` set, or None where they cannot be.
    fixed : Any
        What ``check`` reads, ``fixes`` set.
    fixes : tuple of str
        The overrides offered, e.g. ``("data.batch_size=8",)``.
    tries : int
        How many other refusals to fix on the way.

    Returns
    -------
    str or None
    """
    keys = {fix.split("=", 1)[0].lstrip("+~") for fix in fixes}
    for _ in range(tries):
        then = check(fixed)
        # its reason, not what it says after its fix ("the nearest ... that divides data.batch_size=2")
        if then is None or any(key in (then.reason if isinstance(then, Refusal) else then) for key in keys):
            return then
        other = fixes_of(fix_of(then))
        if not other or (fixed := apply(fixed, other)) is None:  # no verdict to be had: the fix as it is
            return None
    return None


def refused_too(fixed: str, reason: str) -> str:
    """The note that says a suggested fix is refused in turn, as a sentence, the value said once.

    Parameters
    ----------
    fixed : str
        The fix refused, as typed, e.g. ``"eval.num_samples=2"``.
    reason : str
        Its refusal's reason, e.g. ``"eval.num_samples=2 must be >= 4"``.

    Returns
    -------
    str
        E.g. ``" (eval.num_samples=2 is refused too: it must be >= 4)"``, the fix named as the one refused;
        a reason that names more than ``fixed`` (``"a=0 and b=0: ..."``) is said whole.
    """
    reason = reason.removeprefix("ConfigError: ")
    rest = reason[len(fixed) + 1:] if reason.startswith((f"{fixed}:", f"{fixed} ")) else None
    said = (reason if rest is None or rest.startswith(("and ", "with ", "or ")) else
            rest.strip() if reason.startswith(f"{fixed}:") else f"it {rest}")
    return f" ({fixed} is refused too: {said})"


def rephrased(problem: str, *, lead: str = "", drop: str = "", more: str = "") -> str:
    """``problem`` with its leading ``drop`` replaced by ``lead`` and ``more`` appended; a ``Refusal`` keeps its fix.

    Parameters
    ----------
    problem : str
        A check's refusal, e.g. ``"mesh.model=3: ...; set mesh.model_axis=3"``.
    lead : str
        Said first, e.g. ``"mesh={model:3} stands for mesh.model=3: "`` or ``"ConfigError: "``.
    drop : str
        Taken off the start of ``problem`` where it starts so, e.g. ``"mesh.model=3: "``.
    more : str
        Said last.

    Returns
    -------
    str
    """
    if fix_of(problem) is None:
        return f"{lead}{problem.removeprefix(drop)}{more}"
    return Refusal(lead + problem.reason.removeprefix(drop), problem.fix, how=problem.how, after=problem.after + more,
                   shown=problem.shown, python=problem.python)
