"""A folder of runs holding one subfolder this user may not enter (another user's 0700 run, lost+found).

Was (a review of the merged work): ``find_checkpoint``'s scan for the runs below the folder let ``Path.is_dir``'s
``PermissionError`` out, naming ``<that subfolder>/checkpoints``, a path never passed, where it had said "no checkpoint
... pass a run dir". Now such a subfolder holds no run to name: the other runs are named as before.
"""

import os

import jax
import pytest
from flax import nnx

from gensbi_sharding import checkpoint_steps
from gensbi_sharding.checkpoint import CheckpointWriter, find_checkpoint


def test_a_subfolder_the_user_cannot_enter_is_skipped(tmp_path, monkeypatch):
    run, closed = tmp_path / "outputs" / "run", tmp_path / "outputs" / "theirs"
    with CheckpointWriter(run / "checkpoints", every=1) as writer:
        writer.save(4, nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0))), jax.random.key(0))
    closed.mkdir()
    real = checkpoint_steps.committed_steps

    def committed_steps(folder, *args, **kwargs):  # as stat() of a 0700 folder of another user answers (root is not)
        if os.fspath(folder).startswith(os.fspath(closed)):
            raise PermissionError(13, "Permission denied", os.fspath(folder))
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(checkpoint_steps, "committed_steps", committed_steps)
    with pytest.raises(FileNotFoundError, match=rf"it holds 1 run folder\(s\) with a checkpoint, the newest first: "
                                                rf"{run}: pass one of them, e.g. {run}$"):
        find_checkpoint(tmp_path / "outputs")
