"""``native_console.straight_to_console`` (r74j): what Python wrote in the block goes to the console the block pointed
the descriptor at, and a failed switch leaks no descriptor.

Was: the streams were flushed on entering only, so a line not yet ended in ``sys.stderr``'s buffer when the block
ended went through the pipe after it (to launch.log's filter, or after the console's later lines); and where pointing
the descriptor back failed, the copy of the pipe's end stayed open.
"""

import os
import sys

import pytest

from gensbi_sharding.harness import native_console
from gensbi_sharding.harness.native_console import straight_to_console


def _drained(read_end: int, write_end: int) -> bytes:
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        return f.read()


def test_text_written_in_the_block_reaches_the_console_not_the_pipe(monkeypatch):
    console_r, console_w = os.pipe()
    pipe_r, pipe_w = os.pipe()
    fd = os.dup(pipe_w)  # the descriptor native_output_to_log pointed at its pipe
    stream = open(fd, "w", buffering=1, closefd=False)  # line-buffered, as sys.stderr is
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setitem(native_console._BEFORE_PIPE, fd, console_w)
    try:
        with straight_to_console(fd):
            stream.write("Unknown flag")  # the line's end not yet written: held in the buffer
        stream.write(" (after)\n")
        stream.flush()
    finally:
        monkeypatch.undo()
        stream.close()
        os.close(fd)
    assert _drained(console_r, console_w) == b"Unknown flag"
    assert _drained(pipe_r, pipe_w) == b" (after)\n"


def test_a_failed_switch_leaves_no_descriptor_open(monkeypatch):
    read_end, write_end = os.pipe()
    gone_r, gone_w = os.pipe()
    os.close(gone_r), os.close(gone_w)  # what it would point back at: no descriptor now
    monkeypatch.setitem(native_console._BEFORE_PIPE, write_end, gone_w)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        with straight_to_console(write_end):
            pass
    assert set(os.listdir("/proc/self/fd")) == before
    os.close(read_end), os.close(write_end)
