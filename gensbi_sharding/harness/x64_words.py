"""How this process came to compute in 64 bits, and the fix that fits it: the variable, or a call from Python.

The same rule as the x64 refusal of a resume (``resume_settings``): where JAX's setting is the one
``JAX_ENABLE_X64`` gives, the variable is the fix; where it differs, the process set it from Python
(``jax.config.update('jax_enable_x64', ...)`` before ``run(cfg)``), and only that call changes it.
"""

from __future__ import annotations

import os

__all__ = ["x64_by_variable", "x64_fix", "x64_on", "x64_lead"]

#: The values JAX reads as true in ``JAX_ENABLE_X64``.
TRUE_WORDS = ("y", "yes", "t", "true", "on", "1")


def x64_by_variable() -> bool:
    """Whether ``JAX_ENABLE_X64`` asks for 64 bits, as JAX reads the variable."""
    return os.environ.get("JAX_ENABLE_X64", "").lower() in TRUE_WORDS


def x64_fix(wanted: bool, on: bool | None = None) -> str:
    """What the user does to get ``jax_enable_x64`` ``wanted`` in this process's setting.

    Parameters
    ----------
    wanted : bool
        The setting the fix gives.
    on : bool, optional
        This process's setting; None: read from JAX (given where JAX is not to be imported yet).

    Returns
    -------
    str
        ``"set JAX_ENABLE_X64=1"`` or ``"unset JAX_ENABLE_X64"`` where the variable gave JAX its present setting;
        else ``"call jax.config.update('jax_enable_x64', <wanted>) before run(cfg) (this process set it from
        Python)"``: the variable is no fix there ("unset JAX_ENABLE_X64" names a variable never set).
    """
    if on is None:
        import jax

        on = bool(jax.config.jax_enable_x64)
    if on == x64_by_variable():
        return "set JAX_ENABLE_X64=1" if wanted else "unset JAX_ENABLE_X64"
    return f"call jax.config.update('jax_enable_x64', {wanted}) before run(cfg) (this process set it from Python)"


def x64_on() -> bool:
    """This process's ``jax_enable_x64``: JAX's where JAX is imported, else what ``JAX_ENABLE_X64`` will give it (a
    ``distributed=local`` parent, whose processes inherit the variable; the check before JAX starts)."""
    import sys

    return bool(sys.modules["jax"].config.jax_enable_x64) if "jax" in sys.modules else x64_by_variable()


def x64_lead(saved: bool | None) -> str:
    """What a printed command puts before ``python`` to run under a run's ``jax_enable_x64`` ``saved``, pasted in any
    shell: ``"JAX_ENABLE_X64=1 "`` for a 64-bit run; ``"env -u JAX_ENABLE_X64 "`` for a 32-bit one where this
    process's environment has the variable on (the user's shell may export it); ``""`` otherwise, or where ``saved``
    is not known (None).

    Also where this process's setting is the run's: without it, the commands printed by the run itself at a stop
    (the same setting) have none, and for ``JAX_ENABLE_X64=1 python launch.py ...`` typed once, pasted in a fresh
    shell, the continue command would be refused "trained with JAX_ENABLE_X64 on".

    Parameters
    ----------
    saved : bool or None
        The run's setting (its ``metrics.json`` or launch record), None where no record says.

    Returns
    -------
    str
    """
    if saved is None:
        return ""
    if saved:
        return "JAX_ENABLE_X64=1 "
    return "env -u JAX_ENABLE_X64 " if x64_by_variable() else ""
