"""hydra.run.dir=<another Hydra app's output folder>: its files a run writes over are refused, naming them.

Its ``.hydra/`` read as the mark of a run of this harness, so the folder's own ``losses.png`` (and
``train_losses.npz``) were overwritten without a word.
"""

from gensbi_sharding.harness.folder_lock import folder_problem


def _folder(tmp_path, config: str):
    (folder := tmp_path / "outputs").mkdir()
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text(config)
    (folder / "losses.png").write_bytes(b"their plot")
    return folder


def test_another_hydra_apps_folder_is_refused_naming_the_file(tmp_path):
    folder = _folder(tmp_path, "model:\n  lr: 0.1\ntrainer:\n  max_epochs: 3\n")
    assert folder_problem(folder, sweep=False) == (
        f"hydra.run.dir={folder} holds losses.png, not written by a run, which it would overwrite; choose another "
        "hydra.run.dir (a new or empty folder), or move them out")


def test_a_folder_a_run_of_ours_recorded_is_still_taken_as_one(tmp_path):
    assert folder_problem(_folder(tmp_path, "mesh: {}\nrule: {}\ntrain: {steps: 20}\n"), sweep=False) is None


def test_an_unreadable_record_is_taken_as_ours_as_before(tmp_path):
    # a run stopped while Hydra wrote it: never refused for that
    assert folder_problem(_folder(tmp_path, "mesh: [unclosed\n"), sweep=False) is None
