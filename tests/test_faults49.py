"""Faults found trying the harness as users do, round 49: an earlier attempt's outputs in a continued run's folder."""

import json
import logging

import numpy as np

from faults_helpers import compose_tiny


def _stopped_run(folder, attempts=0):
    """A run folder as a stop during its evaluation leaves it: its record, scores and samples of two observations."""
    (folder / "checkpoints" / "8").mkdir(parents=True)
    earlier = [{"status": "preempted", "steps": 4}] * attempts
    (folder / "metrics.json").write_text(json.dumps({"status": "interrupted", "previous_attempts": earlier}))
    (folder / "error.txt").write_text("Traceback: interrupted\n")
    (folder / "c2st.csv").write_text("observation,c2st\n1,0.9\n2,0.8\n")
    (folder / "posterior.png").write_bytes(b"png")
    (folder / "sharding.txt").write_text("rule fsdp, mesh data=8 x model=1: 8 devices\n")  # placed, then stopped
    for name, k in (("posterior_samples.npz", 1), ("posterior_samples_2.npz", 2)):
        np.savez(folder / name, samples=np.zeros((4, 2)), num_observation=k)
    for rank in (0, 1):  # distributed=local's processes append to their logs
        (folder / f"process_{rank}.log").write_text("[2026-12-04 10:00:00][gensbi_sharding][ERROR] - [process "
                                                    f"{rank}/2] ConfigError: refused\nPermissionError: [Errno 13] x\n")
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_a_continued_run_sets_its_earlier_attempts_outputs_aside_under_names_of_their_own(tmp_path, caplog):
    # Was: only error.txt was renamed; the earlier attempt's c2st.csv, posterior.png and posterior_samples*.npz
    # stayed under the names this attempt writes, so a continuation with eval.enabled=false ended ok (c2st null) beside
    # them, and one scoring eval.observations=[3] beside the earlier observation 2's samples.
    from gensbi_sharding.harness.folder_lock import folder_problem
    from gensbi_sharding.harness.local_children import refusals, stuck_errors
    from gensbi_sharding.harness.run_folder import RunFolder

    for attempts in (0, 2):
        out = tmp_path / f"run{attempts}"
        before = _stopped_run(out, attempts)
        folder = RunFolder(out, compose_tiny("train.resume=auto", output_dir=out))
        with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
            folder.claim()
        folder.release()
        n = attempts + 1  # the attempt that wrote them
        renamed = {"error.txt": f"error.attempt{n}.txt", "c2st.csv": f"c2st.attempt{n}.csv",
                   "posterior.png": f"posterior.attempt{n}.png",
                   "posterior_samples.npz": f"posterior_samples.attempt{n}.npz",
                   "posterior_samples_2.npz": f"posterior_samples_2.attempt{n}.npz",
                   "process_0.log": f"process_0.attempt{n}.log", "process_1.log": f"process_1.attempt{n}.log",
                   # was left: a continuation failing before it placed its state showed the earlier mesh and rule
                   "sharding.txt": f"sharding.attempt{n}.txt"}
        after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".run.lock"}
        assert after == {renamed.get(name, name): data for name, data in before.items()}  # nothing lost
        assert f"c2st.attempt{n}.csv" in caplog.text
        assert folder_problem(out, sweep=False) is None  # still a run's folder, never a foreign file's
        # This attempt's processes, stuck or failed with nothing logged, are not said to have logged the earlier ones'.
        assert stuck_errors(out, 2) == "" and refusals(out, [0, 1], None) == {}


def test_a_third_attempt_after_one_killed_outright_sets_the_second_attempts_outputs_aside_too(tmp_path):
    # Was: numbered by the record's count of attempts alone; an attempt killed outright (SIGKILL, out of memory) writes
    # no record, so after it the next one's record counted one attempt fewer, named copies that exist, and skipped
    # them: the second attempt's c2st.csv and process logs stayed under the names the third writes (its
    # eval.enabled=false run ended ok beside a c2st.csv sbibm.py table counts; its parent read the old logs' errors).
    from gensbi_sharding.harness.earlier_attempts import ATTEMPT_FILES
    from gensbi_sharding.harness.run_folder import RunFolder

    out = tmp_path / "run"
    before = _stopped_run(out)  # the second attempt's record: no previous_attempts, as the first left none
    for name in ("c2st.attempt1.csv", "process_0.attempt1.log", "error.attempt1.txt"):  # the first attempt's, aside
        (out / name).write_text("the attempt killed outright")
    folder = RunFolder(out, compose_tiny("train.resume=auto", output_dir=out))
    folder.claim()
    folder.release()
    assert not [p.name for p in out.iterdir() if ATTEMPT_FILES.fullmatch(p.name)]
    for name, data in before.items():
        if ATTEMPT_FILES.fullmatch(name):
            stem, suffix = name.rsplit(".", 1)
            assert (out / f"{stem}.attempt2.{suffix}").read_bytes() == data
    assert (out / "c2st.attempt1.csv").read_text() == "the attempt killed outright"


def test_a_score_kept_from_an_earlier_attempt_is_moved_back_and_other_files_are_left_alone(tmp_path):
    from gensbi_sharding.harness.earlier_attempts import set_aside, take_back, with_aside_copies

    _stopped_run(tmp_path)
    (tmp_path / "c2st.attempt1.csv").write_text("an attempt's copy is never written over")
    assert set_aside(tmp_path, {"status": "interrupted"}) == [  # past the copies there, all of them moved
        "c2st.attempt2.csv", "error.attempt2.txt", "posterior.attempt2.png", "posterior_samples.attempt2.npz",
        "posterior_samples_2.attempt2.npz", "process_0.attempt2.log", "process_1.attempt2.log", "sharding.attempt2.txt"]
    assert (tmp_path / "c2st.attempt1.csv").read_text() == "an attempt's copy is never written over"
    (tmp_path / "error.txt").write_text("a run killed outright leaves no record")
    assert set_aside(tmp_path, None) == ["error.attempt3.txt"]  # no record: one past the highest set aside
    for name in ("posterior_samples.npz", "posterior_samples_2.npz"):
        copy = tmp_path / name.replace(".npz", ".attempt2.npz")
        copy.with_name(name.replace(".npz", ".attempt1.npz")).write_bytes(copy.read_bytes())
    names = [tmp_path / "posterior_samples_2.npz", tmp_path / "posterior_samples.npz"]
    assert with_aside_copies(names) == [*names, tmp_path / "posterior_samples_2.attempt2.npz",
                                        tmp_path / "posterior_samples.attempt2.npz",
                                        tmp_path / "posterior_samples_2.attempt1.npz",
                                        tmp_path / "posterior_samples.attempt1.npz"]  # the newest attempt's first
    data = (source := tmp_path / "posterior_samples_2.attempt2.npz").read_bytes()
    assert take_back(source, tmp_path / "posterior_samples.npz") and not source.exists()
    assert (tmp_path / "posterior_samples.npz").read_bytes() == data  # moved as written
    assert not take_back(tmp_path / "posterior_samples.npz", tmp_path / "x.npz")  # a file of this attempt's: not moved


def test_an_evaluation_the_weights_failed_names_the_commands_that_get_past_it_not_the_one_that_fails_again(tmp_path):
    # Was: "checkpoint .../40 was saved before it: once that is fixed, continue with: <the same command>", which samples
    # the same weights and fails again; the fix the error named, data.theta_transform=support, is refused on resume.
    import re

    from faults_helpers import under_command
    from gensbi_sharding.harness.stop_record import failure_error
    from gensbi_sharding.harness.weights_failure import SamplingError

    out = tmp_path / "run"
    (out / "checkpoints" / "40").mkdir(parents=True)
    command = ("experiment=quick", "train.steps=40", "data.theta_transform=none", f"hydra.run.dir={out}")
    outside = SamplingError("only 0.00% of 12800 posterior draws lie inside the prior's support", outside=True)
    for before in ([], [40]):  # saved by this attempt, or by the earlier one that only this attempt evaluated
        error = under_command(command, lambda cfg: failure_error(out, before, outside))
        assert "continue with" not in error and f"checkpoint {out}/checkpoints/40 holds the weights that failed" in error
        further, fresh = re.search(r"further in this folder with: (.*); or train afresh through the prior's bijection "
                                   r"in a new folder: (.*)$", error).groups()
        assert further == f"python launch.py experiment=quick data.theta_transform=none train.steps=80 " \
                          f"train.resume=auto hydra.run.dir={out}"
        assert fresh == (f"python launch.py experiment=quick train.steps=40 data.theta_transform=support "
                         f"hydra.run.dir={out}-support")
    (tmp_path / "run-support").mkdir()  # used: the next free name
    not_finite = SamplingError("50 of 50 posterior draws hold NaN or inf", outside=False)
    error = under_command(command, lambda cfg: failure_error(out, [], not_finite))
    assert error.endswith(f"would sample again: retrain in a new folder, with a lower train.learning_rate added to: "
                          f"python launch.py experiment=quick train.steps=40 data.theta_transform=none "
                          f"hydra.run.dir={out}-lower-lr")
    # From Python: the settings of cfg that do so.
    assert failure_error(out, [], outside).endswith(
        f"train them further in this folder with: run(cfg) with cfg.train.steps=80, cfg.train.resume='auto' and "
        f"cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg); or train afresh through the prior's bijection "
        f"in a new folder: a new run(cfg) with cfg.data.theta_transform='support' and "
        f"cfg.output_dir={str(out) + '-support-2'!r}")


def test_train_further_names_more_steps_than_an_early_stopped_run_asked_for_and_what_the_schedule_does(tmp_path):
    # Was: train.steps twice the checkpoint's step, 600 for a run early stopping ended at step 300 of train.steps=1000:
    # fewer steps than the run asked for, and the jump of its cosine learning rate at the resume step unsaid.
    import math
    import re

    from omegaconf import OmegaConf

    from faults_helpers import under_command
    from gensbi_sharding.harness.stop_record import failure_error
    from gensbi_sharding.harness.weights_failure import SamplingError

    out = tmp_path / "run"
    (out / "checkpoints" / "300").mkdir(parents=True)
    (out / ".hydra").mkdir()
    OmegaConf.save({"train": {"steps": 1000, "learning_rate": 1e-3, "schedule": "cosine", "warmup_steps": 0,
                              "patience": 3}}, out / ".hydra" / "config.yaml")
    outside = SamplingError("only 0.00% of 12800 posterior draws lie inside the prior's support", outside=True)
    command = ("experiment=quick", "train.steps=1000", "train.patience=3", f"hydra.run.dir={out}")
    error = under_command(command, lambda cfg: failure_error(out, [], outside))
    further = re.search(r"further in this folder with: (.*?); or train afresh", error)[1]
    assert further.startswith("python launch.py experiment=quick train.patience=3 train.steps=2000 train.resume=auto "
                              f"hydra.run.dir={out} (twice the train.steps=1000 it was launched with: it stopped "
                              "early at step 300)")
    old, new = (1e-3 * (1 + math.cos(math.pi * 300 / steps)) / 2 for steps in (1000, 2000))
    assert f"its cosine schedule is redrawn to end at step 2000: the learning rate at step 300 goes from {old:.3g} " \
           f"to {new:.3g}, then decays to 0" in further
    assert further.endswith("early stopping (train.patience=3) ends it again at a validation without a new best: add "
                            "train.patience=0 to train every step")
