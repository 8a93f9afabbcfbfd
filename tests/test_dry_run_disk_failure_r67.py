"""A dry run that failed on a full or refused disk names the command that runs it again in a new folder, not one
that continues it (round 67's review of the stop messages: "once that is fixed, run it again with: ... dry_run=true
... train.resume=auto", which is refused when pasted, into a folder that holds the failure's record)."""

import errno
import os

from gensbi_sharding.harness.stop_record import failure_error


def test_a_dry_runs_disk_failure_advises_running_it_again_in_a_new_folder(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    again = f"run(cfg) again with cfg.output_dir={str(tmp_path / 'run-again')!r} set in omegaconf.open_dict(cfg)"
    for where in (out / "sharding.txt", None):  # a file it names (output_refused_error), or none
        full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([str(where)] if where else []))
        dry = failure_error(out, [], full, dry_run=True)
        assert dry.endswith(f"then run it again with: {again}" if where else
                            f"; once that is fixed, run it again with: {again}"), dry
        assert "resume" not in dry
        # A training run keeps its advice: what continues it in this folder (it saved no checkpoint).
        assert failure_error(out, [], full).endswith(
            "run it again with: run(cfg) with cfg.train.resume='auto' and "
            f"cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg)")
