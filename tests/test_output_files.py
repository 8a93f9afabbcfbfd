"""Result files as the disk holds them: the mode the umask gives, on disk before their name is."""

import os

import numpy as np
import pytest

from gensbi_sharding.harness import folder_lock, outputs


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_result_files_get_the_mode_the_umask_gives(tmp_path, umask):
    from gensbi_sharding.harness.evaluate import pair_plot

    old = os.umask(umask)
    try:
        outputs.write_atomic(tmp_path / "sharding.txt", "a: P()\n")
        outputs.write_json(tmp_path / "metrics.json", {"status": "ok"})
        outputs.write_npz(tmp_path / "train_losses.npz", losses=np.zeros(3))
        pair_plot(np.zeros((20, 2)), np.ones((20, 2)), tmp_path / "posterior.png")
        with folder_lock.FolderLock(tmp_path):
            pass
    finally:
        os.umask(old)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()}
    assert modes == {name: oct(0o666 & ~umask) for name in
                     ("sharding.txt", "metrics.json", "train_losses.npz", "posterior.png", ".run.lock")}


def test_a_file_is_on_disk_before_its_name_is(tmp_path, monkeypatch):
    # Was: renamed without fsync: after a machine crash the new name could hold a zero-length or cut-off file
    # (a half-written metrics.json, c2st.csv or table), though no process ever saw one.
    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.fstat(fd).st_size)) or fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", os.path.basename(b))) or replace(a, b))
    outputs.write_atomic(tmp_path / "sbibm_table.md", "| task |\n")
    assert events == [("fsync", 9), ("replace", "sbibm_table.md")]
    assert (tmp_path / "sbibm_table.md").read_text() == "| task |\n" and len(list(tmp_path.iterdir())) == 1
