"""Sizes said in KB are decimal KB (1 KB = 1,000 B), as everywhere else in the project (units.format_bytes,
docs/harness.md): Hydra's room check and the file-size limit's fix divided by 1024 and called it KB.

Was: a 2,000,000 B Hydra record over a 1,024,000 B file-size limit (ulimit -f 1000) said "a 1,953 KB file" and
"ulimit -f: 1,000 KB here"; now "a 2,000 KB file", and the file-size limit in the shell's own unit, as ulimit -f
prints it: "1,000 blocks of 1,024 B" (a first version said "1,024 KB", a number no shell shows).
"""

import errno
import os
import resource
from types import SimpleNamespace

from gensbi_sharding.harness import hydra_room, outputs


def _limit(monkeypatch, soft, hard=resource.RLIM_INFINITY):
    real = resource.getrlimit  # read, not set: a real limit would refuse pytest's own output
    monkeypatch.setattr(resource, "getrlimit",
                        lambda which: (soft, hard) if which == resource.RLIMIT_FSIZE else real(which))


def test_a_file_over_the_file_size_limit_is_said_in_decimal_kb(tmp_path, monkeypatch):
    _limit(monkeypatch, 1_024_000)
    said = hydra_room.room_problem(tmp_path / "r", {"config.yaml": 100, "hydra.yaml": 2_000_000})
    assert "holds a 2,000 KB file, over this process's file-size limit" in said, said
    assert said.endswith("(ulimit -f: 1,000 blocks of 1,024 B here; ulimit -f unlimited lifts it)"), said


def test_a_full_disk_before_hydras_record_is_said_in_decimal_kb(tmp_path, monkeypatch):
    _limit(monkeypatch, resource.RLIM_INFINITY)
    real = os.statvfs
    monkeypatch.setattr(hydra_room.os, "statvfs", lambda path: SimpleNamespace(
        f_frsize=4096, f_bsize=4096, f_bfree=250, f_bavail=250, f_blocks=real(path).f_blocks, f_flag=0))
    said = hydra_room.room_problem(tmp_path / "r", {"hydra.yaml": 2_000_000})
    # 489 blocks of 4096 B for the file, 2 for the job's first files: 2,011,136 B; 250 blocks free: 1,024,000 B
    assert "need about 2,011 KB, more than the 1,024 KB free on its disk" in said, said


def test_the_file_size_limits_fix_says_its_limits_as_ulimit_f_prints_them(monkeypatch):
    too_large = OSError(errno.EFBIG, os.strerror(errno.EFBIG), "posterior_samples.npz")
    _limit(monkeypatch, 5_120_000, 10_240_000)  # ulimit -Sf 5000, ulimit -Hf 10000
    assert outputs.room_fix(too_large) == ("raise the file-size limit of the shell that runs it (ulimit -f: 5,000 blocks "
                                           "of 1,024 B here; ulimit -f hard raises it to its hard limit, 10,000 blocks)")
    _limit(monkeypatch, 5_120_000, 5_120_000)
    assert outputs.room_fix(too_large).startswith("run it from a new shell: this one's file-size limit (5,000 blocks of "
                                                  "1,024 B) is")
