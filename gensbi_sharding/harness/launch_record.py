"""Hydra's record of the command that saved a folder's checkpoints, kept through attempts that restore nothing.

Hydra rewrites ``<run>/.hydra/{config,hydra,overrides}.yaml`` at every launch, before the
harness can check anything. An attempt refused before it restores (``train.resume=auto`` with
another ``model.num_heads``) would leave its own command as the folder's record, and every
later hint built from that record (the command that continues a stopped sweep job, "the run
that saved it was launched with") would name the refused command. So before Hydra writes,
the record is copied to ``.hydra/saved_by/``; once the attempt ends, it is put back if the
attempt restored and trained nothing, and dropped otherwise (the new record is then the truth).
Every earlier record, with checkpoints or without, is also set aside as ``.hydra/<name>.attempt<N>.yaml``
(``earlier_attempts.set_aside``) before the new attempt's replaces it: nothing an attempt typed is lost (not even
of a launch that died before its first checkpoint, whose record the next launch, or a ``run(cfg)`` from Python,
would overwrite or delete).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

from gensbi_sharding.harness.earlier_attempts import set_aside, with_aside_copies

__all__ = ["keep_record", "settle_record", "saved_record", "step_folder_names", "complete_step", "record_python_run",
           "saving_record", "record_x64", "launch_x64", "X64_FILE",
           "quiet_absl"]

#: This launch's ``jax_enable_x64``, written as the run starts (``record_x64``): a run killed before its
#: ``metrics.json`` still says it, so its continue commands carry ``JAX_ENABLE_X64``, and a resume under the
#: other setting is refused. Kept, set aside and put back with Hydra's record, whose launch it belongs to.
X64_FILE = "x64.yaml"
_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml", X64_FILE)
_RECORD = re.compile("|".join(map(re.escape, _FILES)))


def saved_record(run_dir: Path) -> Path:
    """The folder holding the kept record of ``run_dir`` (it may not exist)."""
    return Path(run_dir) / ".hydra" / "saved_by"


@contextlib.contextmanager
def quiet_absl() -> Iterator[None]:
    """Inside: absl's logger (Orbax's) says warnings and errors only, its level put back after. Orbax's info line
    "Read Metadata={...} from ..." as a checkpoint is read would otherwise stand above a refusal's one line."""
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.WARNING)
    try:
        yield
    finally:
        absl.setLevel(level)


def step_folder_names(run_dir: Path) -> list[int]:
    """The steps of ``<run_dir>/checkpoints``'s plainly named step folders, sorted, read from their names only.

    Not through Orbax: asking it which are complete would start JAX's backend (before a run sets its device
    count, or in ``distributed=local``'s parent). Orbax gives a folder its plain name once its save completed.
    """
    folder = Path(run_dir) / "checkpoints"
    return sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit()) if folder.is_dir() else []


def complete_step(run_dir: Path, named: int) -> tuple[int | None, Path, str]:
    """``(step, train.resume's folder, note)`` of ``run_dir``'s newest complete checkpoint, ``named`` its newest step
    folder by name (``step_folder_names``): where that one is no complete checkpoint (its Orbax step metadata lost, a
    save cut short), the complete step before it, resumed by its own folder (its run folder is refused:
    ``find_checkpoint`` names the newer step), and a note naming both; ``(None, run_dir, "")``: none is complete;
    ``(None, run_dir, "step N: <why>; ...")``: every complete step is damaged, each named.
    Asked of the library (Orbax's step metadata; it imports JAX, starts no backend) only where step ``named``'s
    folder holds anything: an empty one, no checkpoint the library reads, is named as before. A complete step with an
    item missing or unreadable (``step_items.step_damage``) is passed over likewise, its note saying why."""
    if not (step := Path(run_dir) / "checkpoints" / str(named)).is_dir() or not any(step.iterdir()):
        return named, Path(run_dir), ""
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps, find_checkpoint
    from gensbi_sharding.harness.step_items import step_damage

    checkpoints = Path(run_dir) / CHECKPOINT_SUBDIR
    with quiet_absl():
        try:
            newest, note = int(find_checkpoint(run_dir).name), ""
        except FileNotFoundError:  # the newest step is not complete: the one before it, if any, is
            newest, note = None, f"; step {named}, newer, is not complete"
        # A complete step whose item is gone or unreadable (its resume would be refused in turn): an older one;
        # its arrays' metadata read too (a step whose arrays are damaged, offered, is refused pasted)
        steps = [s for s in committed_steps(checkpoints) if newest is None or s <= newest]
        damage = {s: why for s in steps if (why := step_damage(checkpoints / str(s))) is not None}
        while steps and (why := damage.get(steps[-1])) is not None:
            note, steps = note or f"; step {steps[-1]}, newer, is damaged: {why}", steps[:-1]
    if not steps:  # every step damaged: said, so the refusal can offer a command
        return None, Path(run_dir), "; ".join(f"step {s}: {why}" for s, why in sorted(damage.items(), reverse=True))
    return steps[-1], Path(run_dir) if not note else checkpoints / str(steps[-1]), note


def keep_record(run_dir: Path, previous: dict | None = None) -> None:
    """Copy ``run_dir``'s Hydra record aside if the folder holds checkpoints, and copy the record to
    ``<name>.attempt<N>.yaml`` (called before Hydra writes over it, or ``run(cfg)`` records its config).

    A copy left by an attempt killed before it settled is kept, unless that attempt saved a newer
    checkpoint (it then trained, so the record Hydra wrote for it is the truth).

    Parameters
    ----------
    run_dir : Path
        The run's folder, claimed.
    previous : dict or None
        The earlier attempt's ``metrics.json`` (numbers the copies as ``earlier_attempts.set_aside`` does).
    """
    _copy_for_put_back(Path(run_dir))
    set_aside(Path(run_dir) / ".hydra", previous, names=_RECORD, copy=True)  # Hydra writes over it as the job starts


def _copy_for_put_back(run_dir: Path) -> None:
    """The record of the launch that saved the folder's checkpoints, copied to ``saved_by/``; none without them."""
    kept = saved_record(run_dir)
    steps = step_folder_names(run_dir)  # any step folder tells a later attempt's from this one's
    step = str(steps[-1]) if steps else None
    if step is None or not any((run_dir / ".hydra" / name).is_file() for name in _FILES):  # a Python run's: config
        return
    if kept.is_dir() and (kept / "step").is_file() and (kept / "step").read_text() == step:
        return
    shutil.rmtree(kept, ignore_errors=True)
    staging = kept.with_name("saved_by.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name in _FILES:
        if (run_dir / ".hydra" / name).is_file():
            shutil.copy2(run_dir / ".hydra" / name, staging / name)
    (staging / "step").write_text(step)
    os.replace(staging, kept)  # whole or absent: a copy cut short would later overwrite the record


def settle_record(run_dir: Path, *, continued: bool) -> None:
    """Put the kept record back unless this attempt ``continued`` the run (restored or trained); drop the copy. Put
    back, the record is as the attempt found it: the copy ``keep_record`` set aside of it, the same bytes, goes too.
    A copy of an older checkpoint's record (left by an attempt killed after it saved a newer one, and found by an
    attempt refused before ``keep_record``) is only dropped: the record in place is the newer one's."""
    kept, steps = saved_record(run_dir), step_folder_names(run_dir)
    if not kept.is_dir():
        return
    if not continued and steps and (kept / "step").is_file() and (kept / "step").read_text() == str(steps[-1]):
        for name in _FILES:
            if not (kept / name).is_file() and name == X64_FILE:  # this attempt's setting, not the saving launch's
                (Path(run_dir) / ".hydra" / name).unlink(missing_ok=True)
            if (kept / name).is_file():
                os.replace(kept / name, record := Path(run_dir) / ".hydra" / name)
                newest = with_aside_copies([record])[1:2]  # set aside by this attempt: past every earlier number
                if newest and newest[0].read_bytes() == record.read_bytes():
                    newest[0].unlink()
    shutil.rmtree(kept, ignore_errors=True)


def record_python_run(run_dir: Path, config: Any, previous: dict | None = None) -> None:
    """For ``run(cfg)`` called from Python, which Hydra records nothing of: ``run_dir``'s Hydra record, another
    launch's, set aside as a launch sets it aside (``keep_record``: ``<name>.attempt<N>.yaml``, and ``settle_record``
    puts it back if this attempt continues nothing), and in its place ``config`` as Hydra records a run's, with no
    command (no overrides were typed), so the other launch's record is not kept as this run's, its command named as the
    one that saved this run's checkpoints, nor deleted where that launch saved no checkpoint. A folder
    without a record gets none.

    Parameters
    ----------
    run_dir : Path
        The run's folder, claimed.
    config : DictConfig
        The config the run was given.
    previous : dict or None
        The earlier attempt's ``metrics.json``, None when it left none.
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import write_atomic

    record = Path(run_dir) / ".hydra"
    if not record.is_dir():
        return
    keep_record(run_dir, previous)
    for name in _FILES[1:]:  # hydra.yaml, overrides.yaml: the command of another launch, kept aside now
        (record / name).unlink(missing_ok=True)
    write_atomic(record / "config.yaml", OmegaConf.to_yaml(config))  # unresolved, as Hydra writes it


def saving_record(step_dir: Path) -> Path:
    """The Hydra record (its folder) of the launch that saved the step folder ``step_dir``
    (``<run>/checkpoints/<step>``): in the running Hydra job's own folder, whose record Hydra has replaced by this
    attempt's, the copy ``keep_record`` made; elsewhere that copy for a step not after the one it kept (one a run from
    Python, or an attempt killed before it settled, left: a later attempt's record replaced the folder's), else the
    folder's own.

    Parameters
    ----------
    step_dir : Path
        A checkpoint's step folder.
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    run_dir, step = Path(step_dir).parent.parent, Path(step_dir).name
    kept = saved_record(run_dir)
    # Its output_dir is unset (???) before Hydra makes the job's folder: the check of a resume's settings then reads
    # the record (reading output_dir would raise MissingMandatoryValue, stopping that check)
    own = OmegaConf.select(HydraConfig.get(), "runtime.output_dir", default=None) if HydraConfig.initialized() else None
    if own is not None and Path(own).resolve() == run_dir.resolve():
        return kept
    try:
        older = step.isdigit() and int(step) <= int((kept / "step").read_text())
    except (OSError, ValueError):  # no copy, or one cut short
        older = False
    return kept if older else run_dir / ".hydra"


def record_x64(run_dir: Path, on: bool, make: bool = False) -> None:
    """Write this launch's ``jax_enable_x64`` ``on`` into ``run_dir``'s Hydra record (``X64_FILE``), as the run starts;
    where the folder has no record, nothing, unless ``make`` (``run(cfg)`` from Python into a new folder: a record
    of that file alone; was none, so a Python run killed before its metrics.json left no word of its setting).

    Parameters
    ----------
    run_dir : Path
        The run's folder, claimed.
    on : bool
        The launch's setting (``x64_words.x64_on``).
    make : bool
        Make the record (``.hydra``) where there is none.

    A folder moved as the job starts (its lock file gone with it) is written nothing: the job goes on in the folder
    made anew, and its last line says the folder moved (``folder_gone.gone_note``), not a FileNotFoundError.
    """
    from gensbi_sharding.harness.folder_lock import FolderLock
    from gensbi_sharding.harness.outputs import write_atomic

    if make:
        (Path(run_dir) / ".hydra").mkdir(exist_ok=True)
    if (record := Path(run_dir) / ".hydra").is_dir():
        try:
            write_atomic(record / X64_FILE, f"jax_enable_x64: {str(bool(on)).lower()}\n")
        except FileNotFoundError:  # the folder moved (mv of a sweep's folder as this job starts): its record went
            if (Path(run_dir) / FolderLock.LOCK).exists():  # with it; the job's last line says so (gone_note)
                raise


def launch_x64(step_dir: Path) -> bool | None:
    """The ``jax_enable_x64`` the launch that saved ``step_dir`` recorded (``record_x64``, in ``saving_record``'s
    folder); None where none is recorded.

    Parameters
    ----------
    step_dir : Path
        A checkpoint's step folder (``<run>/checkpoints/<step>``).

    Raises
    ------
    ConfigError
        The record (hand-edited) holds no bool ``jax_enable_x64``: named, with its fix.
    """
    record = saving_record(Path(step_dir))
    if not record.is_dir():  # no copy kept (the running job's first attempt): the folder's record is the saver's
        record = Path(step_dir).parent.parent / ".hydra"  # (so one is read at a stop of this very launch)
    try:
        text = (record / X64_FILE).read_text(encoding="utf-8")
    except OSError:  # none recorded (or gone): the run's setting is not known
        return None
    except UnicodeDecodeError:
        text = None
    # Read as YAML, as Hydra's own files (OmegaConf's loader: true/false, any case, are bools; yes/on are words): a
    # hand-edited record ("jax_enable_x64: True", "true  # 64-bit", "{jax_enable_x64: true}") is read (compared as
    # exact text, it would be ignored, and a resume under the other setting go on unrefused)
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError

    try:
        value = OmegaConf.to_container(OmegaConf.create(text)).get("jax_enable_x64") if text is not None else None
    except (OmegaConfBaseException, YAMLError, AttributeError, ValueError):  # not a mapping, not YAML
        value = None
    if isinstance(value, bool):
        return value
    from gensbi_sharding.harness.config import ConfigError

    said = repr(text.strip()[:80]) if text is not None else "no UTF-8 text"
    raise ConfigError(f"{record / X64_FILE} holds {said}, not 'jax_enable_x64: true' or 'jax_enable_x64: false': "
                      f"write the setting the run was launched with (true: JAX_ENABLE_X64=1), or delete the file if "
                      f"it is not known")
