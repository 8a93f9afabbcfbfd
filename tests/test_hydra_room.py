"""A disk too full (or a file-size limit too low) for the files Hydra writes into a job's folder before the job runs
(.hydra/config.yaml, hydra.yaml, overrides.yaml): one line naming them and the fix, before anything is written; in a
sweep, the sweep stops after the job before, with its continue command."""

import os
import resource
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict

from faults_helpers import REPO
from gensbi_sharding.harness import hydra_room
from gensbi_sharding.harness.config import register_configs


def composed(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=["experiment=quick", *overrides], return_hydra_config=True)


SMALL_HYDRA_FILES = tuple((name, "- seed=0\n") for name in ("config.yaml", "hydra.yaml", "overrides.yaml"))


def sweep_at_job_zero(sweep, task="seed=0,1,2", files=SMALL_HYDRA_FILES, ended=True):
    """Job 0's config of the sweep ``-m <task>`` in ``sweep`` (``hydra.job.num`` 0, as Hydra's launcher sets it) and
    its folder, with its ``.hydra`` ``files`` and the sweep's multirun.yaml written; its metrics.json too if ``ended``
    (status ok). Returns ``(config, job folder)``."""
    config = composed("seed=0", f"hydra.sweep.dir={sweep}", "hydra.mode=MULTIRUN")
    with open_dict(config.hydra.job):
        config.hydra.job.num = 0
    job = sweep / "0"
    (job / ".hydra").mkdir(parents=True)
    for name, text in files:
        (job / ".hydra" / name).write_text(text)
    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": [task], "hydra": []}, "sweeper": {}}}),
                   sweep / "multirun.yaml")
    if ended:
        (job / "metrics.json").write_text('{"status": "ok"}')
    return config, job


def full_disk(monkeypatch, free_blocks):
    real = os.statvfs

    def statvfs(path):
        disk = real(path)
        return SimpleNamespace(f_frsize=4096, f_bsize=4096, f_bfree=free_blocks, f_bavail=free_blocks,
                               f_blocks=disk.f_blocks, f_flag=0)
    monkeypatch.setattr(hydra_room.os, "statvfs", statvfs)


def test_a_run_whose_disk_cannot_take_hydras_files_is_refused_before_its_folder(tmp_path, monkeypatch, capsys):
    # Was, on an 8 KB tmpfs: Hydra's traceback of OSError [Errno 28] from hydra/core/utils.py's _save_config, the
    # folder left with an empty hydra.yaml.
    from gensbi_sharding.harness.preflight import LauncherPreflight

    run = tmp_path / "r"
    config = composed(f"hydra.run.dir={run}")
    full_disk(monkeypatch, 2)
    with pytest.raises(SystemExit) as stop:
        LauncherPreflight().on_run_start(config)
    assert stop.value.code == 1 and not run.exists()
    said = capsys.readouterr().err
    assert said.startswith(f"[ERROR] {run / '.hydra'} could not be written (No space left on device): Hydra's record "
                           "of the command (config.yaml, hydra.yaml, overrides.yaml) and the job's first files need "
                           "about "), said
    assert said.endswith("KB, more than the 8 KB free on its disk; free space there (or make it writable), then run "
                         "the same command again (nothing was written)\n") and said.count("\n") == 1, said
    full_disk(monkeypatch, 100)  # room enough: the run goes on
    LauncherPreflight().on_run_start(config)


def test_a_file_size_limit_under_hydras_file_is_named_as_that_limit(tmp_path, monkeypatch):
    sizes = hydra_room.hydra_file_sizes(composed(f"hydra.run.dir={tmp_path}"))
    assert set(sizes) == {"config.yaml", "hydra.yaml", "overrides.yaml"} and sizes["hydra.yaml"] > 2048
    real = resource.getrlimit  # the limit read, not set: a real one would refuse pytest's own output past 2 KB
    with monkeypatch.context() as patched:
        patched.setattr(resource, "getrlimit", lambda which: (
            (2048, resource.RLIM_INFINITY) if which == resource.RLIMIT_FSIZE else real(which)))
        said = hydra_room.room_problem(tmp_path / "r", sizes)
    assert said.startswith(f"{tmp_path / 'r' / '.hydra' / 'hydra.yaml'} could not be written (File too large): "), said
    assert said.endswith("raise the file-size limit of the shell that runs it (ulimit -f: 2 blocks of 1,024 B here; ulimit -f "
                         "unlimited lifts it)"), said
    assert hydra_room.room_problem(tmp_path / "r", sizes) is None  # no limit, room enough


@pytest.mark.slow
def test_a_sweep_whose_disk_filled_stops_before_the_next_job_with_its_continue_command(tmp_path, monkeypatch):
    # Was (a 352 KB tmpfs, -m experiment=quick seed=0,1,2): job 2 died in Hydra's _save_config traceback, with no
    # sweep summary, no stop line and no continue command.
    sweep = tmp_path / "sw"
    config, job = sweep_at_job_zero(sweep, files=(("config.yaml", "seed: 0\n" * 300), ("hydra.yaml", "x: 1\n" * 1500),
                                                  ("overrides.yaml", "- seed=0\n")))
    before = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(config)
    try:
        full_disk(monkeypatch, 1000)
        assert hydra_room.next_job_room_lines(job, 1, ["launch.py", "-m", "seed=0,1,2"]) is None  # room enough
        full_disk(monkeypatch, 3)
        lines = hydra_room.next_job_room_lines(job, 1, ["launch.py", "-m", "seed=0,1,2"])
    finally:
        HydraConfig.instance().cfg = before
    assert lines[0].startswith(f"the sweep stops before job 1: {sweep / '1' / '.hydra'} could not be written (No space "
                               "left on device): "), lines
    assert lines[0].endswith("; free space there (or make it writable); 1 job(s) ended, each recorded in its "
                             "folder's metrics.json, and no later job started"), lines
    assert any("train.resume=auto" in line for line in lines[1:]), lines  # how to continue it
    assert not (sweep / "1").exists()


def test_a_folder_the_folder_check_refuses_is_left_to_it(tmp_path, monkeypatch):
    # hydra.run.dir=/sys/...: sysfs has no size (0 blocks, 0 free); was "... 0 KB free on its disk" in place of the
    # folder check's "cannot write in /sys (Operation not permitted)" (tests/test_output_folder_writable.py).
    monkeypatch.setattr(hydra_room.os, "statvfs", lambda path: SimpleNamespace(
        f_frsize=4096, f_bsize=4096, f_bfree=0, f_bavail=0, f_blocks=0, f_flag=0))
    assert hydra_room.room_problem(tmp_path / "r", {"hydra.yaml": 6000}) is None
    monkeypatch.setattr(hydra_room.os, "statvfs", lambda path: SimpleNamespace(
        f_frsize=4096, f_bsize=4096, f_bfree=0, f_bavail=0, f_blocks=100, f_flag=os.ST_RDONLY))
    assert hydra_room.room_problem(tmp_path / "r", {"hydra.yaml": 6000}) is None  # read-only: its check's


def test_a_network_disk_of_large_blocks_with_room_enough_is_not_refused(tmp_path, monkeypatch):
    # NFS reports its transfer size (1 MiB) as the fundamental block: was refused, Hydra's 12 KB needing "about
    # 5,120 KB, more than the 3,072 KB free on its disk", each small file counted as a whole MiB.
    monkeypatch.setattr(hydra_room.os, "statvfs", lambda path: SimpleNamespace(
        f_frsize=1 << 20, f_bsize=1 << 20, f_bfree=3, f_bavail=3, f_blocks=1000, f_flag=0))
    sizes = {"config.yaml": 3000, "hydra.yaml": 9000, "overrides.yaml": 100}
    assert hydra_room.room_problem(tmp_path / "r", sizes) is None
    monkeypatch.setattr(hydra_room.os, "statvfs", lambda path: SimpleNamespace(
        f_frsize=1 << 20, f_bsize=1 << 20, f_bfree=0, f_bavail=0, f_blocks=1000, f_flag=0))
    assert "more than the 0 KB free on its disk" in hydra_room.room_problem(tmp_path / "r", sizes)  # still refused
