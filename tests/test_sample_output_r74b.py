"""sample.py's output inside a run's checkpoint folder: refused before sampling, naming the run's own folder.

A file there (``--out <run>/checkpoints/20/``, accepted as "a folder: that file in it") was written, then deleted
without a word with its step when the run was continued (``train.resume=auto``) and saved newer steps (``train.keep``).
"""

from pathlib import Path

import pytest

from gensbi_sharding.harness.sample_output import out_path, output_problem


def _run(tmp_path: Path) -> Path:
    """A finished run's folder: its metrics.json and one Orbax step folder."""
    run = tmp_path / "run"
    (run / "checkpoints" / "20").mkdir(parents=True)
    (run / "metrics.json").write_text("{}")
    (run / "checkpoints" / "20" / "_CHECKPOINT_METADATA").write_text("{}")
    return run


@pytest.mark.parametrize("typed", ["checkpoints/20/", "checkpoints/20/mine.npz", "checkpoints/", "checkpoints/a.npz"])
def test_output_in_a_runs_checkpoint_folder_is_refused_naming_the_run_folder(tmp_path, typed):
    run = _run(tmp_path)
    given = str(run / typed)
    out = out_path(given, tmp_path / "x_o.npy")
    problem = output_problem(out, given)
    assert problem is not None and "checkpoint folder" in problem and "train.keep" in problem
    assert f"pass --out {run / out.name} " in problem


def test_the_suggested_name_in_the_run_folder_is_a_free_one(tmp_path):
    run = _run(tmp_path)
    (run / "x_o_posterior.npz").write_bytes(b"earlier samples")
    given = str(run / "checkpoints" / "20") + "/"
    problem = output_problem(out_path(given, tmp_path / "x_o.npy"), given)
    assert f"pass --out {run / 'x_o_posterior_2.npz'} " in problem


def test_a_folder_named_checkpoints_of_no_run_is_written(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    given = str(tmp_path / "checkpoints" / "mine.npz")
    assert output_problem(out_path(given, tmp_path / "x_o.npy"), given) is None
    assert output_problem(out_path(str(_run(tmp_path) / "mine.npz"), tmp_path / "x_o.npy"), None) is None


def test_a_link_to_no_file_is_refused_before_sampling_naming_a_free_name(tmp_path):
    # Was accepted (Path.exists() follows the link), then refused after the whole draw as "created while sampling
    # (another sample.py?)", which it was not.
    (tmp_path / "mine.npz").symlink_to(tmp_path / "nowhere" / "x.npz")
    (tmp_path / "mine_2.npz").symlink_to(tmp_path / "gone.npz")  # a link to no file: no free name either
    problem = output_problem(tmp_path / "mine.npz", str(tmp_path / "mine.npz"))
    assert problem == (f"{tmp_path / 'mine.npz'} is a link to {tmp_path / 'nowhere' / 'x.npz'}, which does not exist; "
                       f"a link is never written through: pass --out {tmp_path / 'mine_3.npz'} (or another new file)")
