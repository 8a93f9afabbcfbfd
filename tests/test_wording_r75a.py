"""Session 74's wording leftovers (FIX74B, REVIEWB74 "left").

4. A sweep-folder refusal named a failed job "stopped before finishing (status error)": the sweep table calls it
   "failed" (``plots.status_word``), and so does the refusal now.
5. A dry run failing on a full disk worded the command that runs it again only inside its error; ``continue_with`` was
   null, where every other writer sets the command its error words (``continue_field``).
6. Docstrings named ``harness.train.make_step_functions``, which lives in ``step_functions``.
"""

import ast
import errno
import json
import os
import re
from pathlib import Path

from gensbi_sharding.harness.best_job import best_note
from gensbi_sharding.harness.continue_field import CONTINUE_FIELD, continue_of
from gensbi_sharding.harness.stop_record import record_failure_outcome

def _command(job):
    """The continue command job ``job``'s run recorded: in its own folder (a made-up one, /x/sweep/1, now reads as a
    folder moved since, and is said as the job's folder now: tests/test_moved_folder_r76g.py)."""
    return f"python launch.py rule=tensor train.resume=auto hydra.mode=RUN hydra.run.dir={job}"


def _job(folder, record):
    (folder / "checkpoints" / "40").mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(record))


def test_a_failed_job_is_called_failed_in_a_sweep_folders_refusal(tmp_path):
    sweep = tmp_path / "sweep"
    command = _command(sweep / "1")
    _job(sweep / "0", {"status": "ok", "data": "two_moons", "c2st": 0.912})
    _job(sweep / "1", {"status": "error", "data": "two_moons", "stopped_at_step": 40, "continue_with": command,
                       "error": f"OSError: [Errno 28] No space left on device; once that is fixed, continue with: "
                                f"{command}"})
    note = best_note([sweep / "0", sweep / "1"])
    assert note.endswith(f"; job 1 failed at step 40 (its error in {sweep / '1' / 'metrics.json'}): once that is "
                         f"fixed, to continue it in its own folder: {command}"), note
    assert "stopped before finishing" not in note and "status error" not in note


def test_a_stopped_job_keeps_its_words(tmp_path):
    sweep = tmp_path / "sweep"
    command = _command(sweep / "0")
    _job(sweep / "0", {"status": "interrupted", "stopped_at_step": 40, "continue_with": command, "error": "Ctrl-C"})
    assert best_note([sweep / "0"]).endswith(f"; job 0 stopped before finishing (status interrupted at step 40): to "
                                             f"continue it in its own folder: {command}")


def test_a_dry_run_failing_on_a_full_disk_records_the_command_its_error_words(tmp_path):
    (out := tmp_path / "run").mkdir()
    again = f"run(cfg) again with cfg.output_dir={str(tmp_path / 'run-again')!r} set in omegaconf.open_dict(cfg)"
    for where in (out / "sharding.txt", None):  # a file the disk refused (output_refused_error), or none named
        metrics = {"status": "error"}
        full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([str(where)] if where else []))
        error = record_failure_outcome(metrics, out, [], full, dry_run=True)
        assert metrics[CONTINUE_FIELD] == again and error.endswith(f"run it again with: {again}"), metrics
        assert continue_of(metrics) == again
    metrics = {"status": "error"}  # a dry run that failed otherwise offers no command, as before
    record_failure_outcome(metrics, out, [], ValueError("bad shapes"), dry_run=True)
    assert metrics[CONTINUE_FIELD] is None


def test_docstrings_name_make_step_functions_where_it_lives():
    # train re-exports it (step_functions' own docstring says so); another module's docstring names its home
    from gensbi_sharding import harness as package

    harness = Path(package.__file__).parent
    wrong, paths = [], sorted(harness.glob("*.py"))
    assert len(paths) > 100  # the harness read, not a folder without it
    for path in paths:
        if path.name == "step_functions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and (doc := ast.get_docstring(node)):
                wrong += [f"{path.name}: {m}" for m in re.findall(r"[\w.]*train\.make_step_functions", doc)]
    assert wrong == []
