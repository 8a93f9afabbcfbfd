"""A sweep's folder deleted or moved while the sweep went on: its last line says so.

Its finished jobs' folders went with it, so the table read from the folder the later jobs made anew counted them
"not run" and the sweep ended "sweep stopped: 1 ok, 0 failed, 1 not run", though every job ran.
"""

import json
import re
import shutil

from omegaconf import OmegaConf

from gensbi_sharding.harness.folder_gone import holds_lock, sweep_gone_note
from gensbi_sharding.harness.summary import SweepSummary


def make_job(sweep, job, rule):
    (sweep / str(job) / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(["experiment=quick", f"rule={rule}"]),
                   sweep / str(job) / ".hydra" / "overrides.yaml")
    (sweep / str(job) / "metrics.json").write_text(json.dumps(
        {"status": "ok", "config": {"dry_run": False, "train": {"steps": 20}}, "mesh_shape": [8, 1], "c2st": 0.97,
         "c2st_sd_folds": 0.017, "wall_s": 3.3}))


def sweep_config(sweep):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                       "overrides": {"task": ["experiment=quick", "rule=fsdp,tensor"]}}})


def test_a_sweep_folder_moved_mid_sweep_is_said_on_its_last_line(tmp_path, capsys, monkeypatch):
    from gensbi_sharding.harness import plots

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)
    (sweep := tmp_path / "sweep").mkdir()
    (sweep / ".run.lock").touch()  # claimed by folder_claim's callback, listed before this one
    config = sweep_config(sweep)
    callback = SweepSummary()
    callback.on_multirun_start(config)
    make_job(sweep, 0, "fsdp")
    shutil.move(sweep, tmp_path / "better_name")  # mv mid-sweep: job 0's folder goes with it
    make_job(sweep, 1, "tensor")  # the next job makes the folder anew
    callback.on_multirun_end(config)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.match(rf"sweep stopped after [\d.]+ (ms|s): 1 ok, 0 failed, 1 not run; sweep_summary.csv/.md/.png in "
                    rf"{re.escape(str(sweep))}; but {re.escape(str(sweep))} was deleted or moved while the sweep went "
                    r"on \(its \.run\.lock is gone\)", last), last
    assert "a job counted not run may have run" in last


def test_a_sweep_folder_still_claimed_or_never_claimed_adds_nothing(tmp_path, capsys, monkeypatch):
    from gensbi_sharding.harness import plots

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)
    for claimed in (True, False):
        (sweep := tmp_path / str(claimed)).mkdir()
        if claimed:
            (sweep / ".run.lock").touch()
        make_job(sweep, 0, "fsdp")
        make_job(sweep, 1, "tensor")
        (callback := SweepSummary()).on_multirun_start(sweep_config(sweep))
        callback.on_multirun_end(sweep_config(sweep))
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert last.endswith(f"2 ok, 0 failed; sweep_summary.csv/.md/.png in {sweep}"), last


def test_the_note_alone(tmp_path):
    (sweep := tmp_path / "sweep").mkdir()
    assert not holds_lock(sweep) and sweep_gone_note(sweep, False) == ""  # never claimed here: nothing said
    assert "no longer" not in (note := sweep_gone_note(sweep, True)) and f"; but {sweep} was deleted or moved" in note
    (sweep / ".run.lock").touch()
    assert holds_lock(sweep) and sweep_gone_note(sweep, True) == ""


def test_a_run_refused_before_its_claim_is_not_said_to_have_lost_its_folder(tmp_path):
    # launch.py distributed=auto on a machine with no cluster: refused at [1/7], before run_steps claims the folder
    # (the Hydra callback leaves that claim to process 0, known only once JAX has joined). Its folder holds Hydra's
    # .hydra/ and launch.log, no .run.lock: was "error after 9.5 s; but <folder> was deleted or moved while the run
    # went on (its .run.lock is gone) ...", though nothing had touched it.
    from gensbi_sharding.harness.folder_gone import gone_note

    (tmp_path / ".hydra").mkdir()
    (tmp_path / "launch.log").write_text("[1/7] devices: cpu_count=8 (from default), distributed=auto\n")
    assert gone_note(tmp_path, {"status": "error", "error": "distributed=auto found no cluster", "wall_s": 9.5}) == ""
