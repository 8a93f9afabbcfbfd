"""The fix a config refusal offers, put through the run's own checks before it is offered.

A check names one value that fixes what it refused, chosen by its own rule only: ``model=simformer
model.num_heads=0 model.qkv_features=10`` was told "e.g. model.num_heads=4 (GenSBI's default)", which the next
model check refuses (4 does not divide the attention size 10). ``command_checks`` checked the fix of a command-line
refusal; here ``job_check.job_problem`` checks the fix of every config refusal (the range checks', GenSBI's model
checks', the batch and mesh checks') on the config with it applied. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gensbi_sharding.harness.python_words import python_caller, settings_of
from gensbi_sharding.harness.refusal import Refusal, fix_of, fix_refusal, fixes_of, listed, refused_too, said

__all__ = ["with_checked_fix", "every_refusal", "validate_every", "MOST_LISTED"]

#: The most refusals one list names (each found with the fixes of those before it set).
MOST_LISTED = 10


def every_refusal(cfg: Any, check: Callable[[Any], str | None]) -> str | None:
    """Every refusal of ``cfg``, each with its checked fix (``with_checked_fix``), as one (``refusal.listed``): the
    next found with the fixes of those before it set (every one, so one run of the command names them all). One
    refusal is as it is; the list ends at one whose fix sets no config value (a group, an environment variable), so
    the checks after it cannot be made.

    Parameters
    ----------
    cfg : DictConfig
        A job's config.
    check : callable
        The run's checks of a config: its first refusal, ``"ConfigError: ..."``, or None.

    Returns
    -------
    str or None
        E.g. ``"ConfigError: 2 settings are refused, each with its fix:\n  train.steps=-1 must be >= 1; e.g.
        train.steps=3000\n  seed=-1 must be >= 0; e.g. seed=0\n  all fixed together: train.steps=3000 seed=0"``.
    """
    found, fixed = [], cfg
    while len(found) < MOST_LISTED and (problem := with_checked_fix(fixed, check(fixed), check)) not in (None, *found):
        found.append(problem)
        if (fixed := _applied(fixed, fixes_of(fix_of(problem)))) is None:
            break
    if len(found) < 2:
        return found[0] if found else None
    lead = "ConfigError: " if all(p.startswith("ConfigError: ") for p in found) else ""
    return listed(f"{lead}{len(found)} settings are refused, each with its fix:", found, lead=lead)


def validate_every(cfg: Any) -> None:
    """``config_checks.validate(cfg)``, its error naming every refused value, one a line with its fix, as launch.py's
    check of a command does (so ``run(cfg)`` from Python names them all at once, not the next once one is fixed).

    Parameters
    ----------
    cfg : DictConfig
        The run's config.

    Raises
    ------
    ConfigError
        ``validate``'s own, where it refuses one value; else ``"3 settings are refused, each with its fix:\n  ...
        \n  all fixed together: ..."`` (``every_refusal``).
    """
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.refusal import parts_of

    def refusal(cfg: Any) -> str | None:
        try:
            validate(cfg)
        except ConfigError as err:
            return err.args[0] if err.args else str(err)
        return _mesh_refusal(cfg)  # listed beside the others (train.steps=-3 mesh.model_axis=3: both)

    try:
        validate(cfg)
    except ConfigError:
        every = every_refusal(cfg, refusal)
        if len(parts_of(every)) < 2:
            raise  # one value: validate's words, as they were
        raise ConfigError(every) from None


def _mesh_refusal(cfg: Any) -> str | None:
    """``mesh.devices`` and ``mesh.model_axis`` against the CPU devices a one-process job will have, where they are
    known before JAX starts (``cpu_devices_known``), as the run checks them once its devices start; else None."""
    from gensbi_sharding.harness.cpu_count import cpu_devices_known, resolve_cpu_count
    from gensbi_sharding.harness.hints import mesh_devices_problem, model_axis_problem

    if cfg.distributed.mode != "none" or cfg.mesh.spec != "dict" or not cpu_devices_known(cfg.devices.platform):
        return None
    try:
        devices, source = resolve_cpu_count(cfg.devices.cpu_count)
    except Exception:  # noqa: BLE001 (a count the environment gives wrong: the run's own refusal, as it starts)
        return None
    listed = None if cfg.mesh.devices is None else list(cfg.mesh.devices)
    simulated = bool(cfg.dry_run) and not listed and source in ("default", "devices.cpu_count")
    return mesh_devices_problem(listed, list(range(devices)), cfg.mesh.model_axis) or model_axis_problem(
        cfg.mesh.model_axis, len(listed or range(devices)), simulated, listed, cfg.data.batch_size)


def with_checked_fix(cfg: Any, problem: str | None, check: Callable[[Any], str | None]) -> str | None:
    """``problem``, where ``check`` refuses ``cfg`` with its fix applied: that refusal's own fix where it sets the same
    key and passes, else that refusal appended; ``problem`` as it is where its fix passes or sets no config value.

    Parameters
    ----------
    cfg : DictConfig
        The job's config, refused with ``problem``.
    problem : str or None
        ``check(cfg)``'s refusal.
    check : callable
        The run's checks of a config (``job_check.job_problem`` without this step).

    Returns
    -------
    str or None
    """
    fixes = fixes_of(fix_of(problem))
    fixed = _applied(cfg, fixes)
    # a refusal of another value typed wrong beside it (data.batch_size=-8 mesh.model_axis=3: the mesh) is skipped
    if fixed is None or (then := fix_refusal(check, _applied, fixed, fixes)) is None or then == problem:
        return problem  # the same: set, it fixes nothing
    drops = tuple(fix for fix in fixes if fix.startswith("~"))  # dropped still, beside a better value of what it sets
    sets, new = tuple(fix for fix in fixes if not fix.startswith("~")), fixes_of(fix_of(then))
    # a fix of several keeps those the next refusal does not replace (mesh.spec=dict beside a mesh.model_axis that
    # divides the devices: that axis alone is refused by the first check again, the refused fix offered)
    kept = tuple(fix for fix in sets if _key(fix) not in {_key(n) for n in new})
    # shown: launch.py's words; a Python caller's fix is cfg's settings (as Refusal says it)
    words = said(sets) if problem.shown is None or python_caller() and settings_of(sets) is not None else problem.shown
    better = (*drops, *kept, *new)
    tried = {_key(fix) for fix in fixes} & {_key(fix) for fix in new} and (again := _applied(cfg, better)) is not None
    if tried and fix_refusal(check, _applied, again, better) is None:
        # the note its first fix had ("(GenSBI's default)") is not the new one's; another way out still is
        after = problem.after if " or " in problem.after else ""
        return Refusal(problem.reason, better, how=problem.how, after=refused_too(words, then.reason) + after,
                       shown=_reshown(problem.shown, sets, new))
    # its fix, refused by a check in turn, is not offered (so no "set a=12, though a=12 is refused too: ...; set
    # a=10", a=10 below 2 x 6 again: advice that never passes)
    return f"{problem}, though {words} is refused too: {_unfixed(then, bool(tried)).removeprefix('ConfigError: ')}"


def _unfixed(then: str, refused: bool) -> str:
    """``then``, without the fix it offers where that fix was tried and ``refused``."""
    return then.reason if refused and isinstance(then, Refusal) and then.fix is not None else then


def _reshown(shown: str | None, sets: tuple[str, ...], new: tuple[str, ...]) -> str | None:
    """``shown``, the words that gave ``sets``, with each override ``new`` replaces said as ``new`` says it; None
    (the overrides as typed) where the words do not say one of them as typed."""
    for fix in new:
        old = next((s for s in sets if _key(s) == _key(fix)), None)
        if shown is None or old is None or old not in shown:
            return None
        shown = shown.replace(old, fix)
    return shown


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _applied(cfg: Any, fixes: tuple[str, ...]) -> Any:
    """A copy of ``cfg`` with each of ``fixes`` set, or dropped (``~key=value``: a key ``+`` added); None where one is
    no value of the config (a group such as ``mesh=auto``, a renamed or added key), which composing would give."""
    import copy

    from omegaconf import DictConfig, OmegaConf

    from gensbi_sharding.harness.override_grammar import parse

    overrides = parse(fixes).parsed
    if not fixes or len(overrides) != len(fixes):
        return None
    held = [OmegaConf.select(cfg, o.key, default=DictConfig({}), throw_on_resolution_failure=False) for o in overrides]
    drops = [o.typed == f"~{o.key}" and not o.error and not isinstance(h, DictConfig) for o, h in zip(overrides, held)]
    if any(not drop and (o.error or o.sweep or o.typed != o.key or isinstance(h, DictConfig))
           for o, h, drop in zip(overrides, held, drops)):
        return None  # known before the copy: a deep copy of a job's config is most of this check's cost
    fixed = copy.deepcopy(cfg)
    for o, drop in zip(overrides, drops):
        if drop:
            fixed = _dropped(fixed, o.key)
            continue
        try:
            OmegaConf.update(fixed, o.key, o.values()[0], merge=False)
        except Exception:  # noqa: BLE001 (a value the schema refuses: the fix's own check's to name)
            return None
    return fixed


def _dropped(cfg: Any, key: str) -> Any:
    """``cfg`` without ``key``; a typed section, which refuses ``del`` (as it refuses Hydra's ``~``), built again on
    its schema from its other keys."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import ConfigTypeError

    parent, _, name = key.rpartition(".")
    section = OmegaConf.select(cfg, parent) if parent else cfg
    try:
        with open_dict(section):
            del section[name]
    except ConfigTypeError:
        kept = OmegaConf.masked_copy(section, [k for k in section.keys() if k != name])
        OmegaConf.update(cfg, parent, OmegaConf.merge(OmegaConf.structured(OmegaConf.get_type(section)), kept),
                         merge=False)
    return cfg
