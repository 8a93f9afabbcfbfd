"""XLA's and Gloo's C++ lines, which C++ code writes straight to the process's stdout/stderr: ``native_output_to_log``
takes them from there into the job's log file (logger ``NATIVE``), the console keeping one line saying that XLA
warned. Split from ``console`` (what the console shows), which re-exports these names.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence

from gensbi_sharding.harness.native_notes import NOTES, note_for
from gensbi_sharding.harness.native_pump import end_and_wait, pump
from gensbi_sharding.messages import clipped

__all__ = ["NOISY_NATIVE_LINES", "GLOO_LINE", "NATIVE_LOG_LINE", "QUIET_NATIVE_WARNINGS", "NATIVE", "PIPED_TERMINALS",
           "job_log_name", "native_output_to_log", "straight_to_console"]

NOISY_NATIVE_LINES = (b"[Gloo]",)  # starts of lines C++ libraries print that belong in launch.log only
# Gloo's threads write their lines in pieces that interleave ("[Gloo] Rank [Gloo] Rank 7 is connected ...\n", then
# "5 is connected to 7 peer ranks. ...\n" or " is connected to 1\n": torn anywhere): any piece of GLOO_LINE is one.
GLOO_LINE = b"[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0"
BARE_NUMBER, DIGITS = re.compile(rb"\s*\d+\s*$"), re.compile(rb"\d+")  # "3\n": torn just before its last number
# A C++ (absl/TSL) log line of XLA at INFO or WARNING level, as jaxlib writes it to stderr:
# "W1130 21:32:49.078772    8033 spmd_partitioner.cc:666] [SPMD] Involuntary full rematerialization. ..."
# Errors (E/F) stay on the console. No public switch sends these to a file (TF_CPP_MIN_LOG_LEVEL only
# drops them), hence the descriptor-level routing below.
NATIVE_LOG_LINE = re.compile(rb"[IW]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ \]]+:\d+\] ")
#: XLA warnings that need no console notice: JAX's preemption notifier logging the SIGTERM a stop sends on purpose.
QUIET_NATIVE_WARNINGS = (b"SIGTERM caught",)
NATIVE = "gensbi_sharding.native"  # those lines, logged: launch.log only, even with verbose=true
PIPED_TERMINALS: dict[int, bool] = {}  # descriptor -> whether it was a terminal before native_output_to_log piped it
_BEFORE_PIPE: dict[int, int] = {}  # descriptor -> a copy of what it pointed at before native_output_to_log piped it


def job_log_name() -> str:
    """The name of the file this job logs to in its folder: ``launch.log``, a ``distributed=local`` process's own
    ``process_<i>.log`` (Hydra's job name, which the parent sets), "launch.log" outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return f"{HydraConfig.get().job.name}.log" if HydraConfig.initialized() else "launch.log"


@contextlib.contextmanager
def native_output_to_log(prefixes: Sequence[bytes] = NOISY_NATIVE_LINES, fds: Sequence[int] = (1, 2),
                         logger: str = NATIVE) -> Iterator[None]:
    """Take lines starting with ``prefixes``, and XLA's C++ log lines, out of this process's stdout and stderr.

    C++ libraries (Gloo, XLA) write to file descriptors 1 and 2 directly, past Python's
    ``sys.stdout``, so each descriptor is pointed at a pipe; a thread passes every other byte
    on to the real descriptor as it arrives (progress bars included) and logs the matching
    lines to ``logger`` (launch.log only). The first XLA warning also gets one console line
    (logger ``gensbi_sharding``), so nothing it says goes unnoticed. On exit the descriptors
    are restored and the threads drained of this process's output (``native_pump``: bounded, and a
    process started meanwhile still holding a pipe is not waited for).
    """
    warned: list[bool] = []
    NOTES.clear()  # a job's own: a sweep's next job may leave its model axis busy
    with contextlib.ExitStack() as stack:
        for fd in fds:
            stack.enter_context(_lines_of(fd, tuple(prefixes), logging.getLogger(logger), warned))
        yield


@contextlib.contextmanager
def straight_to_console(fd: int = 2) -> Iterator[None]:
    """Point ``fd`` back at what ``native_output_to_log`` found there (the console), for the block only.

    For C++ code that may end the process with its last line: XLA exits at a flag in ``XLA_FLAGS`` it does not know
    ("Unknown flag in XLA_FLAGS: --xla_bogus=1") as JAX's backend starts, and the pipe's thread dies with that line
    unread. Outside ``native_output_to_log`` (or for a descriptor it did not pipe) the block runs as it is.
    """
    if (before := _BEFORE_PIPE.get(fd)) is None:
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    piped = os.dup(fd)
    try:  # a failed dup2 too: the copy is closed, not leaked
        os.dup2(before, fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):  # Python's text written in the block, a line not ended too, goes
            stream.flush()  # where the block sent it, not through the pipe after it
        os.dup2(piped, fd)
        os.close(piped)


def _may_become_native(pending: bytes) -> bool:
    """Whether a partial line could still turn out to be a C++ log line (held back until its end)."""
    return pending[:1] in (b"I", b"W") and len(pending) < 512 and b"]" not in pending


@contextlib.contextmanager
def _lines_of(fd: int, prefixes: tuple[bytes, ...], sink: logging.Logger, warned: list[bool]) -> Iterator[None]:
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = os.dup(fd)
    except (OSError, ValueError):  # no such descriptor (e.g. a test runner's capture): nothing to take
        yield
        return
    read_end, write_end = os.pipe()
    PIPED_TERMINALS[fd] = os.isatty(saved)
    _BEFORE_PIPE[fd] = saved
    os.dup2(write_end, fd)
    os.close(write_end)

    after_noisy = [False]  # the last line was a noisy one: a bare number next is the tail of a torn one

    def forward(data: bytes) -> None:
        kept = []
        for line in data.splitlines(keepends=True):
            bare = line.lstrip(b"\r")
            piece = DIGITS.sub(b"0", bare.strip())  # a bare number is one only right after a piece
            # A bare number or a lone newline right after a noisy line is the torn tail of one (two processes' Gloo
            # lines interleaved: "... is : 1[Gloo] ... is : 1" + "\n" + "\n")
            tail = after_noisy[0] and (BARE_NUMBER.match(bare) or not bare.strip())
            noisy = prefixes == NOISY_NATIVE_LINES and (b"peer ranks" in bare or tail or (
                re.search(rb"[A-Za-z]", piece) is not None and piece in GLOO_LINE))
            after_noisy[0] = bool(bare.startswith(prefixes) or noisy)
            if bare.startswith(prefixes) or NATIVE_LOG_LINE.match(bare) or noisy:
                text = line.decode(errors="replace").strip()
                sink.info("%s", text)
                if (bare.startswith(b"W") and not warned and NATIVE_LOG_LINE.match(bare)
                        and not any(quiet in bare for quiet in QUIET_NATIVE_WARNINGS)):
                    warned.append(True)  # once per run: the message without its C++ header, cut short
                    said = NATIVE_LOG_LINE.sub(b"", bare, count=1).decode(errors="replace").strip()
                    logging.getLogger("gensbi_sharding").warning(  # + its cause where the run said it (the hint)
                        "XLA warned (all its lines are in %s): %s%s", job_log_name(), clipped(said, 100),
                        note_for(bare))
            else:
                kept.append(line)
        with contextlib.suppress(OSError):
            os.write(saved, b"".join(kept))

    def held(partial: bytes) -> bool:  # a partial line that may still become a noisy one: held back
        return any(p.startswith(partial[:len(p)]) for p in prefixes) or _may_become_native(partial)

    ended = threading.Event()
    thread = threading.Thread(target=pump, args=(read_end, forward, held, ended), name=f"native-output-{fd}",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        PIPED_TERMINALS.pop(fd, None)
        _BEFORE_PIPE.pop(fd, None)
        if end_and_wait(fd, saved, thread, ended):  # bounded; a worker process still holding the pipe: not waited
            os.close(saved)
