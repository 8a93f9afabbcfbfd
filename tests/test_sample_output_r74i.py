"""sample.py --out near a ``checkpoints/`` folder: refused only where it is one of our runs' (BREAK74's check).

Another Hydra app's output folder (its ``.hydra`` record, its own ``checkpoints/``: the Lightning-Hydra template's)
was refused as "a run's checkpoint folder: a continued run deletes its older steps ... (train.keep)", which no run of
ours does there; a link into a run's ``checkpoints/`` was written through.
"""

from gensbi_sharding.harness.sample_output import out_path, output_problem


def _app(tmp_path, config):
    (folder := tmp_path / "app").mkdir()
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text(config)
    (folder / "checkpoints").mkdir()
    return folder


def test_another_hydra_apps_checkpoints_folder_is_written(tmp_path):
    given = str(_app(tmp_path, "model:\n  lr: 0.1\ntrainer:\n  max_epochs: 3\n") / "checkpoints") + "/"
    assert output_problem(out_path(given, tmp_path / "x_o.npy"), given) is None


def test_a_run_of_ours_recorded_by_hydra_alone_is_still_refused(tmp_path):
    run = _app(tmp_path, "mesh: {}\nrule: {}\ntrain: {steps: 20}\n")  # killed before its metrics.json
    given = str(run / "checkpoints") + "/"
    problem = output_problem(out_path(given, tmp_path / "x_o.npy"), given)
    assert problem is not None and f"pass --out {run / 'x_o_posterior.npz'} " in problem


def test_a_link_into_a_runs_checkpoints_folder_is_refused(tmp_path):
    (run := tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / ".run.lock").touch()
    (tmp_path / "samples").symlink_to(run)
    given = str(tmp_path / "samples") + "/"
    problem = output_problem(out_path(given, tmp_path / "x_o.npy"), given)
    assert problem is not None and "checkpoint folder" in problem
    assert f"pass --out {tmp_path / 'run' / 'x_o_posterior.npz'} " in problem


def test_a_link_to_an_ordinary_folder_is_written(tmp_path):
    (mine := tmp_path / "mine").mkdir()
    (tmp_path / "link").symlink_to(mine)
    for given in (str(tmp_path / "link"), str(tmp_path / "link") + "/", str(tmp_path / "link" / "s.npz")):
        out = out_path(given, tmp_path / "x_o.npy")
        assert out.parent == tmp_path / "link" and output_problem(out, given) is None
