"""``outputs.write_atomic(exclusive=True)`` on a file system without hard links (vfat, some FUSE or SMB mounts).

It put the file in place with ``os.link``, which raises EPERM or ENOTSUP there: sample.py drew every sample, then
said "cannot write <out> (Operation not permitted)" and wrote nothing. Now the name is taken by an exclusive create
and the written file renamed over it: written once, an existing file never overwritten.
"""

import errno
import os

import numpy as np
import pytest

from gensbi_sharding.harness import outputs


@pytest.fixture(params=[errno.EPERM, errno.ENOTSUP, errno.EXDEV])
def no_hard_links(request, monkeypatch):
    def refused(src, dst, *args, **kwargs):
        raise OSError(request.param, os.strerror(request.param), str(src), None, str(dst))

    monkeypatch.setattr(os, "link", refused)


def test_the_file_is_written_whole_and_no_temp_file_is_left(tmp_path, no_hard_links):
    out = outputs.write_npz(tmp_path / "x_o_posterior.npz", exclusive=True, samples=np.arange(6.0).reshape(3, 2))
    assert out == tmp_path / "x_o_posterior.npz"
    np.testing.assert_array_equal(np.load(out)["samples"], np.arange(6.0).reshape(3, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x_o_posterior.npz"]
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_an_existing_file_is_kept_and_refused(tmp_path, no_hard_links):
    (out := tmp_path / "x_o_posterior.npz").write_bytes(b"someone else's")
    with pytest.raises(FileExistsError) as refused:
        outputs.write_atomic(out, b"new samples", exclusive=True)
    assert refused.value.filename == str(out)
    assert out.read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x_o_posterior.npz"]


def test_a_rename_that_fails_leaves_no_empty_file(tmp_path, no_hard_links, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError) as refused:
        outputs.write_atomic(tmp_path / "a.npz", b"data", exclusive=True)
    assert refused.value.errno == errno.ENOSPC and refused.value.filename == str(tmp_path / "a.npz")
    assert list(tmp_path.iterdir()) == []


def test_another_link_error_is_not_taken_for_a_missing_feature(tmp_path, monkeypatch):
    def denied(src, dst, *args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "link", denied)
    with pytest.raises(PermissionError):
        outputs.write_atomic(tmp_path / "a.npz", b"data", exclusive=True)
    assert list(tmp_path.iterdir()) == []


def _umask():
    old = os.umask(0)
    os.umask(old)
    return old
