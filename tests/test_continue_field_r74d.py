"""The command that continues a stopped run travels as a value of its own (``metrics.json``'s ``continue_with``), and a
killed run's warning names one too.

- REVIEW73D #5: sample.py's warnings and the sweep table cut the command out of ``metrics["error"]`` at
  "continue with: ": a stop worded otherwise ("continue this process with: ...", a rewording) lost its command without
  an error. The writers now set ``continue_with``; the readers read it.
- FIX74 #3: a run killed by SIGKILL (no metrics.json) was told "continue it with train.resume=auto hydra.run.dir=<run>
  and the run's own overrides", not a command to paste, though Hydra's record of them is in its folder.
"""

import json
import shlex

from gensbi_sharding.harness.continue_field import CONTINUE_FIELD, continue_of
from gensbi_sharding.harness.sampled_checkpoint import no_checkpoint
from gensbi_sharding.harness.stop_record import record_failure_outcome, record_resume_point
from gensbi_sharding.harness.summary_columns import ERROR_CELL, error_cell
from gensbi_sharding.harness.unfinished_run import unfinished_note

COMMAND = "python launch.py rule=fsdp train.steps=2000 train.resume=auto hydra.run.dir=/x/run"
# Worded without the "continue with: " the readers used to cut at
REWORDED = f"interrupted by Ctrl-C (SIGINT) at step 8; to pick it up again run {COMMAND}"


def _command(run):
    """``COMMAND`` as the run in ``run`` records it: naming that folder (the made-up /x/run reads as a folder moved
    since, and is said as the run's folder now: tests/test_moved_folder_r76g.py)."""
    return COMMAND.replace("/x/run", str(run))


def _run(tmp_path, record=None, overrides=None):
    """A run folder with a step folder 8 (its name only: the warnings read no weights)."""
    run = tmp_path / "run"
    (run / "checkpoints" / "8").mkdir(parents=True)
    if record is not None:
        (run / "metrics.json").write_text(json.dumps(record))
    if overrides is not None:
        (run / ".hydra").mkdir()
        (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    return run


def test_the_unfinished_run_warning_reads_the_recorded_command(tmp_path):
    command = _command(tmp_path / "run")
    run = _run(tmp_path, {"status": "interrupted", "error": REWORDED.replace(COMMAND, command),
                          CONTINUE_FIELD: command})
    note = unfinished_note(run / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert note.endswith(f"; to finish it: {command}, then sample again")


def test_the_no_checkpoint_refusal_reads_the_recorded_command(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    command = _command(run)
    (run / "metrics.json").write_text(json.dumps({"status": "preempted", "error": REWORDED.replace(COMMAND, command),
                                                  CONTINUE_FIELD: command}))
    refusal = no_checkpoint(run, run, FileNotFoundError("no checkpoint"))
    assert f"its run was stopped (preempted) before its first checkpoint; continue it, {command}, and sample" in str(
        refusal)


def test_the_sweep_table_cuts_before_the_recorded_command_however_the_error_words_it():
    error = "interrupted by Ctrl-C at step 40 (checkpoint saved); continue this process with: " + COMMAND + " x" * 60
    command = COMMAND + " x" * 60
    cell = error_cell({"error": error, CONTINUE_FIELD: command})
    assert cell == ("interrupted by Ctrl-C at step 40 (checkpoint saved); continue this process with: the command in "
                    "its metrics.json")
    long_reason = "E" * 200 + "; continue with: " + command
    assert error_cell({"error": long_reason, CONTINUE_FIELD: command}) == (
        "E" * (ERROR_CELL - 3) + "...; continue with: the command in its metrics.json")


def test_a_record_without_the_field_is_read_as_older_versions_wrote_it():
    assert continue_of({"error": f"stopped; continue with: {COMMAND}"}) == COMMAND
    assert continue_of({"error": "ValueError: x", CONTINUE_FIELD: None}) == ""


def test_a_stop_at_once_records_its_command_only_beside_a_checkpoint(tmp_path, monkeypatch):
    import gensbi_sharding.checkpoint_steps as steps

    metrics = {}
    assert record_resume_point(metrics, tmp_path) is None and metrics[CONTINUE_FIELD] is None
    monkeypatch.setattr(steps, "committed_steps", lambda folder: [30])  # Orbax's commit, not rebuilt here
    metrics = {}
    assert record_resume_point(metrics, tmp_path) == 30
    assert "train.resume='auto'" in metrics[CONTINUE_FIELD] and str(tmp_path) in metrics[CONTINUE_FIELD]


def test_a_failure_after_a_checkpoint_records_the_command_its_error_words(tmp_path):
    (tmp_path / "checkpoints" / "5").mkdir(parents=True)
    metrics = {}
    error = record_failure_outcome(metrics, tmp_path, [], ValueError("evaluation broke"))
    assert metrics[CONTINUE_FIELD] and error.endswith(metrics[CONTINUE_FIELD]) and str(tmp_path) in error
    metrics = {}
    record_failure_outcome(metrics, tmp_path, [5], ValueError("again"))  # an earlier attempt's checkpoint: none named
    assert metrics == {"error": "ValueError: again", CONTINUE_FIELD: None}


def test_a_killed_run_is_told_the_command_hydra_recorded(tmp_path):
    run = _run(tmp_path, overrides=["rule=fsdp", "train.steps=2000"])
    note = unfinished_note(run / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert "left no record of its end (no metrics.json" in note
    fix = note.rpartition("; to finish it: ")[2]
    assert fix.endswith(", then sample again")
    words = shlex.split(fix.removesuffix(", then sample again"))
    assert words[-4:] == ["rule=fsdp", "train.steps=2000", "train.resume=auto", f"hydra.run.dir={run}"], words


def test_a_killed_run_without_hydras_record_is_told_the_overrides_to_add(tmp_path):
    run = _run(tmp_path)
    note = unfinished_note(run / "checkpoints" / "8", {"train": {"steps": 2000}})
    assert note.endswith(f"; to finish it, continue it with train.resume=auto hydra.run.dir={run} and the run's own "
                         "overrides")
