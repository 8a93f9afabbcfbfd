"""An output folder nobody can write in is refused in one line naming the override to change.

Was: ``hydra.run.dir=<read-only folder>/run`` (or ``hydra.sweep.dir=...``, or the default ``outputs/...`` under a
read-only working directory) printed "UserWarning: Callback RefuseCompletedRun.on_run_start raised
PermissionError", then Hydra's own ``PermissionError`` traceback from its ``mkdir`` (or from opening
``launch.log``: "ValueError: Unable to configure handler 'file'"), naming no override.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness import folder_claim
from library_helpers import unwritable  # noqa: F401 (a fixture, shared)

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("multirun", [False, True])
def test_an_output_folder_that_cannot_be_written_is_named_with_the_override_to_change(unwritable, capsys,
                                                                                       multirun):
    parent, reason = unwritable
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    for folder in (parent, parent / "gensbi-runs" / "a"):  # the folder itself, or one to be made under it
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(folder)}, "run": {"dir": str(folder)}},
                                   "distributed": {"mode": "none", "process_id": None}})
        callback = folder_claim.RefuseCompletedRun()
        with pytest.raises(SystemExit) as stop:
            (callback.on_multirun_start if multirun else callback.on_run_start)(config)
        assert stop.value.code == 1
        assert capsys.readouterr().err.strip() == (
            f"[ERROR] {key}={folder}: cannot write in {parent} ({reason}); choose another {key}, "
            "in a folder you can write to")
        assert not (parent / "gensbi-runs").exists()
        assert not any(p.name.startswith(".write-probe-") for p in parent.iterdir())


def test_an_unwritable_run_folder_holding_checkpoints_names_how_to_continue_them(tmp_path, monkeypatch):
    # Was only "choose another hydra.run.dir": train.resume=auto there starts from step 0, the checkpoints unused.
    from gensbi_sharding.harness import folder_lock

    monkeypatch.setattr(folder_lock, "write_denied", lambda f, *_: f"cannot write in {f} (Read-only file system)")
    (tmp_path / "checkpoints" / "50.orbax-checkpoint-tmp").mkdir(parents=True)  # no committed step yet
    said = "cannot write in {0} (Read-only file system); choose another {1}, in a folder you can write to"
    assert folder_lock.folder_problem(tmp_path, sweep=False) == f"hydra.run.dir={tmp_path}: " + said.format(
        tmp_path, "hydra.run.dir")
    (tmp_path / "checkpoints" / "40").mkdir()
    assert folder_lock.folder_problem(tmp_path, sweep=False) == f"hydra.run.dir={tmp_path}: " + said.format(
        tmp_path, "hydra.run.dir") + f"; to continue from its checkpoints in a new folder: train.resume={tmp_path} " \
        "hydra.run.dir=<a new folder>"
    assert folder_lock.folder_problem(tmp_path, sweep=True).endswith("in a folder you can write to")


def test_a_writable_folder_leaves_no_probe_behind(tmp_path):
    from gensbi_sharding.harness.folder_lock import folder_problem

    for folder in (tmp_path, tmp_path / "new" / "run"):
        assert folder_problem(folder, sweep=False) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # launches launch.py
@pytest.mark.parametrize("mode", [[], ["-m", "rule=replicated,fsdp"]])
def test_launch_into_an_unwritable_folder_ends_in_one_line(unwritable, mode):
    parent, reason = unwritable
    key = "hydra.sweep.dir" if mode else "hydra.run.dir"
    folder = parent / "gensbi-runs" / "a"
    proc = subprocess.run([sys.executable, "launch.py", *mode, "experiment=quick", f"{key}={folder}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"[ERROR] {key}={folder}: cannot write in {parent} ({reason}); choose another {key}, "
        "in a folder you can write to")


@pytest.mark.parametrize("sweep", [False, True])
@pytest.mark.parametrize("below", ["", "run"])
def test_an_output_folder_through_a_symbolic_link_to_nothing_is_refused_naming_the_link(tmp_path, sweep, below):
    # Was: hydra.run.dir=<a link whose target was moved> (or a folder under it) stopped with "[ERROR] [Errno 17] File
    # exists: '<link>'", Hydra's mkdir refusing the link, naming neither the link nor the fix.
    from gensbi_sharding.harness.folder_lock import folder_problem

    link, target = tmp_path / "latest", tmp_path / "moved"
    link.symlink_to("moved")  # relative, as ln -s writes it
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    folder = link / below if below else link
    assert folder_problem(folder, sweep=sweep) == (
        f"{key}={folder}: {link} is a symbolic link to {target}, which does not exist; make that folder "
        f"(mkdir -p {target}), or choose another {key}")
    target.mkdir()  # the fix: the folder it names
    assert folder_problem(folder, sweep=sweep) is None


@pytest.mark.parametrize("multirun", [False, True])
@pytest.mark.parametrize("typed, reason", [
    ("runs/${oc.env:GENSBI_TEST_UNSET}", "KeyError raised while resolving interpolation: \"Environment variable "
                                         "'GENSBI_TEST_UNSET' not found\""),
    ("runs/${nope.key}", "Interpolation key 'nope.key' not found"),
])
def test_an_output_folder_whose_interpolation_cannot_resolve_is_refused_in_one_line(monkeypatch, capsys, multirun,
                                                                                     typed, reason):
    # Was the folder callback's InterpolationResolutionError traceback, after a [WARNING] calling the config
    # check's crash "a fault of gensbi_sharding's own".
    from gensbi_sharding.harness.preflight import LauncherPreflight

    monkeypatch.delenv("GENSBI_TEST_UNSET", raising=False)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    config = OmegaConf.create({"hydra": {"mode": "RunMode.MULTIRUN" if multirun else "RunMode.RUN",
                                         "sweep": {"dir": typed}, "run": {"dir": typed}}})
    with pytest.raises(SystemExit) as stop:
        (LauncherPreflight().on_multirun_start if multirun else LauncherPreflight().on_run_start)(config)
    assert stop.value.code == 1
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] {key}={typed} cannot be resolved ({reason}); give a folder whose ${{...}} resolves (an environment "
        "variable set, or a default: ${oc.env:NAME,runs/a}), or a plain path")


@pytest.mark.parametrize("multirun", [False, True])
def test_an_output_folder_reading_a_key_left_at_missing_names_that_key(capsys, multirun):
    # Was: hydra.run.dir=/x/${model.width} model.width=??? said the folder "cannot be resolved (MissingMandatoryValue
    # ...); give a folder whose ${...} resolves (an environment variable set, or a default ...)": the folder blamed,
    # the fix of another fault. The key left at ??? is the cause, and its fix.
    from gensbi_sharding.harness.preflight import LauncherPreflight

    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    typed = "/x/${model.width}"
    config = OmegaConf.create({"model": {"width": "???"},
                               "hydra": {"mode": "RunMode.MULTIRUN" if multirun else "RunMode.RUN",
                                         "sweep": {"dir": typed}, "run": {"dir": typed}}})
    with pytest.raises(SystemExit):
        (LauncherPreflight().on_multirun_start if multirun else LauncherPreflight().on_run_start)(config)
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] {key}={typed} cannot be resolved because model.width=???: ??? is OmegaConf's mark of a value still "
        "to be given, which no run can read; give a value")


def test_a_hydra_key_the_command_sets_whose_interpolation_cannot_resolve_is_refused_in_one_line(monkeypatch, capsys):
    # Was Hydra's traceback, with the run's folder already made (holding .run.lock).
    from gensbi_sharding.harness.preflight import LauncherPreflight

    monkeypatch.delenv("GENSBI_TEST_UNSET", raising=False)
    typed = "${oc.env:GENSBI_TEST_UNSET}"
    config = OmegaConf.create({"hydra": {"mode": "RunMode.RUN", "run": {"dir": "runs/a"}, "job": {"name": typed},
                                         "overrides": {"hydra": [f"hydra.job.name={typed}", "hydra.run.dir=runs/a"]}}})
    with pytest.raises(SystemExit):
        LauncherPreflight().on_run_start(config)
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.job.name={typed} cannot be resolved (KeyError raised while resolving interpolation: "
        "\"Environment variable 'GENSBI_TEST_UNSET' not found\"); give a value whose ${...} resolves (an environment "
        "variable set, or a default: ${oc.env:NAME,x}), or a plain one")


@pytest.mark.slow  # launches launch.py (forked from one process that imported it once)
def test_launch_with_a_hydra_value_that_cannot_resolve_ends_in_one_line_and_makes_no_folder(tmp_path):
    import os

    from fork_launch import run_forked

    env = {k: v for k, v in os.environ.items() if k != "GENSBI_TEST_UNSET"}
    cases = [["experiment=quick", "hydra.run.dir=runs/${oc.env:GENSBI_TEST_UNSET}"],
             ["-m", "experiment=quick", "train.steps=2,3", "hydra.sweep.dir=runs/${oc.env:GENSBI_TEST_UNSET}"],
             ["experiment=quick", "hydra.run.dir=runs/a", "hydra.job.name=${oc.env:GENSBI_TEST_UNSET}"]]
    folders = [tmp_path / str(i) for i in range(len(cases))]
    for folder in [*folders, tmp_path / "fork"]:
        folder.mkdir()
    procs = run_forked([{"args": args, "cwd": folder} for args, folder in zip(cases, folders)],
                       env={**env, "JAX_PLATFORMS": "cpu"}, timeout=300, workdir=tmp_path / "fork")
    for args, folder, proc in zip(cases, folders, procs):
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"[ERROR] {args[-1]} cannot be resolved (KeyError raised while resolving "
                               "interpolation: \"Environment variable 'GENSBI_TEST_UNSET' not found\"); give a "), last
        assert list(folder.iterdir()) == []  # no folder made: runs/, outputs/, multirun/


@pytest.mark.parametrize("below", ["foo", "foo/bar", ""])
def test_a_folder_that_takes_no_new_name_is_named_with_the_real_reason(tmp_path, monkeypatch, below):
    # Round 60: hydra.run.dir=/proc/foo said "cannot write in /proc (No such file or directory)", yet /proc exists:
    # /proc answers a new name with ENOENT. Now the path to be made and why: a virtual file system (sample.py too).
    import errno
    import tempfile

    from gensbi_sharding.harness.folder_lock import folder_problem
    from gensbi_sharding.harness.sample_output import output_problem

    def no_new_name(**kwargs):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(Path(kwargs["dir"]) / "tmpx"))

    monkeypatch.setattr(tempfile, "mkdtemp", no_new_name)
    why = ("exists, but takes no new files or folders: making one there fails with \"No such file or directory\" (a "
           "virtual file system, such as /proc); choose another hydra.run.dir, in a folder you can write to")
    said = f"cannot create {tmp_path / 'foo'}: {tmp_path}" if below else f"cannot write in {tmp_path}: it"
    assert folder_problem(tmp_path / below, sweep=False) == f"hydra.run.dir={tmp_path / below}: {said} {why}"
    assert output_problem(tmp_path / "x.npz", "x.npz") == (
        f"--out {tmp_path / 'x.npz'}: cannot create {tmp_path / 'x.npz'}: {tmp_path} {why.split(';')[0]}; pass --out "
        "<a file in a folder you can write to>.npz")


def test_proc_is_refused_as_a_folder_taking_no_new_name(proc_takes_no_new_name):
    from gensbi_sharding.harness.folder_lock import folder_problem

    assert folder_problem(Path("/proc/gensbi-foo"), sweep=True) == (
        "hydra.sweep.dir=/proc/gensbi-foo: cannot create /proc/gensbi-foo: /proc exists, but takes no new files or "
        "folders: making one there fails with \"No such file or directory\" (a virtual file system, such as /proc); "
        "choose another hydra.sweep.dir, in a folder you can write to")
