"""Review of FIX75's ``folder_lock._is_run_folder`` (another Hydra app's output folder is no run of ours).

The change let a run write below another app's run folder (``<app>/outputs/<date>/<time>/ours``), as meant; but
``runs_under`` asks the same function, so ``hydra.run.dir=<app>/outputs`` (or ``hydra.sweep.dir=``) was no longer
refused "holds the folders of other runs": our run's metrics.json, launch.log and checkpoints/ (a sweep's 0/, 1/,
multirun.yaml) went among the app's ``<date>/<time>`` folders. And ``runs_under`` parsed every run's
``.hydra/config.yaml`` it met: 500 run folders took 6.5 s where they took 0.14 s (the refusal of
``hydra.run.dir=outputs``; up to 2000 folders are looked at).
"""

from gensbi_sharding.harness import folder_lock
from gensbi_sharding.harness.folder_lock import folder_problem, run_folder_holding, runs_under
from gensbi_sharding.harness.sweep_subdirs import foreign_runs_problem

LIGHTNING = "train: true\ntrainer:\n  max_epochs: 3\n"  # the Lightning-Hydra template's record


def _run(folder, config):
    """A run folder: Hydra's record ``config`` (None: no config.yaml), a launch.log and checkpoints/."""
    (folder / ".hydra").mkdir(parents=True)
    if config is not None:
        (folder / ".hydra" / "config.yaml").write_text(config)
    (folder / "launch.log").write_text("[INFO] step 0\n")
    (folder / "checkpoints").mkdir()
    return folder


def test_a_run_or_sweep_at_the_top_of_another_apps_outputs_is_still_refused(tmp_path):
    outputs = tmp_path / "app" / "outputs"
    _run(outputs / "2026-12-07" / "13-04-17", LIGHTNING)
    assert runs_under(outputs) == ["2026-12-07/13-04-17"]
    refused = folder_problem(outputs, sweep=False)
    assert refused is not None and "holds the folders of other runs (2026-12-07/13-04-17)" in refused
    swept = foreign_runs_problem(outputs, ["0", "1"])
    assert swept is not None and "holds the folders of other runs (2026-12-07/13-04-17)" in swept
    # below that app's run folder: a folder of ours to use (FIX75's item 1, kept)
    assert folder_problem(outputs / "2026-12-07" / "13-04-17" / "ours", sweep=False) is None


def test_runs_under_reads_no_runs_record(tmp_path, monkeypatch):
    read = []
    monkeypatch.setattr(folder_lock, "another_apps_record", lambda record: read.append(record) or False)
    for k in range(3):
        _run(tmp_path / "outputs" / "2026-12-07" / f"t{k}", "mesh: {}\n")
    assert runs_under(tmp_path / "outputs") == [f"2026-12-07/t{k}" for k in range(3)]
    assert read == []


def test_a_folder_inside_our_run_with_a_damaged_record_is_still_refused(tmp_path):
    # held: an unreadable, empty, cut or missing config.yaml is ours (another_apps_record: False), so refused
    for name, config in [("garbage", "mesh: [\n  : :"), ("empty", ""), ("cut", "mesh:\n  spec: dict\n  model_"),
                         ("none", None), ("binary", "\udcff")]:
        run = tmp_path / name
        _run(run, None)
        if config is not None:
            (run / ".hydra" / "config.yaml").write_bytes(config.encode("utf-8", "surrogateescape"))
        assert run_folder_holding(run / "ours") == run, name
        assert f"lies inside the folder of the run {run}" in folder_problem(run / "ours", sweep=False), name
