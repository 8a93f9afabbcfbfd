"""The thread that passes a piped descriptor's bytes on (``native_console.native_output_to_log``), and its bounded end.

On exit the descriptor is restored, and the job waits until its pump has passed on all that this process wrote: until
it reads ``END``, written through the pipe last. It waited for the pipe's end of file instead, which never came while a
process started meanwhile still held the pipe's write end: ``eval.c2st_jobs=2``'s scikit-learn workers (joblib's loky
processes, idle for 300 s before they end) held stdout's and stderr's, and the job waited out its bound, 5 s a
descriptor: 10 s after its last line, and after a Ctrl-C during C2ST, which with one job stopped within a second. The
pump then goes on passing on what such processes write, until they end. Pure Python: no JAX.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["END", "pump", "end_and_wait"]

#: Written through the pipe last by the process that piped it (one write, atomic under PIPE_BUF): what comes before it
#: is this process's output, what comes after it (a child's) is passed on as before.
END = b"\x00gensbi_sharding: end of this process's output\x00"
BOUND_S = 5.0  # the longest the job waits for its pump (a pump stuck passing bytes on cannot hang the job)


def _end_tail(pending: bytes) -> int:
    """Where a start of ``END`` split across two reads begins at the end of ``pending`` (else ``len(pending)``)."""
    at = pending.rfind(END[:1], max(len(pending) - len(END) + 1, 0))
    return at if at >= 0 and END.startswith(pending[at:]) else len(pending)


def pump(read_end: int, forward: Callable[[bytes], None], held: Callable[[bytes], bool],
         ended: threading.Event) -> None:
    """Pass the pipe's bytes on to ``forward`` until its end of file: whole lines ("\\n") and progress-bar updates
    ("\\r") at once, a partial line unless ``held(partial)`` (it may still become a line to take out); ``ended`` is
    set once ``END`` (dropped) was read, or at the end of file."""
    pending = b""
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            pending += chunk
            if not ended.is_set() and (at := pending.find(END)) >= 0:
                if pending[:at]:
                    forward(pending[:at])  # all this process wrote, partial lines too: no more of them comes
                pending = pending[at + len(END):]
                ended.set()
            cut = max(pending.rfind(b"\n"), pending.rfind(b"\r"))
            if cut >= 0:
                forward(pending[:cut + 1])
                pending = pending[cut + 1:]
            keep = len(pending) if ended.is_set() else _end_tail(pending)
            if pending[:keep] and not held(pending[:keep]):
                forward(pending[:keep])
                pending = pending[keep:]
        if pending:
            forward(pending)
    ended.set()


def end_and_wait(fd: int, saved: int, thread: threading.Thread, ended: threading.Event) -> bool:
    """Write ``END`` through ``fd`` (the pipe), point ``fd`` back at ``saved`` and wait, bounded, for ``thread``'s pump
    to pass on all before it; True when the pump has ended too (no other process holds the pipe: ``saved`` may be
    closed), False while it still passes on another process's output to ``saved``."""
    try:
        os.write(fd, END)
    except OSError:  # the pipe's reader gone: end of file is all there is to wait for
        pass
    os.dup2(saved, fd)  # drops this process's write end: the pump reads end of file unless another process holds one
    ended.wait(BOUND_S)
    thread.join(timeout=0.05)  # at once where no other process holds the pipe
    return not thread.is_alive()
