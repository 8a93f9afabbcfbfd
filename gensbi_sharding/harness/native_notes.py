"""Words the console's line for an XLA warning ends with, where the run itself said what causes it.

A job's first XLA warning gets one console line (``native_console.native_output_to_log``). Flux1 under ``rule=fsdp
mesh.model_axis=2`` gets the SPMD partitioner's "Involuntary full rematerialization" in its backward pass, caused by
the idle model axis (``mesh.model_axis=1`` and ``rule=tensor`` give none). The idle axis's hint is said before the step
compiles, so it cannot know whether XLA will warn (``model=mlp`` there: no warning); the warning's line names the hint
instead, so the user can tie the two. Pure Python: no JAX.
"""

from __future__ import annotations

__all__ = ["NOTES", "REMAT", "IDLE_AXIS_NOTE", "idle_axis_said", "note_for"]

#: The words a warning holding the key (bytes of its line) gets, for this job; cleared as a job's output is taken.
NOTES: dict[bytes, str] = {}
REMAT = b"Involuntary full rematerialization"
IDLE_AXIS_NOTE = "; the idle model axis said above causes these: mesh.model_axis=1 also removes them"


def idle_axis_said(hint: str | None) -> str | None:
    """``hint``, the idle model axis's (``placement_hints.idle_model_axis_hint``), as it is said: XLA's
    rematerialization warnings after it name it. None: nothing said, nothing noted."""
    if hint:
        NOTES[REMAT] = IDLE_AXIS_NOTE
    return hint


def note_for(line: bytes) -> str:
    """The words the warning ``line`` gets: "" where the run said nothing of its cause."""
    return next((note for key, note in NOTES.items() if key in line), "")
