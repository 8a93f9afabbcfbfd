"""Round 47's faults, found by using the harness as a user does (training side), each fixed as a kind."""

import pytest
from flax import nnx
from omegaconf import OmegaConf

from faults_helpers import compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.resume import check_resume_settings
from gensbi_sharding.harness.schedule import COUNTS_STEPS, learning_rate_schedule
from gensbi_sharding.harness.state import build_state
from gensbi_sharding.harness.train import make_step_functions


def _saved_checkpoint(folder, *overrides, ts=None, info=None):
    """A step-3 checkpoint of the tiny config under ``overrides`` (one device; ``ts``: that state, else a new one),
    and its step folder."""
    saved = compose_tiny("mesh=none", *overrides)
    if ts is None:
        ts = build_state(saved, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table={}, resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, None, ema=ts.ema)
    with CheckpointWriter(folder / "checkpoints", config=OmegaConf.to_container(saved, resolve=True)) as writer:
        writer.save(3, state, ts.key, info=info)
    return folder / "checkpoints" / "3"


def _resumed(folder, step_dir, *overrides):
    now = compose_tiny("mesh=none", f"train.resume={folder}", *overrides)
    check_resume_settings(step_dir, now)
    return build_state(now, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table={}, resume_dir=step_dir)


def _counts(state) -> int:
    return sum(path[-1] == "count" for path, _ in nnx.to_flat_state(nnx.state(state.optimizer)))


def test_a_run_resumed_under_another_schedule_restores_or_is_refused_naming_the_fix(tmp_path):
    # Was: train.resume=<a cosine run> train.schedule=constant noted "from step 8 the learning rate follows this
    # run's schedule, 0.003", then refused the checkpoint as saved "with another optimizer", advising
    # nnx.Optimizer(model, new_tx, wrt=nnx.Param), Python no launch.py user can type: a constant rate without
    # warm-up is a float to optax.adamw, whose state then holds no step count; a schedule's holds one.
    cosine = _saved_checkpoint(tmp_path / "cosine")
    resumed = _resumed(tmp_path / "cosine", cosine, "train.schedule=constant", "train.learning_rate=0.01")
    assert resumed.start_step == 3
    assert _counts(resumed) == 2  # Adam's and the schedule's, as saved: restored, not refused
    # That run's own checkpoint (saved under train.schedule=constant, its state counting steps, as its info says)
    # continues under either schedule (was: read by its config as uncounted, refused whatever the schedule).
    assert resumed.counts_steps
    again = _saved_checkpoint(tmp_path / "again", "train.schedule=constant", ts=resumed,
                              info={COUNTS_STEPS: resumed.counts_steps})
    for schedule in ("constant", "cosine"):
        assert _counts(_resumed(tmp_path / "again", again, f"train.schedule={schedule}")) == 2
    schedule = learning_rate_schedule(learning_rate=0.01, steps=8, schedule="constant", counted=True)
    assert [float(schedule(step)) for step in (0, 3, 7)] == pytest.approx([0.01] * 3)
    # The other way, a constant run's checkpoint continued under a schedule, cannot restore: refused before,
    # naming the settings it was saved with (was: the same "another optimizer" refusal).
    constant = _saved_checkpoint(tmp_path / "constant", "train.schedule=constant")
    for change in (["train.schedule=cosine"], ["train.schedule=constant", "train.warmup_steps=2"]):
        with pytest.raises(ConfigError) as err:
            _resumed(tmp_path / "constant", constant, *change)
        assert str(err.value).startswith(
            f"checkpoint {constant} was saved with train.schedule=constant train.warmup_steps=0, a constant learning "
            f"rate whose optimizer state holds no step count, so it cannot continue under a schedule (this run: "
            f"{' '.join(c for c in change if c != 'train.schedule=constant')}): add train.schedule=constant "
            "train.warmup_steps=0 (train.learning_rate may change)"), str(err.value)
    resumed = _resumed(tmp_path / "constant", constant, "train.schedule=constant", "train.learning_rate=0.01")
    assert resumed.start_step == 3 and _counts(resumed) == 1  # Adam's only, as saved


def test_a_launcher_given_without_m_is_refused_not_ignored(tmp_path, capsys):
    # Was: python launch.py hydra/launcher=slurm ... (no -m) trained here, on the login node, with no word of SLURM:
    # Hydra reads a launcher (and a sweeper, hydra.sweep.subdir) only in a multirun.
    from hydra import compose, initialize_config_dir

    from faults_helpers import REPO
    from gensbi_sharding.harness import run_folder
    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.sweep_subdirs import unused_folder_problem

    register_configs()

    def composed(*overrides, run_dir=f"hydra.run.dir={tmp_path / 'run'}"):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            return compose("config", overrides=[run_dir, *overrides], return_hydra_config=True)

    config = composed("hydra/launcher=slurm")
    with pytest.raises(SystemExit):
        run_folder.RefuseCompletedRun().on_run_start(config)
    assert capsys.readouterr().err.strip() == (
        "[ERROR] hydra/launcher=slurm: only a multirun (-m) reads it; this single run would run here, in this "
        "process, without it: add -m (python launch.py -m ...), or leave it out")
    assert not (tmp_path / "run").exists()
    assert unused_folder_problem(composed("hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5",
                                          "hydra.sweep.subdir=a"), multirun=False).startswith(
        "hydra/launcher=submitit_local hydra.launcher.timeout_min=5 hydra.sweep.subdir=a: only a multirun (-m) "
        "reads them; ")
    assert unused_folder_problem(composed("hydra/launcher=slurm", run_dir=f"hydra.sweep.dir={tmp_path}"),
                                 multirun=True) is None  # where it is read
    assert unused_folder_problem(composed("hydra/launcher=basic"), multirun=False) is None  # the default: as is


@pytest.mark.parametrize("model", ["mlp", "simformer"])
def test_activation_fields_set_where_no_activation_is_placed_are_named(model):
    # Was: activation=none activation.head_axis=model and mesh=none activation.batch_axis=model ran without a word
    # (the fields were checked against the model's reads only under activation=rule or fixed, on a mesh).
    from gensbi_sharding.harness.model_checks import ignored_settings

    cfg = compose_tiny(f"model={model}", "activation=none", "activation.head_axis=model")
    assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) == (
        "no effect: activation.head_axis=model (activation=none adds no activation constraints; activation=rule or "
        "activation=fixed applies them)")
    cfg = compose_tiny(f"model={model}", "mesh=none", "activation.batch_axis=model", "activation.head_axis=null")
    assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) == (
        "no effect: activation.batch_axis=model activation.head_axis=null (mesh=none: one device, no activation is "
        "placed)")
    for quiet in (("activation=none",), ("mesh=none",), ("activation.batch_axis=null",)):  # nothing set, or read
        cfg = compose_tiny(f"model={model}", *quiet)
        assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) is None, quiet


def test_the_resume_note_names_every_setting_a_step_trains_under():
    # Was: train.resume=<an unfinished run> train.weight_decay=0.5 (or another EMA decay, data.batch_size) trained on
    # under the new value without a word; only the schedule's four settings were compared.
    from gensbi_sharding.harness.schedule import schedule_change_note

    train = {"steps": 20, "learning_rate": 0.003, "schedule": "cosine", "warmup_steps": 0, "weight_decay": 1e-4,
             "ema_decay": 0.999}
    saved = {"train": train, "data": {"batch_size": 64}}
    now = {"train": {**train, "weight_decay": 0.5, "ema_decay": 0.9}, "data": {"batch_size": 128}}
    assert schedule_change_note(saved, now, 7) == (
        "train.resume: the checkpoint at step 7 trained with train.weight_decay=0.0001 train.ema_decay=0.999 "
        "data.batch_size=64 (this run: train.weight_decay=0.5 train.ema_decay=0.9 data.batch_size=128): from step 7 "
        "this run's values apply; add train.weight_decay=0.0001 train.ema_decay=0.999 data.batch_size=64 to continue "
        "the run as it would have gone", True)
    note, unfinished = schedule_change_note(saved, {**now, "train": {**now["train"], "steps": 30}}, 20)
    assert not unfinished and note.startswith("train.resume: the checkpoint at step 20 trained with train.steps=20 "
                                              "train.weight_decay=0.0001 ") and "gives 0" in note
    assert schedule_change_note(saved, {"train": dict(train), "data": {"batch_size": 64}}, 7) is None


def test_a_python_warning_takes_one_console_line():
    # Was: model=transformer rule=fsdp_tensor mesh.model_axis=8 printed each activation fallback warning as three
    # console lines: the warning, the indented source line that raised it ("  q = constrain(self.query(h), ...)")
    # and a blank one. launch.log keeps the whole text.
    import logging
    import warnings

    from gensbi_sharding.harness.console import ConsoleFormatter

    text = warnings.formatwarning("activation ('batch', 'hidden') left unsplit", UserWarning, __file__, 1,
                                  line="q = constrain(x, names, axes)")
    assert text.endswith("\n  q = constrain(x, names, axes)\n")
    record = logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, "%s", (text,), None)
    assert ConsoleFormatter("%(message)s").format(record) == (
        f"[WARNING] {__file__}:1: UserWarning: activation ('batch', 'hidden') left unsplit")
    several = logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, "%s", ("a.py:1: UserWarning: one\ntwo\n",),
                                None)  # no source line found: the message's own lines stay
    assert ConsoleFormatter("%(message)s").format(several) == "[WARNING] a.py:1: UserWarning: one\ntwo"
    ours = logging.LogRecord("gensbi_sharding", logging.WARNING, __file__, 1, "%s", ("a\n  b",), None)
    assert ConsoleFormatter("%(message)s").format(ours) == "[WARNING] a\n  b"  # the harness's own: as written


def test_mesh_devices_is_named_as_typed():
    # Was: "mesh.devices=[0, 1, 1, 9] lists device 1 more than once ..." and "[2/7] mesh: ... mesh.devices=[0, 1, 2,
    # 3]": Python's list, words apart in a shell, where every other message writes a value as an override is typed.
    from gensbi_sharding.harness.hints import mesh_devices_problem

    assert mesh_devices_problem([0, 1, 1, 9], range(8)).startswith(
        "mesh.devices=[0,1,1,9] lists device 1 more than once and names device id 9")


def test_every_command_a_config_file_suggests_sets_nothing_without_effect():
    # Was: conf/activation/fixed.yaml and rule.yaml suggested `activation=fixed activation.sequence_axis=model` and
    # `... activation.head_axis=null` on the default model=mlp, which reads neither: "no effect" at once.
    import re

    from faults_helpers import REPO
    from gensbi_sharding.harness.model_checks import ignored_settings

    commands = [re.split(r"\s{2,}", line.split("python launch.py", 1)[1])[0].split()  # its description cut off
                for path in sorted((REPO / "conf").rglob("*.yaml")) for line in path.read_text().splitlines()
                if line.lstrip().startswith("# python launch.py")]
    single = [words for words in commands if "-m" not in words and not any("<" in w for w in words)]
    assert ["model=transformer", "activation=fixed", "activation.sequence_axis=model"] in single
    for words in single:
        cfg = compose_tiny(*words)
        assert ignored_settings(cfg.model, cfg.activation, cfg.mesh) is None, words


def test_the_override_that_splits_on_an_odd_device_count_splits():
    # Was: devices.cpu_count=7 mesh=auto rule=tensor: "to split, run with mesh=dict mesh.model_axis=7", under which
    # every mlp variable (width 64) fell back to replicated: the hint's own command split nothing either.
    from gensbi_sharding import RULES
    from gensbi_sharding.harness.run_report import splits_nothing_hint

    for devices in (3, 7, 9):
        hint = splits_nothing_hint({"data": devices, "model": 1}, dict(RULES["tensor"]), "tensor", "auto")
        ids = ",".join(map(str, range(devices - 1)))
        assert hint.endswith(f"; to split, run with mesh=dict mesh.model_axis=2 mesh.devices=[{ids}] (an odd count "
                             "divides no power-of-2 width)"), hint
    assert splits_nothing_hint({"data": 6, "model": 1}, dict(RULES["tensor"]), "tensor", "auto").endswith(
        "; to split, run with mesh=dict mesh.model_axis=2")  # an even count: as it was
