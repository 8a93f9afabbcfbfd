"""``train.resume=<sweep folder>`` and ``sample.py <sweep folder>`` with a job killed (SIGKILL, out of memory): its
checkpoints hold its work and Hydra's record in its folder its command, but it wrote no ``metrics.json``.

Was (FIX74's note, review of da9f57a5): "the lowest C2ST, 0.912: <sweep>/0 (jobs with a checkpoint: 0, 1)", job 1
listed with no word that it never finished: only a job that recorded its stop was named, with its command. Now the
killed job is named too, with the command that continues it in its own folder, as ``unfinished_note`` names it for a
killed run (``unfinished_run.recorded_command``); a job still training (its folder's lock held) is not said stopped.
"""

import json
import shlex

from gensbi_sharding.harness.best_job import best_note


def _sweep(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "0" / "metrics.json").write_text(json.dumps({"status": "ok", "data": "two_moons", "c2st": 0.912}))
    (sweep / "1" / ".hydra").mkdir(parents=True)  # killed: Hydra's record, no metrics.json
    (sweep / "1" / ".hydra" / "overrides.yaml").write_text("- rule=fsdp\n- train.steps=2000\n")
    (sweep / "multirun.yaml").write_text("")
    return sweep


def test_a_killed_job_is_named_with_the_command_hydra_recorded(tmp_path):
    sweep = _sweep(tmp_path)
    note = best_note([sweep / "0", sweep / "1"])
    head, _, command = note.partition("; job 1 left no record of its end (killed?): to continue it in its own folder: ")
    assert head == (f"the lowest C2ST, 0.912: {sweep / '0'} (jobs with a checkpoint: 0, 1); that job is the best of "
                    "the finished ones, named by the sweep's own scores"), note
    # a sweep's job: hydra.mode=RUN, as a stopped sweep job's own command has it
    assert shlex.split(command)[-5:] == ["rule=fsdp", "train.steps=2000", "train.resume=auto", "hydra.mode=RUN",
                                         f"hydra.run.dir={sweep / '1'}"], command


def test_a_job_without_hydras_record_is_left_as_before(tmp_path):
    sweep = _sweep(tmp_path)
    (sweep / "1" / ".hydra" / "overrides.yaml").unlink()  # no command to offer: nothing said of it
    assert best_note([sweep / "0", sweep / "1"]) == (f"the lowest C2ST, 0.912: {sweep / '0'} (jobs with a checkpoint: "
                                                     "0, 1)")
