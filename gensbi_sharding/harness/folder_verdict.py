"""Explicit mode, several processes: process 0's verdict on the run's (or sweep's) folder, heard by every other process
in its own Hydra callback, before its Hydra writes anything there.

Process 0 alone checks and claims the folder, as in a single run, and joins the other processes to tell them its
verdict (``told_by_process_0``, the collective each job's claim makes too: ``run_folder.claim_together``): a refusal
ends each of them at once, with process 0's words and exit code 1. Were every process of a sweep (``launch.py -m``) to
claim its folder, the first to lock it would refuse the others ('is in use by another run'), process 0 perhaps; were
process 0's refusal told only in their first job, their Hydra would have written into the folder by then, and they
would go on to their next job and die on the coordinator process 0 took with it (an abort, exit 134).
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from gensbi_sharding.harness.check_crash import folder_check_crashed
from gensbi_sharding.harness.console import tagged
from gensbi_sharding.harness.processes import process_rank, several_processes

__all__ = ["hear_verdict", "tell_accepted", "tell_refused", "check_crashed_together", "quiet_join", "record_nothing"]

#: Where the join's native lines go (nowhere): Gloo's "Rank 1 is connected to 1 peer ranks", one per collective.
DROPPED = "gensbi_sharding.native.callback"
#: How ``console.tagged`` starts an error's line.
ERROR_TAG = "[ERROR] "


@contextlib.contextmanager
def quiet_join() -> Iterator[None]:
    """Joining the processes from a Hydra callback, before the job's launch.log exists: JAX's and the harness's notes
    on it ('Starting JAX distributed service', 'Unable to initialize backend ...') and Gloo's lines are the job's
    noise (inside run() they go to its launch.log), not the console's; warnings and errors still reach it."""
    from gensbi_sharding.harness.console import native_output_to_log

    noisy = [logging.getLogger(name) for name in ("jax", "absl", "gensbi_sharding")]
    levels = [logger.level for logger in noisy]
    dropped = logging.getLogger(DROPPED)
    dropped.propagate, dropped.handlers = False, [logging.NullHandler()]
    try:
        for logger in noisy:
            logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
        with native_output_to_log(logger=DROPPED):
            yield
    finally:
        for logger, level in zip(noisy, levels):
            logger.setLevel(level)


def _join_and_hear(config: DictConfig, refused: Exception | None = None) -> None:
    """Join the processes (as ``run_steps`` does, a no-op once joined) and make the claim's collective; ``refused``:
    process 0's refusal, told to the others (then raised here)."""
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.devices import configure_devices, initialize_distributed, resolve_cpu_count
    from gensbi_sharding.harness.run_folder import claim_together
    from gensbi_sharding.harness.sweep_verdict import same_sweep

    dist = config.distributed
    with quiet_join():
        initialize_distributed(dist.mode, coordinator_address=dist.coordinator_address,
                               num_processes=dist.num_processes, process_id=dist.process_id,
                               timeout_s=dist.timeout_s, heartbeat_s=dist.heartbeat_s)
        configure_devices(resolve_cpu_count(config.devices.cpu_count)[0], config.devices.platform)
        # no folder of its own to claim here (process 0's callback claimed it), no stop checks counted yet
        claim_together(SimpleNamespace(told=False, owner=False, claimed=True), SimpleNamespace(last_check_id=0),
                       refused)
        same_sweep(config)  # before any job: the processes' sweeps are as long
        # Gloo's threads print their lines as its connections come up, at times after the collective returned: one
        # more meeting, so that they print here, not on the console (else 1-7 of them there, one run in two)
        multihost_utils.sync_global_devices("gensbi_sharding: folder verdict heard")


def hear_verdict(config: DictConfig) -> None:
    """A process other than 0: hear process 0's verdict on the folder; a refusal (or a failed join) is printed, and
    ends this process with exit code 1 before its Hydra writes anything.

    Parameters
    ----------
    config : DictConfig
        The composed config (with its ``hydra`` section), as a Hydra callback gets it.
    """
    try:
        _join_and_hear(config)
    except Exception as err:  # noqa: BLE001 - process 0's words as they came, or why the join failed
        rank, count = process_rank(config)
        print(tagged("ERROR", f"[process {rank}/{count}] {err}"), file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def tell_accepted(config: DictConfig, release: Callable[[], None], sweep: bool = False) -> None:
    """Process 0, its folder claimed: the other processes hear it accepted (several processes; else nothing). A
    failed join is printed, ``release()`` gives the folder back, and the process ends with exit code 1.

    Parameters
    ----------
    config : DictConfig
        The composed config, as a Hydra callback gets it.
    release : callable
        Releases the folder's lock.
    sweep : bool
        Whether the folder is a sweep's: its record (``multirun.yaml``) is kept for ``settle_sweep_record``.
    """
    if not several_processes(config):
        return
    try:
        _join_and_hear(config)
    except Exception as err:  # noqa: BLE001 - e.g. a process never came: the coordinator's words name it
        release()
        print(tagged("ERROR", str(err)), file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    if sweep:  # what this process's sweeper saves next, from this config
        _SWEEP_RECORD[Path(config.hydra.sweep.dir).absolute() / "multirun.yaml"] = OmegaConf.to_yaml(config)


#: Process 0's record of its sweep (``multirun.yaml``), by path, until its first job's claim has met every process.
_SWEEP_RECORD: dict[Path, str] = {}


def settle_sweep_record() -> None:
    """Process 0 of several, in its sweep's first job once every process has met it there: its own record of the
    sweep written again over the others'. Each process's Hydra saves ``multirun.yaml`` before its first job, at times
    nothing orders, and the others' name their own ``distributed.process_id``: the continue command and the summary
    of a sweep stopped between jobs are read from it. Nothing where no record is kept (one process, a later job)."""
    from gensbi_sharding.harness.outputs import write_atomic

    for path, text in _SWEEP_RECORD.items():
        write_atomic(path, text)
    _SWEEP_RECORD.clear()


def record_nothing(config: DictConfig) -> None:
    """A process other than 0, the folder accepted: its Hydra writes no ``.hydra/`` record into the run's (or each
    job's) folder, which process 0's Hydra writes: on a shared disk process 1's would rewrite each job's
    ``overrides.yaml`` with ``distributed.process_id=1``, and the sweep's summary would grow a
    ``distributed.process_id`` column, 0 for one job and 1 for another.

    Parameters
    ----------
    config : DictConfig
        The composed config, as a Hydra callback gets it: a run's is the one its Hydra saves from; a sweep's jobs are
        composed again from its ``hydra.overrides.hydra`` (Hydra's launcher), which gets ``hydra.output_subdir=null``.
    """
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.output_subdir = None
        config.hydra.overrides.hydra.append("hydra.output_subdir=null")


def tell_refused(config: DictConfig, refused: Exception) -> None:
    """Process 0, its folder refused (or its check crashed): the other processes hear ``refused``'s words and end
    with them at once (several processes; else nothing). Where they cannot be joined, nothing more is said.

    Parameters
    ----------
    config : DictConfig
        The composed config, as a Hydra callback gets it.
    refused : Exception
        The refusal, its message the words process 0 printed.
    """
    if not several_processes(config):
        return
    try:  # the others wait in their callback's join (hear_verdict): told these words, not left to time out
        _join_and_hear(config, refused)
    except Exception as err:  # noqa: BLE001 - claim_together raises the refusal it told; any other: not told
        if err is not refused:
            logging.getLogger("gensbi_sharding").debug("the refusal could not be told to the other processes: %s", err)


def check_crashed_together(folder: Path, err: BaseException, config: DictConfig, release: Callable[[], None]) -> None:
    """Process 0's check of ``folder`` crashed (``check_crash.folder_check_crashed``): where that stops it, the other
    processes hear its words and end with them, as with a refusal (not left waiting for its verdict until
    ``distributed.timeout_s``); where the run goes on (a new folder), they hear the folder accepted.

    Parameters
    ----------
    folder : pathlib.Path
        The run's or sweep's folder.
    err : BaseException
        What the check raised.
    config : DictConfig
        The composed config, as a Hydra callback gets it.
    release : callable
        Releases the folder's lock (a failed join: ``tell_accepted``).
    """
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # its line, to tell the others word for word
            folder_check_crashed(folder, err, config)
    except SystemExit:
        sys.stderr.write(said.getvalue())
        sys.stderr.flush()
        line = next((t for t in said.getvalue().splitlines() if t.startswith(ERROR_TAG)), said.getvalue().strip())
        tell_refused(config, RuntimeError(line.removeprefix(ERROR_TAG)))
        raise
    sys.stderr.write(said.getvalue())
    tell_accepted(config, release)
