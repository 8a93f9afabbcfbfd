"""Process 0's refusal of the job's folder, told to the other processes, reads the same on each."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from jax.experimental import multihost_utils

from gensbi_sharding.harness import run_folder
from gensbi_sharding.harness.stop_record import exception_text


class _Refusing:
    owner, claimed, told = True, False, False

    def claim(self):
        raise PermissionError(13, "Permission denied", "/runs/x/.run.lock")


def test_a_permission_error_on_process_0_is_raised_as_one_on_the_others(monkeypatch):
    # Was: every kind but FileExistsError/FolderInUseError came back as ConfigError on the others: process 0 ended
    # 'PermissionError: [Errno 13] ...', the others '[Errno 13] ...' as a refusal of the user's input
    sent = []
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", lambda words: sent.append(np.copy(words)) or words)
    with pytest.raises(PermissionError) as on_0:
        run_folder.claim_together(_Refusing(), SimpleNamespace(last_check_id=4))
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", lambda words: sent[0])  # process 1 gets 0's words
    other = SimpleNamespace(owner=False, claimed=False, told=False)
    watch = SimpleNamespace(last_check_id=0)
    with pytest.raises(Exception) as on_1:
        run_folder.claim_together(other, watch)
    assert type(on_1.value) is PermissionError and watch.last_check_id == 4
    assert exception_text(on_1.value) == exception_text(on_0.value) == (
        "PermissionError: [Errno 13] Permission denied: '/runs/x/.run.lock'")


@pytest.mark.parametrize("kind", ["ConfigError", "FolderInUseError", "FileExistsError", "OSError", "OrbaxError"])
def test_each_kind_told_is_raised_with_its_own_name(kind):
    err = run_folder.told_refusal(kind, "the words")
    assert (type(err).__name__, str(err), isinstance(err, Exception)) == (kind, "the words", True)
