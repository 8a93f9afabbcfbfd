"""The sweep summary's error cell of a stopped job, after ``mv`` of the sweep folder, names the folder as it is now
(FIX77 2).

Was: the table showed a recorded error verbatim where it fit ``ERROR_CELL`` characters, so its "continue with: ...
hydra.run.dir=<folder it ran in>" named the old folder (gone), where the sweep's notes already named the current one
(``moved_folder.continue_in``). The CSV and metrics.json keep the error as recorded.
"""

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from gensbi_sharding.harness.continue_field import CONTINUE_FIELD
from gensbi_sharding.harness.override_grammar import hydra_override
from gensbi_sharding.harness.summary_columns import ERROR_CELL, ERROR_COLUMN, error_cell
from gensbi_sharding.harness.sweep_rows import summary_rows


def _sweep(root, command_of):
    """``root/s``: job 0 finished, job 1 interrupted at step 40 with the continue command ``command_of(job folder)``."""
    (root / "s" / "0").mkdir(parents=True)
    (root / "s" / "0" / "metrics.json").write_text(json.dumps({"status": "ok", "c2st": 0.9}))
    (root / "s" / "1").mkdir()
    command = command_of("s/1")
    (root / "s" / "1" / "metrics.json").write_text(json.dumps(
        {"status": "interrupted", "stopped_at_step": 40, CONTINUE_FIELD: command,
         "error": f"stopped at step 40; continue with: {command}"}))
    return root / "s"


def _short(folder):
    return f"python launch.py train.resume=auto {hydra_override('hydra.run.dir', folder)}"


@pytest.fixture
def short_folder():
    """A folder of a short absolute path: the moved job's command then fits the table's cell whole."""
    folder = tempfile.mkdtemp(prefix="r77e", dir="/tmp")
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_short_error_cell_names_the_moved_folder(tmp_path, monkeypatch, short_folder):
    monkeypatch.chdir(tmp_path)  # a relative folder keeps the recorded error under ERROR_CELL characters
    _sweep(tmp_path, _short)
    # not moved: as recorded
    assert error_cell(summary_rows(tmp_path / "s")[1]["metrics"]).endswith("hydra.run.dir=s/1")
    shutil.move(tmp_path / "s", short_folder / "t")
    row = summary_rows(short_folder / "t")[1]
    cell, now = error_cell(row["metrics"]), _short(short_folder / "t" / "1")
    assert cell == f"stopped at step 40; continue with: {now}", cell  # was: ...hydra.run.dir=s/1, the old folder
    assert ERROR_COLUMN.exact(row["metrics"]).endswith("hydra.run.dir=s/1")  # the CSV's: as recorded
    assert json.loads((short_folder / "t" / "1" / "metrics.json").read_text())[CONTINUE_FIELD] == _short("s/1")  # kept


def test_a_cut_error_cell_still_names_no_cut_command_once_moved(tmp_path):
    def long(folder):
        return f"python launch.py model.width=32 train.steps=2000 train.resume=auto " \
               f"{hydra_override('hydra.run.dir', tmp_path / folder)}"

    _sweep(tmp_path, long)
    assert len(long("s/1")) > ERROR_CELL
    shutil.move(tmp_path / "s", tmp_path / "t")
    cell = error_cell(summary_rows(tmp_path / "t")[1]["metrics"])
    assert cell == "stopped at step 40; continue with: the command in its metrics.json", cell


@pytest.mark.slow  # write_summary draws the sweep plot
def test_the_written_table_of_a_moved_sweep_names_no_old_folder(tmp_path, monkeypatch, short_folder):
    from gensbi_sharding.harness.summary import write_summary

    monkeypatch.chdir(tmp_path)
    _sweep(tmp_path, _short)
    shutil.move(tmp_path / "s", short_folder / "t")
    summary = write_summary(short_folder / "t")
    table = summary.md_path.read_text()
    assert "hydra.run.dir=s/1" not in table and _short(short_folder / "t" / "1") in table, table
