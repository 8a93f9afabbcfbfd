"""An output folder holding files no run (or sweep) wrote, under names it writes, is refused before they are lost.

Was: ``hydra.run.dir=<a folder of one's own holding c2st.csv>`` ran and replaced that c2st.csv (and any losses.png,
launch.log, sharding.txt ...) with the run's without a word: the folder held no run, so nothing refused it.
"""

import ast

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness import folder_claim, run_folder
from gensbi_sharding.harness.folder_lock import FolderLock, folder_problem


@pytest.mark.parametrize("sweep, names, shown", [
    (False, ["c2st.csv"], "c2st.csv"),
    (False, ["losses.png", "launch.log", "posterior_samples_3.npz", "process_1.log", "notes.txt"],
     "launch.log, losses.png, posterior_samples_3.npz and 1 more"),
    (True, ["sweep_summary.md", "0", "notes.txt"], "0, sweep_summary.md")])
def test_a_folder_of_ones_own_files_is_refused_naming_them(tmp_path, capsys, sweep, names, shown):
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in names:
        (folder / name).write_text("mine\n")
    expected = (f"{key}={folder} holds {shown}, not written by a {'sweep' if sweep else 'run'}, which it would "
                f"overwrite; choose another {key} (a new or empty folder), or move them out")
    assert folder_problem(folder, sweep=sweep) == expected
    assert refusal_at_start(folder, sweep, capsys) == f"[ERROR] {expected}"
    assert all((folder / name).read_text() == "mine\n" for name in names)  # nothing written over
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)  # not even the lock


@pytest.mark.parametrize("sweep, names", [
    (False, []), (False, ["notes.txt", "data"]),  # empty, or nothing the run writes: accepted
    (False, [".run.lock", "c2st.csv"]), (False, [".hydra", "launch.log"]),  # a run's folder (its own checks follow)
    (False, ["checkpoints", "launch.log"]),  # a run's, copied without its dotfiles: train.resume=auto continues it
    (True, ["multirun.yaml", "0", "sweep_summary.csv"]), (True, ["notes.txt"]),
    (True, ["0/.hydra", "1/metrics.json"])])  # job folders (a sweep whose multirun.yaml is gone): its checks follow
def test_a_run_or_sweep_folder_or_one_without_colliding_names_is_accepted(tmp_path, sweep, names):
    folder = tmp_path / "f"
    folder.mkdir()
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).mkdir() if name.split("/")[-1] in (".hydra", "checkpoints", "data", "0") else (
            folder / name).write_text("")
    assert folder_problem(folder, sweep=sweep) is None


@pytest.mark.parametrize("sweep, inside", [(False, "checkpoints/20"), (False, "checkpoints"), (False, "sub"),
                                           (False, ".hydra"), (True, "sweeps")])
def test_a_folder_inside_a_runs_folder_is_refused_before_anything_is_written(tmp_path, capsys, sweep, inside):
    # Was: hydra.run.dir=<a run>/checkpoints/20 wrote a run into that step folder, and sample.py <the run> and
    # train.resume=<the run> then read the intruder's step-2 checkpoint as the run's newest; <a run>/sub wrote into
    # a completed run's folder.
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    host = tmp_path / "run"
    (host / ".hydra").mkdir(parents=True)
    (host / "checkpoints" / "20").mkdir(parents=True)
    (host / "metrics.json").write_text('{"status": "ok"}')
    before = sorted(p.relative_to(host) for p in host.rglob("*"))
    folder = host / inside
    expected = (f"{key}={folder} lies inside the folder of the run {host}: a {'sweep' if sweep else 'run'} never "
                f"writes into another run's folder; choose one outside it, e.g. {key}={host}-{folder.name.lstrip('.')}")
    assert folder_problem(folder, sweep=sweep) == expected
    assert refusal_at_start(folder, sweep, capsys) == f"[ERROR] {expected}"
    assert sorted(p.relative_to(host) for p in host.rglob("*")) == before  # nothing written, not even a lock
    assert folder_problem(tmp_path / "run-sub", sweep=sweep) is None  # the folder it names: accepted


def test_a_folder_holding_other_runs_folders_is_refused_for_a_run(tmp_path):
    # Was: hydra.run.dir=outputs (the folder of every run) wrote a run around them, and every run after it then lay
    # inside a run's folder.
    for name in ("a", "b"):
        (tmp_path / name / ".hydra").mkdir(parents=True)
        (tmp_path / name / "launch.log").write_text("")
    (tmp_path / "notes").mkdir()  # a folder of one's own: no run's
    assert folder_problem(tmp_path, sweep=False) == (
        f"hydra.run.dir={tmp_path} holds the folders of other runs (a, b): a run never writes around other runs; "
        f"choose a new folder, e.g. hydra.run.dir={tmp_path / 'new_run'}")
    assert folder_problem(tmp_path / "new_run", sweep=False) is None
    assert folder_problem(tmp_path / "a", sweep=False) is None  # a run's own folder: its own checks follow


@pytest.mark.parametrize("layout, shown", [
    (["2026-12-05/10-00-00", "2026-12-05/11-00-00"], "2026-12-05/10-00-00, 2026-12-05/11-00-00"),  # outputs
    (["runs/a", "outputs/2026-12-05/10-00-00", "multirun/2026-12-05/12-00-00/0"],  # a checkout: hydra.run.dir=.
     "multirun/2026-12-05/12-00-00, outputs/2026-12-05/10-00-00, runs/a")])
def test_a_folder_holding_runs_below_its_children_is_refused_for_a_run(tmp_path, capsys, layout, shown):
    # Was: only its children were looked at, so hydra.run.dir=outputs (runs at <date>/<time>) or hydra.run.dir=. in
    # the checkout wrote a run around them, and each default run after it (outputs/<date>/<time>) was refused as
    # lying inside that run's folder.
    for name in layout:
        (tmp_path / name / ".hydra").mkdir(parents=True)
        (tmp_path / name / "launch.log").write_text("")
        if name.startswith("multirun"):  # a sweep's folder: its multirun.yaml above its job folders
            (tmp_path / name).parent.joinpath("multirun.yaml").write_text("")
    (tmp_path / "conf" / "model").mkdir(parents=True)  # folders of one's own: no run's
    expected = (f"hydra.run.dir={tmp_path} holds the folders of other runs ({shown}): a run never writes around "
                f"other runs; choose a new folder, e.g. hydra.run.dir={tmp_path / 'new_run'}")
    assert folder_problem(tmp_path, sweep=False) == expected
    assert refusal_at_start(tmp_path, False, capsys) == f"[ERROR] {expected}"
    assert not (tmp_path / ".hydra").exists() and not (tmp_path / FolderLock.LOCK).exists()  # nothing written
    assert folder_problem(tmp_path / "conf", sweep=False) is None  # a folder without runs below: accepted


def test_a_folder_named_through_dot_dot_is_judged_where_it_lies(tmp_path, capsys):
    # Was: hydra.run.dir=runs/a/../new was refused as "inside the folder of the run runs/a" (its parents were read as
    # typed), naming runs/a-new; runs/x/../a, a completed run, made runs/x for its lock before it was refused.
    host = tmp_path / "a"
    (host / ".hydra").mkdir(parents=True)
    (host / "metrics.json").write_text('{"status": "ok"}')
    assert folder_problem(host / ".." / "new", sweep=False) is None
    assert folder_problem(host / ".." / "a" / "sub", sweep=False).startswith(
        f"hydra.run.dir={host / 'sub'} lies inside the folder of the run {host}:")
    assert refusal_at_start(tmp_path / "x" / ".." / "a", False, capsys).startswith(
        f"[ERROR] {host / 'metrics.json'} already exists (status ok)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # no x made


def refusal_at_start(folder, sweep, capsys):
    """What Hydra's run (or multirun) start prints for output folder ``folder``; it must exit."""
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(folder)}, "run": {"dir": str(folder)}},
                               "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    with pytest.raises(SystemExit):
        (callback.on_multirun_start if sweep else callback.on_run_start)(config)
    return capsys.readouterr().err.strip()


def test_a_folder_a_fix_names_is_written_as_the_shell_and_hydra_read_it_back(tmp_path, monkeypatch):
    """Was: the folder as it is (``train.resume=/tmp/my runs é (1)/run``): pasted, the shell splits it at the space
    and Hydra's grammar refuses the rest, so the fix the refusal offered failed (round 43)."""
    import shlex

    from gensbi_sharding.harness import folder_lock, sweep_hints
    from gensbi_sharding.harness.override_grammar import hydra_override, parse

    odd = tmp_path / "my runs é (1)"
    (odd / "a" / ".hydra").mkdir(parents=True)
    (odd / "a" / "launch.log").write_text("")

    def offers(message, key, folder):
        typed = hydra_override(key, folder)
        (word,) = shlex.split(typed)  # one shell word, which Hydra reads back as the folder
        assert parse([word]).overrides[0].hydra.value() == str(folder) and typed in message, message

    offers(folder_problem(odd, sweep=False), "hydra.run.dir", odd / "new_run")  # a folder holding runs' folders
    offers(folder_problem(odd / "a" / "sub", sweep=False), "hydra.run.dir", f"{odd / 'a'}-sub")  # inside a run's
    (odd / "a" / "checkpoints" / "40").mkdir(parents=True)
    monkeypatch.setattr(folder_lock, "write_denied", lambda f, *_: f"cannot write in {f} (Read-only file system)")
    offers(folder_problem(odd / "a", sweep=False), "train.resume", odd / "a")  # a stopped run's, read-only
    with pytest.raises(FileExistsError) as refused:  # its checkpoints, no record: continue it elsewhere
        run_folder.ensure_fresh(odd / "a")
    offers(str(refused.value), "train.resume", odd / "a")
    python = sweep_hints.continue_command(odd / "a")  # run(cfg) outside Hydra: the folder as Python reads it back
    named = python.split("cfg.output_dir=")[1].removesuffix(" set in omegaconf.open_dict(cfg)")
    assert ast.literal_eval(named) == str(odd / "a"), python


@pytest.mark.parametrize("sweep, inside", [(False, ""), (False, "rule"), (True, "runs/a")])
def test_a_folder_in_the_config_folder_is_refused(sweep, inside):
    # A new user's report: hydra.run.dir=conf ran and wrote the run there; launch.py --help then listed
    # ".hydra: config, hydra, overrides" among the configuration groups, and the outputs lay beside the presets.
    from gensbi_sharding.harness.paste_command import CHECKOUT

    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    folder = CHECKOUT / "conf" / inside if inside else CHECKOUT / "conf"
    problem = folder_problem(folder, sweep=sweep)
    assert problem == (f"{key}={folder} lies inside the harness's config folder {CHECKOUT / 'conf'}, whose every "
                       f"folder Hydra reads as a config group: outputs never go there; choose a folder outside it, "
                       f"e.g. {key}={'multirun' if sweep else 'outputs'}/{folder.name}"), problem
    assert not (CHECKOUT / "conf" / "runs").exists()
    assert folder_problem(CHECKOUT / "confs", sweep=sweep) is None  # only conf/ itself and what lies in it


@pytest.mark.parametrize("sweep", [False, True])
def test_a_folder_in_another_checkouts_config_folder_is_refused(tmp_path, sweep):
    # Was: hydra.run.dir=<another checkout>/conf/x (a second clone, the main one beside a worktree) ran there, its
    # .hydra/ then listed by that checkout's launch.py --help as a config group: only this checkout's conf/ was refused.
    other = tmp_path / "other"
    (other / "conf").mkdir(parents=True)
    (other / "conf" / "config.yaml").write_text("defaults:\n  - _self_\n")
    (other / "launch.py").write_text("")
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    problem = folder_problem(other / "conf" / "x", sweep=sweep)
    assert problem == (f"{key}={other / 'conf' / 'x'} lies inside the harness's config folder {other / 'conf'}, whose "
                       "every folder Hydra reads as a config group: outputs never go there; choose a folder outside "
                       f"it, e.g. {key}={'multirun' if sweep else 'outputs'}/x"), problem
    assert folder_problem(tmp_path / "conf" / "x", sweep=sweep) is None  # a folder named conf of no checkout: taken
    (other / "launch.py").unlink()
    assert folder_problem(other / "conf" / "x", sweep=sweep) is None
