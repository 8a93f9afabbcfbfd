"""``distributed=local``'s children: each one's tie to its parent, and the parent's handling of each one's stderr.

When one process of a job dies, the others learn it from JAX's coordination service (or a collective that
fails), and XLA ends them itself: C++ ``E``/``F`` log lines ("Terminating process because the JAX distributed
service detected fatal errors", "Check failed"), absl's stack dumps, then SIGABRT. No public switch silences them
(``TF_CPP_MIN_LOG_LEVEL`` keeps FATAL and the dumps), and the parent cannot stop the survivors sooner without
losing what they would say of their own. So each child's stderr passes through the parent (``ChildOutput``):
to the console as it comes (progress bars included) until a peer of that child dies, then to the end of the
child's ``process_<i>.log``, where the parent's one error line points (what each ended with: ``child_errors``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from gensbi_sharding.harness.child_logging import keep_process_log
from gensbi_sharding.harness.launch_record import step_folder_names
from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
from gensbi_sharding.harness.sweep_hints import continue_command

__all__ = ["ChildOutput", "watch_parent", "model_group_problem", "file_stamp", "continue_hint", "without_device_count",
           "free_port"]


class ChildOutput:
    """Pass each child's stderr on to this process's stderr; once ``quiet(ranks)``, to their ``process_<i>.log``."""

    def __init__(self, out: Path, console: int = 2) -> None:
        # console: fd 2, past sys.stderr, as the child wrote it (a test's capture too)
        self.out, self.console, self._quiet, self._threads = Path(out), console, set(), []
        self._open = b""  # what the console shows after its last newline (a progress bar, say), its last 4 KiB
        self._opened_by: int | None = None  # the child whose text is on the console's open line
        self._ended_for: int | None = None  # the child whose open line end_line ended: its own newline not written
        # The pumps and this process's own lines write to one console. Reentrant: a signal handler logs (a SIGTERM is
        # said at once) and may run while this thread holds it, which a plain Lock would wait on for ever
        self._lock = threading.RLock()

    def follow(self, rank: int, stderr: IO[bytes]) -> None:
        """Start passing on ``stderr`` (a child's, ``subprocess.PIPE``), the child of ``rank``."""
        thread = threading.Thread(target=self._pump, args=(rank, stderr), name=f"process-{rank}-stderr", daemon=True)
        thread.start()
        self._threads.append(thread)

    def quiet(self, ranks: list[int]) -> None:
        """From now on the output of ``ranks`` (the survivors of a dead peer) goes to their log files only."""
        self._quiet.update(ranks)

    def join(self, timeout_s: float = 5.0) -> None:
        """Wait (bounded) until every child's stderr is drained: the parent's last line then comes last."""
        for thread in self._threads:
            thread.join(timeout=timeout_s)

    def end_line(self) -> None:
        """End the console's line if a child left text on it (a progress bar cut off: a peer died, a time limit),
        so the parent's next line starts a line of its own (not "... step=580][ERROR] process 1 of 2 died ...");
        a bar its child cleared (spaces, then a carriage return) leaves nothing to end."""
        with self._lock:
            shown = [part for part in self._open.split(b"\r") if part]
            if shown and shown[-1].strip():
                with contextlib.suppress(OSError):
                    os.write(self.console, b"\n")
                self._ended_for = self._opened_by  # the newline that child writes next is this one: not again
            self._open = b""

    @contextlib.contextmanager
    def own_lines(self) -> Iterator[None]:
        """Inside: each line this process logs to the console starts a line of its own, after any child's text left
        open there: a child's line written in two pieces, as ``tqdm.write`` does, would otherwise get the parent's
        "[WARNING] received Ctrl-C: ..." glued on: "... (Ctrl-C again stops at once)[WARNING] received Ctrl-C: ..."."""
        handlers = {h for name in (None, "gensbi_sharding") for h in logging.getLogger(name).handlers
                    if isinstance(h, logging.StreamHandler) and self._shows(h.stream)}  # not launch.log's

        def ends_line(record: logging.LogRecord) -> bool:
            self.end_line()
            return True

        for handler in handlers:
            handler.addFilter(ends_line)
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(ends_line)

    def _shows(self, stream: Any) -> bool:
        """Whether ``stream`` writes to this console (the same file: a log file's lines end no child's line)."""
        try:
            mine, its = os.fstat(self.console), os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):  # closed, or no descriptor (a test's capture)
            return False
        return (mine.st_dev, mine.st_ino) == (its.st_dev, its.st_ino)

    def _pump(self, rank: int, stderr: IO[bytes]) -> None:
        # Read until the child closes its end, whatever becomes of each chunk: a pump that stopped reading would leave
        # the child blocked on a full pipe (64 KiB of warnings), hanging the whole job.
        with stderr, contextlib.suppress(OSError):
            while chunk := os.read(stderr.fileno(), 65536):
                self._pass_on(rank, chunk)

    def _pass_on(self, rank: int, chunk: bytes) -> None:
        """``chunk`` to the console (whole: a pipe may take part of it), or to the log once quiet or if the console
        fails (a closed pipe, as under ``| head``); dropped only if both fail."""
        if rank not in self._quiet:
            with self._lock:
                if self._ended_for == rank:
                    chunk = chunk[1:] if chunk.startswith(b"\n") else chunk  # its line's end, written by end_line
                    self._ended_for = None
                try:
                    line = chunk.rsplit(b"\n", 1)
                    self._open = (line[1] if len(line) == 2 else self._open + chunk)[-4096:]
                    self._opened_by = rank
                    while chunk:
                        chunk = chunk[os.write(self.console, chunk):]
                    return
                except OSError:
                    pass
        with contextlib.suppress(OSError), open(self.out / f"process_{rank}.log", "ab") as log_file:
            log_file.write(chunk)


def watch_parent() -> None:
    """In a ``distributed=local`` child: end this process when the parent dies, and end it without sweeping.

    A daemon thread blocks reading the pipe the parent holds open; end of file means
    the parent is gone (even killed with SIGKILL), and the child kills itself. At exit the objects the run left
    are frozen (``gc.freeze``) before Python's finalisation, whose full collections over JAX's and Flax's objects
    took 1-5 s of each process's CPU after its last line while the job waited (nothing is left to free at exit).
    Its ``process_<i>.log`` is kept whatever logging the job chose (``child_logging.keep_process_log``).
    """
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.console import job_log_name

    fd = os.environ.get(LOCAL_CHILD_ENV)
    if not fd:
        return
    if HydraConfig.initialized():  # where the parent reads its refusals (none else under hydra/job_logging=disabled)
        keep_process_log(Path(HydraConfig.get().runtime.output_dir) / job_log_name())
    atexit.unregister(gc.freeze)  # once, however many runs
    atexit.register(gc.freeze)  # runs before the handlers registered earlier (JAX's shutdown, logging's flush)

    def wait_for_eof():
        while os.read(int(fd), 1):
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait_for_eof, name="parent-watch", daemon=True).start()


def model_group_problem(cfg: Any, processes: int, devices: int) -> str | None:
    """Why the ``mesh=dict`` of a job of ``processes`` processes with ``devices`` CPU devices each cannot be built, as
    each process would refuse it once started (``run_mesh``): checked by their parent before any starts, so no
    process imports and starts JAX only to refuse it. None if it can, or if only the devices say (``mesh.devices``
    listed, ``mesh=auto``).

    The model axis it names divides each process's devices (a model group stays inside one process), and keeps
    ``data.batch_size`` a multiple of its shards and of the data-parallel size it leaves where one does; where none
    does, it names the ``data.batch_size`` below that fits too, so the batch checks that follow pass it as well (6
    devices over 2 processes, ``mesh.model_axis=4``: not "set mesh.model_axis=3", which ``data.batch_size=63`` fails).

    Parameters
    ----------
    cfg : DictConfig
        The job's config: ``mesh.spec``, ``mesh.devices``, ``mesh.model_axis``; ``data.batch_size``, ``data.shards``.
    processes : int
        ``distributed.local_processes``.
    devices : int
        The CPU devices of each process.
    """
    import math

    from gensbi_sharding.batch_sizes import nearest_batch_sizes
    from gensbi_sharding.harness.hints import mesh_devices_problem
    from gensbi_sharding.harness.refusal import Refusal

    if cfg.mesh.spec == "dict" and cfg.mesh.devices is not None and (problem := mesh_devices_problem(  # an empty list,
            listed := list(cfg.mesh.devices), listed, cfg.mesh.model_axis)):  # an id twice: the ids unknown here (else
        return problem  # refused by each process once started, in the run's folder)
    if cfg.mesh.spec != "dict" or cfg.mesh.devices or devices % cfg.mesh.model_axis == 0:
        return None
    axis, total, data = cfg.mesh.model_axis, processes * devices, cfg.get("data") or {}
    batch, shards = data.get("batch_size"), data.get("shards") or processes
    fits = [d for d in range(1, devices + 1) if devices % d == 0]  # each divides the job's devices too
    multiple = {d: math.lcm(shards, total // d) for d in fits}  # what data.batch_size must be a multiple of
    keeps = [d for d in fits if batch is None or batch % multiple[d] == 0]
    nearest = min(keeps or fits, key=lambda d: (abs(d - axis), d))
    fix, note = f"mesh.model_axis={nearest}", ""
    if not keeps:  # no model axis keeps the batch size: the nearest that fits, typed together; at most the one asked
        # for (its simulations are known to hold that many pairs), as the batch check's rule names it
        size = nearest_batch_sizes(batch, multiple[nearest], max(batch, multiple[nearest]))[0]
        fix = (fix, f"data.batch_size={size}")
        note = (f" (the batch is split over {shards} data shards and the data-parallel size {total // nearest}; no "
                f"model axis keeps data.batch_size={batch})")
    elif nearest != min(fits, key=lambda d: (abs(d - axis), d)):
        note = f" (the nearest that keeps data.batch_size={batch})"
    each = f"each of the {processes} processes {{}} {devices} device{'s' if devices != 1 else ''}"
    if total % axis:  # the job's devices refuse it already: run_mesh's first check, said as it says it
        reason, where = f"{total} devices are not divisible by model_axis={axis}", f", and {each.format('has')}"
    else:  # each process's devices named, not "2 devices are not divisible by model_axis=4", read as the job's 8
        reason, where = (f"{each.format('holds')}; {devices} device{'s are' if devices != 1 else ' is'} not divisible "
                         f"by model_axis={axis}"), ""
    return Refusal(f"mesh.model_axis={axis}: {reason}", fix, shown=" and ".join(fix) if not keeps else None,
                   after=f"{note}; a model group stays inside one process{where} (divisors of {devices}: {fits})")


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """``path``'s inode, modification time and size (None if absent): whether a process rewrote it since
    (``outputs.write_json`` replaces the file: a new inode)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def continue_hint(out: Path, *, again: bool = False, dry_run: bool = False) -> str:
    """For processes killed from outside (no error of their own): the checkpoint they left and the command
    that continues from it (a killed job's work is in its checkpoints; its metrics.json named none). Where they
    left none: ``again``, the command that runs it again, as a one-process run's failure says it
    (``stop_record.failure_error``), so that a rerun is offered where nothing is kept; else "". A dry run
    (``dry_run``), which saves none and continues nothing, is run again into a new folder
    (``interrupt_lines.again_command``): its continue command was refused pasted (``dry_run=true with
    train.resume=auto``).

    Read from the folder names (``step_folder_names``), not through Orbax, which would start JAX in this parent.
    """
    if not (steps := step_folder_names(out)):
        if again and dry_run:
            from gensbi_sharding.harness.interrupt_lines import again_command

            return f"; a dry run has nothing to continue: run it again with: {again_command(out)}"
        return f"; it saved no checkpoint: run it again with: {continue_command(out)}" if again else ""
    return (f"; its last checkpoint is step {steps[-1]} ({out / 'checkpoints' / str(steps[-1])}): continue "
            f"with: {continue_command(out)}")


def without_device_count(flags: str) -> str:
    """``XLA_FLAGS`` without a device count: each child is told its own share explicitly."""
    return " ".join(f for f in flags.split() if not f.startswith("--xla_force_host_platform_device_count"))


def free_port() -> int:
    """A TCP port of the loopback interface that nothing listens on now (the children's coordinator)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
