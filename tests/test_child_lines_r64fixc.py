"""distributed=local: the parent's own console lines start lines of their own after a child's open line."""

from __future__ import annotations

import logging
import os
import select

from gensbi_sharding.harness.local_children import ChildOutput

CHILD = (b"[WARNING] received Ctrl-C: stopping at the next step boundary, after a checkpoint "
         b"(Ctrl-C again stops at once)")


def _read_until(fd: int, wanted: bytes, got: bytes = b"") -> bytes:
    while wanted not in got:  # bounded: a pump that never passes it on fails the test, not hangs it
        assert select.select([fd], [], [], 10)[0], f"nothing more on the console after {got!r}"
        got += os.read(fd, 65536)
    return got


def test_the_parents_ctrl_c_warning_starts_its_own_line_after_a_childs_line_written_in_two_pieces(tmp_path):
    # A child's line written as tqdm.write writes it (the text, then its newline apart), the parent's warning landing
    # between the two: was "... (Ctrl-C again stops at once)[WARNING] received Ctrl-C: ..." on one line.
    console_r, console_w = os.pipe()
    child_r, child_w = os.pipe()
    stream = os.fdopen(os.dup(console_w), "w", buffering=1)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger = logging.getLogger("gensbi_sharding")
    was = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        output = ChildOutput(tmp_path, console=console_w)
        output.follow(0, os.fdopen(child_r, "rb"))
        os.write(child_w, CHILD)
        got = _read_until(console_r, CHILD)  # on the console, its newline not yet written
        with output.own_lines():
            logging.getLogger("gensbi_sharding.harness.preemption").warning("received Ctrl-C: stopping the processes")
        os.write(child_w, b"\n[INFO] saved step 3\n")  # the child's newline, then its next line
        os.close(child_w)
        output.join()
        got = _read_until(console_r, b"saved step 3\n", got)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(was)
        stream.close()
        os.close(console_w)
        os.close(console_r)
    assert got.decode().split("\n") == [CHILD.decode(), "[WARNING] received Ctrl-C: stopping the processes",
                                        "[INFO] saved step 3", ""]
