"""Preemption as SLURM users meet it: a signal, a checkpoint at the next step boundary, a requeue.

The in-process tests send the signal at a chosen step (deterministic); the slow ones
send real signals to ``launch.py`` processes, bounded by timeouts.
"""

import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from faults_helpers import REPO, TINY, run_tiny
from gensbi_sharding.checkpoint import committed_steps
from gensbi_sharding.harness import folder_claim, folder_lock, outputs, processes, run_folder
from gensbi_sharding.harness import train as train_module
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.preemption import EXIT_PREEMPTED, Preempted, PreemptionWatch


def _signal_at(monkeypatch, step: int, signum=signal.SIGTERM) -> None:
    """Make the training loop receive ``signum`` right after ``step``, as if SLURM sent it then."""
    real = train_module.train

    def train(*args, on_step, **kwargs):
        def hook(at, state):
            if at == step:
                os.kill(os.getpid(), signum)
            return on_step(at, state)
        return real(*args, on_step=hook, **kwargs)

    monkeypatch.setattr(train_module, "train", train)


def _losses(run_dir: Path) -> np.ndarray:
    with np.load(run_dir / "train_losses.npz") as f:
        np.testing.assert_array_equal(f["step"], np.arange(1, len(f["losses"]) + 1))
        return f["losses"]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, devices):
    """The uninterrupted run's folder (8 steps on the default (8, 1) mesh); tests only read it or copy it."""
    out = tmp_path_factory.mktemp("reference") / "run"
    assert run_tiny(out)["status"] == "ok"
    return out


@pytest.fixture(scope="module")
def reference(reference_run):
    """The uninterrupted run's losses."""
    return _losses(reference_run)


@pytest.fixture(scope="module")
def usr1_at_3(tmp_path_factory, devices):
    """SIGUSR1 after step 3 of a ``train.resume=auto`` run, then the same command again (requeued).

    Shared by four tests (each run costs seconds); what the stop left is read before the resume, and the
    resumed run's losses before any test continues the folder further.
    """
    out = tmp_path_factory.mktemp("usr1") / "run"
    with pytest.MonkeyPatch.context() as patch:
        _signal_at(patch, 3, signal.SIGUSR1)
        stopped = run_tiny(out, "train.resume=auto")
    after_stop = SimpleNamespace(handler=signal.getsignal(signal.SIGUSR1), losses=_losses(out),
                                 status=json.loads((out / "metrics.json").read_text())["status"],
                                 checkpoint=(out / "checkpoints" / "3").is_dir())
    # Copies for the tests that continue the stopped run otherwise (each as if it had stopped it itself).
    stopped_copy = shutil.copytree(out, out.parent / "stopped_copy")
    stopped_copy_2 = shutil.copytree(out, out.parent / "stopped_copy_2")
    resumed = run_tiny(out, "train.resume=auto")  # the same command, requeued
    return SimpleNamespace(out=out, stopped=stopped, after_stop=after_stop, resumed=resumed,
                           resumed_losses=_losses(out), stopped_copy=stopped_copy, stopped_copy_2=stopped_copy_2)


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_signal_checkpoints_at_the_next_step_and_auto_resume_continues_exactly(usr1_at_3, reference):
    out, stopped, after_stop = usr1_at_3.out, usr1_at_3.stopped, usr1_at_3.after_stop
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] == 3
    assert stopped["error"] == (f"preempted by SIGUSR1 at step 3; checkpoint {out / 'checkpoints' / '3'}; continue "
                                f"with: run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg)")
    assert after_stop.status == "preempted"  # metrics.json
    assert after_stop.checkpoint and len(after_stop.losses) == 3 and stopped["final_step"] == 3
    assert after_stop.handler is signal.SIG_DFL  # the run's handlers are gone

    resumed = usr1_at_3.resumed
    assert resumed["status"] == "ok" and resumed["start_step"] == 3 and resumed["steps"] == 5
    # metrics.json says it was resumed, and from where: steps is this attempt's, final_step the run's.
    assert (stopped["resumed_from_step"], stopped["resumed_from"]) == (None, None)
    assert (resumed["resumed_from_step"], resumed["resumed_from"], resumed["final_step"]) == (
        3, str(out / "checkpoints" / "3"), 8)
    assert resumed["previous_attempts"][0]["status"] == "preempted"
    np.testing.assert_allclose(usr1_at_3.resumed_losses, reference, rtol=1e-6, atol=0)


@pytest.mark.slow  # end-to-end runs
def test_a_signal_during_validation_stops_between_its_batches_and_resumes_exactly(tmp_path, monkeypatch, reference):
    # Was: the whole validation ran first (train.val_draws=2000 took 25 s between SIGTERM and exit).
    real, calls = train_module.make_step_functions, []

    def make_step_functions(*args, **kwargs):
        functions, state = real(*args, **kwargs)
        eval_loss = functions.eval_loss

        def counted(*batch_args):
            calls.append(len(calls) + 1)
            if len(calls) == 3:  # the third of step 4's 2 x 50 validation batches
                os.kill(os.getpid(), signal.SIGTERM)
            return eval_loss(*batch_args)
        functions.eval_loss = counted
        return functions, state

    out, command = tmp_path / "run", ("train.val_every=4", "train.val_draws=50", "train.resume=auto")
    with monkeypatch.context() as patch:
        patch.setattr(train_module, "make_step_functions", make_step_functions)
        stopped = run_tiny(out, *command)
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] == 4
    assert len(calls) <= 4  # at most one batch after the signal, of the 100
    assert (out / "checkpoints" / "4").is_dir() and len(_losses(out)) == 4
    resumed = run_tiny(out, *command)
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == 4 and resumed["final_step"] == 8
    np.testing.assert_allclose(_losses(out), reference, rtol=1e-6, atol=0)


@pytest.mark.slow  # end-to-end runs
def test_a_signal_during_evaluation_stops_at_once_and_auto_resume_evaluates(tmp_path, monkeypatch, devices):
    # Sampling and C2ST can take minutes after training; SLURM's SIGKILL follows SIGTERM within
    # seconds. Was: status preempted "before training", with no step, though training had finished.
    from gensbi_sharding.harness import posterior

    real, command = posterior.evaluate_observations, ("eval.enabled=true", "train.resume=auto")

    def signal_then_evaluate(**kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(**kwargs)

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(posterior, "evaluate_observations", signal_then_evaluate)
        stopped = run_tiny(out, *command)
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] == 8 and stopped["c2st"] is None
    assert stopped["error"].startswith("preempted by SIGTERM after training (step 8), before the evaluation "
                                       f"finished; checkpoint {out / 'checkpoints' / '8'}; continue with: run(cfg) with "
                                       f"cfg.train.resume='auto' and cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg)")
    resumed = run_tiny(out, *command)  # trains nothing, evaluates the saved state
    assert resumed["status"] == "ok" and (resumed["steps"], resumed["final_step"]) == (0, 8)
    assert 0.0 <= resumed["c2st"] <= 1.0 and len(_losses(out)) == 8
    # Nothing trained in this attempt: no made-up train loss or speed (was NaN and "nan samples/s"), but the
    # figures of the attempt that trained (issue 15: were null, and compile_s 0.0).
    from gensbi_sharding.harness.run_report import final_line

    assert resumed["training_figures_from_attempt"] == 1
    # r75: the compiled step's memory and collectives too (were null beside the copied speed)
    for key in ("final_train_loss", "samples_per_s", "median_step_s", "compile_s", "step_memory_bytes_per_device",
                "collective_bytes_per_step", "collectives"):
        assert resumed[key] == stopped[key] == resumed["previous_attempts"][0][key] is not None, key
    assert stopped["collective_bytes_per_step"] > 0
    assert final_line(resumed, out).startswith("done in ") and "nan" not in final_line(resumed, out)


@pytest.mark.slow  # an end-to-end run with evaluation
@pytest.mark.timeout(300, method="thread")  # the old sampler held the stop for hours: this bound fails it
def test_a_signal_while_an_observation_is_sampled_stops_between_its_ode_steps(tmp_path, monkeypatch, devices):
    # Was: the whole ODE integration one compiled program, so `eval.ode_steps=2147483647` held SIGTERM (and Ctrl-C)
    # until the observation under way was sampled, hours; only SIGKILL ended it.
    from gensbi_sharding.harness import posterior, tasks

    real = posterior.posterior_draws

    def signal_then_draw(*args, **kwargs):  # the signal comes as the observation's sampling starts
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(posterior, "posterior_draws", signal_then_draw)
    monkeypatch.setattr(tasks, "ODE_STEPS_MAX", 2**31 - 1)  # the check before the run refuses it since r62
    out = tmp_path / "run"
    stopped = run_tiny(out, "eval.enabled=true", "eval.ode_steps=2147483647")
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] == 8 and stopped["c2st"] is None
    assert stopped["error"].startswith("preempted by SIGTERM after training (step 8), before the evaluation finished")
    assert not list(out.glob("posterior_samples*")) and not (out / "c2st.csv").exists()


# Validation every 2 steps, patience 3, no EMA, a constant learning rate that makes the validation loss
# go up and down: the uninterrupted run finds its best at step 16 and stops at step 22.
# A run that stops early at step 22 (best 16); its theta space pinned, as two_moons' default moved to none.
EARLY_STOPPING = ("train.steps=24", "train.val_every=2", "train.patience=3", "train.ema_decay=0",
                  "train.learning_rate=0.05", "train.schedule=constant", "train.val_draws=2", "train.resume=auto",
                  "data.theta_transform=support")


def _run_capturing_weights(out: Path, *overrides: str) -> tuple[dict, list]:
    """``run_tiny`` plus the sampled weights training returned (as numpy, in tree order)."""
    from gensbi_sharding.harness import preemption

    real, weights = preemption.train_with_checkpoints, []

    def capture(functions, *args, **kwargs):
        result, preempted = real(functions, *args, **kwargs)
        weights.extend(np.asarray(leaf) for leaf in jax.tree.leaves(functions.weights(result.state)))
        return result, preempted

    preemption.train_with_checkpoints = capture
    try:
        return run_tiny(out, *overrides), weights
    finally:
        preemption.train_with_checkpoints = real


@pytest.fixture(scope="module")
def early_stopped(tmp_path_factory, devices):
    """The uninterrupted run with early stopping, its final sampled weights and its folder (only read)."""
    out = tmp_path_factory.mktemp("early") / "run"
    metrics, weights = _run_capturing_weights(out, *EARLY_STOPPING)
    assert metrics["status"] == "ok" and metrics["stopped_early"]
    assert (metrics["best_step"], metrics["final_step"]) == (16, 22)
    # Round 45: final_val_loss was the best validation's (step 16), named like final_train_loss, the last window's.
    assert metrics["final_val_loss"] == dict(metrics["val_history"])[22] != metrics["best_val_loss"]
    assert metrics["best_val_loss"] == dict(metrics["val_history"])[16] == min(v for _, v in metrics["val_history"])
    return metrics, weights, out


@pytest.mark.slow  # end-to-end runs
@pytest.mark.parametrize("stop_at", [19, 18, 22])
def test_a_resumed_run_keeps_its_early_stopping_and_ends_as_the_uninterrupted_one(
        tmp_path, monkeypatch, early_stopped, stop_at):
    # Was: the best weights, the patience count and the validations before the preemption were lost:
    # preempted at 13 and resumed, the run went on to step 24 and returned its best of steps 14..24.
    # 19: between validations, the best (16) found; 18: the validation of the checkpointed step is still
    # due (it runs first on resume); 22: the step early stopping ends at (resumed, it trains nothing).
    reference, reference_weights, _ = early_stopped
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        _signal_at(patch, stop_at)
        stopped = run_tiny(out, *EARLY_STOPPING)
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] == stop_at
    resumed, weights = _run_capturing_weights(out, *EARLY_STOPPING)
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == stop_at
    for name in ("final_step", "best_step", "stopped_early"):
        assert resumed[name] == reference[name], name
    assert [s for s, _ in resumed["val_history"]] == [s for s, _ in reference["val_history"]] == list(range(2, 23, 2))
    np.testing.assert_allclose([v for _, v in resumed["val_history"]], [v for _, v in reference["val_history"]],
                               rtol=1e-6, atol=0)
    for name in ("final_val_loss", "best_val_loss"):
        np.testing.assert_allclose(resumed[name], reference[name], rtol=1e-6, atol=0)
    assert len(weights) == len(reference_weights) > 0
    for got, want in zip(weights, reference_weights):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    with np.load(out / "train_losses.npz") as saved:  # losses.png's validation points: each once
        assert saved["val_step"].tolist() == list(range(2, 23, 2))


@pytest.mark.slow  # end-to-end runs
@pytest.mark.parametrize("overrides, best, final", [
    (("train.val_every=2", "train.checkpoint_every=4"), 8, 8),  # the last step is due: saved before its validation
    ((*EARLY_STOPPING, "train.checkpoint_every=11"), 16, 22),  # early stopping ends at a due step
    (EARLY_STOPPING, 16, 22)])  # the final save alone, after the loop
def test_the_final_checkpoint_tells_the_best_step_metrics_json_does(tmp_path, caplog, request, overrides, best, final):
    # Was: a due last step was checkpointed before its validation: resumed from it, the run logged "best step 6,
    # 3 validation(s)" while metrics.json (both runs') said best_step 8.
    import logging

    from gensbi_sharding.checkpoint import saved_info
    from gensbi_sharding.harness.state import EARLY_STOPPING as SAVED

    if overrides == EARLY_STOPPING:  # the module's uninterrupted early-stopping run is this run: read it
        first, _, folder = request.getfixturevalue("early_stopped")
    else:
        request.getfixturevalue("devices")
        folder = tmp_path / "a"
        first = run_tiny(folder, *overrides)
    history = [list(point) for point in first["val_history"]]
    assert (first["best_step"], first["final_step"]) == (best, final)
    saved = saved_info(folder / "checkpoints" / str(final))[SAVED]
    assert saved["best_step"] == best and saved["history"] == history
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        again = run_tiny(tmp_path / "b", *overrides, f"train.resume={folder}")
    lines = [r.getMessage() for r in caplog.records if "best step" in r.getMessage()]
    assert lines and all(f"best step {best}, {len(first['val_history'])} validation(s)" in line for line in lines)
    assert (again["steps"], again["best_step"]) == (0, best) and [list(p) for p in again["val_history"]] == history
    np.testing.assert_allclose(again["final_val_loss"], first["final_val_loss"], rtol=1e-6, atol=0)


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_ctrl_c_names_the_folder_to_continue_in(tmp_path, monkeypatch, caplog, reference):
    # Was "continue with the same command plus train.resume=auto": without hydra.run.dir that command
    # starts in a new timestamped folder, from scratch.
    import logging

    real = train_module.train

    def train(*args, on_step, **kwargs):
        def hook(at, state):
            done = on_step(at, state)
            if at == 5:
                raise KeyboardInterrupt  # Ctrl-C after step 5 (checkpoint 4 is saved)
            return done
        return real(*args, on_step=hook, **kwargs)

    out = tmp_path / "run"
    with monkeypatch.context() as patch, caplog.at_level(logging.ERROR, logger="gensbi_sharding"):
        patch.setattr(train_module, "train", train)
        with pytest.raises(KeyboardInterrupt):
            run_tiny(out, "train.checkpoint_every=4")
    assert json.loads((out / "metrics.json").read_text())["status"] == "interrupted"
    hints = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert hints == [f"interrupted (Ctrl-C); stopped at once, saved up to step 4 ({out / 'checkpoints' / '4'}); "
                     f"continue with: run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg)"]
    assert len(_losses(out)) == 5  # the curve of the steps run is kept (was: no train_losses.npz at all)
    resumed = run_tiny(out, "train.checkpoint_every=4", "train.resume=auto")  # the hint, followed
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == 4 and resumed["final_step"] == 8
    np.testing.assert_allclose(_losses(out), reference, rtol=1e-6, atol=0)  # the whole curve, as uninterrupted


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_ctrl_c_checkpoints_at_the_next_step_and_auto_resume_continues_exactly(tmp_path, monkeypatch, reference):
    # Was: Ctrl-C raised KeyboardInterrupt wherever the run was and saved nothing (train.checkpoint_every=0):
    # train.resume=auto then started from step 0. Now it stops as a preemption does, as "interrupted".
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        _signal_at(patch, 3, signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):  # the sweep and launch.py stop (exit 130), as before
            run_tiny(out, "train.resume=auto")
    stopped = json.loads((out / "metrics.json").read_text())
    # Was "preempted_at_step": 3 beside status "interrupted", as if a cluster had preempted it.
    assert stopped["status"] == "interrupted" and stopped["stopped_at_step"] == 3 and "preempted_at_step" not in stopped
    assert stopped["error"] == (f"interrupted by Ctrl-C (SIGINT) at step 3; checkpoint {out / 'checkpoints' / '3'}; "
                                f"continue with: run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg)")
    # As the previous version wrote it: a folder it left still resumes, its attempt recorded under the new name.
    older = {k: v for k, v in stopped.items() if k != "stopped_at_step"}
    outputs.write_json(out / "metrics.json", {**older, "preempted_at_step": 3, "previous_attempts": [
        {"status": "preempted", "preempted_at_step": 2, "wall_s": 1.0}]})
    resumed = run_tiny(out, "train.resume=auto")
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == 3 and resumed["final_step"] == 8
    assert [(a["status"], a["stopped_at_step"], "preempted_at_step" in a) for a in resumed["previous_attempts"]] == [
        ("preempted", 2, False), ("interrupted", 3, False)]
    np.testing.assert_allclose(_losses(out), reference, rtol=1e-6, atol=0)


@pytest.mark.slow  # an end-to-end run (a training run, stopped at step 3)
def test_a_second_ctrl_c_stops_at_once(tmp_path, monkeypatch, devices):
    real = train_module.train

    def train(*args, on_step, **kwargs):
        def hook(at, state):
            if at == 3:
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)  # raises KeyboardInterrupt here, before any save
            return on_step(at, state)
        return real(*args, on_step=hook, **kwargs)

    out = tmp_path / "run"
    monkeypatch.setattr(train_module, "train", train)
    with pytest.raises(KeyboardInterrupt):
        run_tiny(out)
    assert json.loads((out / "metrics.json").read_text())["status"] == "interrupted"
    assert committed_steps(out / "checkpoints") == []
    assert len(_losses(out)) == 3  # the curve of the steps run


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("where, saved", [("save", 4), ("close", 8), ("train", 4), ("finalizer", 5)])
def test_a_second_ctrl_c_records_the_newest_committed_checkpoint(tmp_path, monkeypatch, caplog, devices, where, saved):
    # Was: two Ctrl-C 50 ms apart, the second while checkpoint 4800 was saved or committed, printed Orbax's "[ERROR]
    # ... Save Finalize thread (save_finalize) failed" with a KeyboardInterrupt traceback, and metrics.json said
    # stopped_at_step: null though 4800 was committed (train.resume=auto continued from it). Now a second Ctrl-C
    # during a checkpoint's save or commit waits for it; wherever it comes, the record names the newest committed step.
    # One landing in a finalizer (tqdm.__del__) printed "Exception ignored in ..." with its traceback, and was lost.
    from gensbi_sharding.checkpoint import CheckpointWriter

    def two_ctrl_c():
        signal.raise_signal(signal.SIGINT)  # the first asks for a stop at the next step boundary
        signal.raise_signal(signal.SIGINT)  # the second stops at once (a save under way ends first)

    real_save, real_close, real_train = CheckpointWriter.save, CheckpointWriter.close, train_module.train
    closed = []

    def save(self, step, *args, **kwargs):  # Ctrl-C twice while checkpoint 4 is written
        done = real_save(self, step, *args, **kwargs)
        if step == 4 and where == "save":
            two_ctrl_c()
        return done

    def close(self):  # Ctrl-C twice as the run waits for its last checkpoint's commit
        if where == "close" and not closed:
            closed.append(self)
            two_ctrl_c()
        real_close(self)

    class Collected:
        def __del__(self):
            two_ctrl_c()

    def train(*args, on_step, **kwargs):  # Ctrl-C twice at step 5, after checkpoint 4, before any other
        def hook(at, state):
            if at == 5 and where == "train":
                two_ctrl_c()
            if at == 5 and where == "finalizer":  # the first stops the run at this step, after its checkpoint
                Collected()
            return on_step(at, state)
        return real_train(*args, on_step=hook, **kwargs)

    monkeypatch.setattr(CheckpointWriter, "save", save)
    monkeypatch.setattr(CheckpointWriter, "close", close)
    monkeypatch.setattr(train_module, "train", train)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_tiny(out, "train.checkpoint_every=2")
    assert unraisable == []
    metrics = json.loads((out / "metrics.json").read_text())
    assert committed_steps(out / "checkpoints")[-1] == saved
    assert (metrics["status"], metrics["stopped_at_step"], metrics["final_step"]) == ("interrupted", saved, saved)
    assert metrics["error"].startswith(f"interrupted (Ctrl-C); stopped at once, saved up to step {saved} "
                                       f"({out / 'checkpoints' / str(saved)}); continue with: "), metrics["error"]
    assert "Traceback" not in caplog.text and "save_finalize" not in caplog.text, caplog.text


@pytest.mark.slow  # end-to-end run with evaluation
def test_ctrl_c_during_c2st_keeps_that_whole_score_and_stops(tmp_path, monkeypatch, devices):
    # Was: scikit-learn's classifier caught the KeyboardInterrupt and returned a half-fitted model; the run
    # went on and reported status ok with that C2ST. Then: the run waited for the fits to end, then dropped the score.
    from gensbi_sharding.harness import evaluate

    real, calls = evaluate.c2st_scores, []

    def interrupted_scores(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # while observation 2 is scored
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate, "c2st_scores", interrupted_scores)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_tiny(out, "eval.enabled=true", "eval.observations=[1,2,3]")
    stopped = json.loads((out / "metrics.json").read_text())
    assert stopped["status"] == "interrupted" and stopped["c2st"] is None
    assert stopped["error"].startswith("interrupted by Ctrl-C (SIGINT) after training (step 8), before the "
                                       "evaluation finished")
    with open(out / "c2st.csv") as f:  # 2's score, waited for, is kept (its fits are whole); 3 never started
        assert [row["observation"] for row in csv.DictReader(f)] == ["1", "2"]
    assert sorted(p.name for p in out.glob("posterior_samples*.npz")) == ["posterior_samples.npz",
                                                                           "posterior_samples_2.npz"]
    # Resumed, the job keeps those two scores and scores observation 3 alone (was: all three again, minutes each
    # at sbibm's sizes, so a job preempted during every evaluation never finished).
    scored, files = (out / "c2st.csv").read_text(), {p.name: p.read_bytes() for p in out.glob("posterior_samples*")}
    shutil.copytree(out, fresh := tmp_path / "fresh")  # the stopped job again, with nothing scored
    for name in [*files, "c2st.csv", "posterior.png"]:
        (fresh / name).unlink(missing_ok=True)
    # Continued without an evaluation, or scoring other observations, the folder holds no score of the stopped
    # attempt under this attempt's names (was: its c2st.csv and samples beside a metrics.json with c2st null, or
    # posterior_samples_2.npz beside a c2st.csv of observation 3 alone): they are kept as <name>.attempt1<suffix>.
    for continued, overrides in ((tmp_path / "unscored", ("eval.enabled=false",)),
                                 (tmp_path / "other", ("eval.enabled=true", "eval.observations=[3]"))):
        shutil.copytree(out, continued)
        record = run_tiny(continued, *overrides, "train.resume=auto")
        assert record["status"] == "ok" and record["steps"] == 0, record.get("error")
        assert (continued / "c2st.attempt1.csv").read_text() == scored
        assert {p.name: p.read_bytes() for p in continued.glob("posterior_samples*.attempt1.npz")} == {
            name.replace(".npz", ".attempt1.npz"): data for name, data in files.items()}
        assert sorted(p.name for p in continued.glob("posterior_samples*.npz") if ".attempt" not in p.name) == (
            [] if record["c2st"] is None else ["posterior_samples.npz"])  # observation 3's, this attempt's
        if record["c2st"] is None:
            assert not (continued / "c2st.csv").exists()
        else:
            assert [r["observation"] for r in csv.DictReader((continued / "c2st.csv").read_text().splitlines())] == ["3"]
    resumed = run_tiny(out, "eval.enabled=true", "eval.observations=[1,2,3]", "train.resume=auto")
    assert resumed["status"] == "ok" and resumed["steps"] == 0 and len(calls) == 4  # one C2ST more: observation 3's
    assert (out / "c2st.csv").read_text().startswith(scored) and len((out / "c2st.csv").read_text().splitlines()) == 4
    assert all((out / name).read_bytes() == data for name, data in files.items())  # the kept files, untouched
    # the kept ones moved back; the stopped attempt's placement stays set aside (this attempt wrote its own)
    assert sorted(p.name for p in out.glob("*.attempt1.*")) == ["c2st.attempt1.csv", "sharding.attempt1.txt"]
    assert [row["observation"] for row in resumed["c2st_observations"]] == [1, 2, 3]
    assert resumed["c2st"] == pytest.approx(np.mean([row["c2st"] for row in resumed["c2st_observations"]]))
    # The kept scores are those a fresh evaluation of that checkpoint writes (the same seed: the same samples).
    again = run_tiny(fresh, "eval.enabled=true", "eval.observations=[1,2,3]", "train.resume=auto")
    assert again["steps"] == 0 and len(calls) == 7 and again["c2st_observations"] == resumed["c2st_observations"]
    for name in files:
        with np.load(out / name) as kept, np.load(fresh / name) as written:
            assert sorted(kept.files) == sorted(written.files)
            assert all(np.array_equal(kept[key], written[key]) for key in kept.files), name


@pytest.mark.slow
def test_signal_before_training_stops_at_once(tmp_path, monkeypatch, devices):
    from gensbi_sharding.harness import pipeline

    real = pipeline.build_pipeline

    def build_then_signal(*args, **kwargs):
        pipe = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return pipe

    monkeypatch.setattr(pipeline, "build_pipeline", build_then_signal)
    stopped = run_tiny(tmp_path / "run")
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] is None
    assert stopped["error"].startswith("preempted by SIGTERM before training (nothing trained: no checkpoint to save)")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_the_signal_is_handed_on_to_the_handler_installed_before_the_run():
    # Under hydra/launcher=slurm that handler is submitit's: it requeues the job and exits.
    seen = []
    before = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    try:
        with PreemptionWatch() as watch:
            with watch.at_step_boundaries():
                assert not watch.should_stop(1)
                os.kill(os.getpid(), signal.SIGUSR2)
                assert watch.should_stop(2) and seen == []  # inside the loop: only recorded
            watch.chain()
        assert seen == [signal.SIGUSR2]
        with pytest.raises(Preempted, match="preempted by SIGUSR2 before training"), PreemptionWatch() as watch:
            os.kill(os.getpid(), signal.SIGUSR2)  # outside the loop: only recorded (was: raised into any code)
            assert watch.signum == signal.SIGUSR2
            watch.check()  # the next step of the run stops
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_two_ctrl_cs_at_once_during_a_save_say_their_lines_in_the_order_pressed(monkeypatch, caplog):
    # The second press lands while the first one's handler runs (Python runs it there, nested), before the first
    # logged: was "Ctrl-C again: ..." first, then "received Ctrl-C: ... (Ctrl-C again stops at once)".
    import logging

    from gensbi_sharding.harness import interrupt_hold, preemption

    real, pressed = preemption.stop_level, []

    def second_press_lands():  # called by the first press's handler just before it logs
        if not pressed:
            pressed.append(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return real()

    monkeypatch.setattr(preemption, "stop_level", second_press_lands)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), PreemptionWatch():
        with pytest.raises(KeyboardInterrupt):
            with interrupt_hold.hold_interrupt():  # a checkpoint's save under way
                signal.raise_signal(signal.SIGINT)
                assert pressed  # both handled, the save goes on; the second raises as it ends
    said = [r.getMessage() for r in caplog.records if "Ctrl-C" in r.getMessage()]
    assert said == ["received Ctrl-C: stopping at the next step of the run (Ctrl-C again stops at once)",
                    "Ctrl-C again: stopping once the checkpoint under way is saved (Ctrl-C once more stops at once)"]


def test_a_signal_during_evaluation_says_when_the_run_stops(caplog):
    # Was: "received SIGTERM: stopping at the next step of the run" with training over, while the run went on
    # sampling and scoring the observation under way.
    import logging

    from gensbi_sharding.harness import interrupt_hold

    interrupt_hold.reset()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), PreemptionWatch() as watch:
        watch.training_done(20, "ck/20")
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(Preempted):
            watch.check()
    said = [r.getMessage() for r in caplog.records if "received" in r.getMessage()]
    assert said == ["received SIGTERM: stopping the evaluation under way before its next observation is sampled, "
                    "or once the one under way is scored and written; training is over, saved at "
                    "step 20, and a run past its evaluation ends as it would"]


def test_a_local_process_ignores_preemption_signals_once_its_run_ended():
    # Was: Python's default action again (the handlers before the run), so a SIGTERM as a distributed=local process
    # ended killed it (exit -15), which its parent reads as a process that never started its run.
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT)}
    try:
        with PreemptionWatch(ignore_after=True):
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        assert [signal.getsignal(s) for s in before if s != signal.SIGINT] == [signal.SIG_IGN] * 3
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]  # Ctrl-C is no preemption: as it was
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with PreemptionWatch():  # any other run: the handlers before it come back
            pass
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_signal_outside_a_run_is_held_for_the_next_run_to_answer():
    # launch.py holds SIGTERM/SIGUSR1/SIGUSR2 outside a run's watch (was: Python's default, a kill with no record).
    from gensbi_sharding.harness import signal_hold

    before = {s: signal.getsignal(s) for s in signal_hold.PREEMPT_SIGNALS}
    try:
        signal_hold.hold_preemption_signals()
        os.kill(os.getpid(), signal.SIGUSR1)  # before the run's watch (JAX importing, Hydra composing)
        with pytest.raises(Preempted, match="^preempted by SIGUSR1 before training"), PreemptionWatch() as watch:
            assert watch.signum == signal.SIGUSR1 and signal_hold.take_held() == []  # the watch took it over
            watch.check()  # the run's first step answers it
        os.kill(os.getpid(), signal.SIGTERM)  # after the run (exiting, between a sweep's jobs): held again
        assert signal_hold.take_held() == [signal.SIGTERM]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_second_ctrl_c_of_a_local_parent_says_no_orbax_or_jax_notes(tmp_path, monkeypatch, caplog):
    # Was: distributed=local's parent, which never ran a job's setup, listed the checkpoints for the record with
    # Orbax after its second Ctrl-C: a dozen absl/jax INFO lines on the console ("CheckpointManager init", "Unable to
    # initialize backend 'tpu'", "Closing _NonBlockingMetadataStore" x3) before its one line.
    import logging

    from gensbi_sharding.harness import run as run_module

    def second_ctrl_c(cfg, out, metrics, watch):  # the processes started, made the checkpoints folder, saved none
        (out / "checkpoints").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "run_local_job", second_ctrl_c)
    levels = {name: logging.getLogger(name).level for name in ("jax", "absl")}
    try:
        for name in levels:  # as in a fresh parent process (an earlier test's run set them)
            logging.getLogger(name).setLevel(logging.NOTSET)
        with caplog.at_level(logging.INFO), pytest.raises(KeyboardInterrupt):
            run_tiny(tmp_path / "run", "mesh=auto", "distributed.local_processes=2")
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    noise = [f"{r.name}: {r.getMessage()[:60]}" for r in caplog.records if r.name.split(".")[0] in ("jax", "absl")]
    assert noise == []
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["error"] == "interrupted (Ctrl-C); stopped at once, with no checkpoint to continue from", metrics


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.fast_cases(1)
def test_a_signal_held_while_the_run_started_is_recorded_once_its_folder_is_claimed(tmp_path, monkeypatch, processes):
    # Was: a SIGTERM while launch.py imported JAX or Hydra composed killed the process with no record (exit 143);
    # distributed=local's parent, which never reaches a step of its own, went on to start its processes.
    from gensbi_sharding.harness import run as run_module
    from gensbi_sharding.harness import signal_hold, stop_watchdog

    monkeypatch.setattr(run_module, "run_local_job", lambda *args: pytest.fail("processes started after the signal"))
    monkeypatch.setattr(stop_watchdog, "GRACE_S", 0.05)
    before = {s: signal.getsignal(s) for s in signal_hold.PREEMPT_SIGNALS}
    try:
        signal_hold.take_held()
        signal_hold.hold_preemption_signals()
        os.kill(os.getpid(), signal.SIGTERM)
        stopped = run_tiny(tmp_path / "run", "mesh=none", f"distributed.local_processes={processes}")
        # The watchdog, armed after the watch took the signal over, answers it too where a setup step holds the run.
        fired = []
        with PreemptionWatch() as watch:
            watch.signum = signal.SIGTERM
            stop_watchdog.StopWatchdog(watch, fired.append)
            time.sleep(0.3)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] is None, stopped
    assert stopped["error"].startswith("preempted by SIGTERM before training (nothing trained: no checkpoint to save)")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "preempted"
    assert fired == [signal.SIGTERM]


@pytest.mark.parametrize("recorded, words", [
    ("", "preempted by a preemption notice at step 111"),  # the parent received nothing: JAX's service did
    (str(int(signal.SIGINT)), "interrupted by Ctrl-C (SIGINT) at step 111"),  # the parent's Ctrl-C
    (str(int(signal.SIGTERM)), "preempted by SIGTERM at step 111"),  # SLURM's SIGTERM to the parent
    (str(int(signal.SIGUSR1)), "preempted by SIGUSR1 at step 111"),
])
def test_a_local_process_words_its_stop_by_the_signal_its_parent_received(tmp_path, monkeypatch, recorded, words):
    # Was: Ctrl-C of a distributed=local parent reached its processes as SIGTERM, which JAX's preemption
    # service takes: they wrote "preempted by a preemption notice at step 111" under status interrupted.
    from gensbi_sharding.harness.parent_signal import PARENT_SIGNAL_ENV, record_parent_signal, stop_signal

    received = tmp_path / "signal"
    received.write_text("")  # as the parent creates it
    if recorded:
        record_parent_signal(received, int(recorded))
        record_parent_signal(received, signal.SIGTERM)  # a later signal: the first one stays
    monkeypatch.setenv(PARENT_SIGNAL_ENV, str(received))
    stop = Preempted(None, 111, tmp_path / "checkpoints" / "111")
    assert str(stop) == f"{words}; checkpoint {tmp_path / 'checkpoints' / '111'}"
    assert stop.interrupted == (recorded == str(int(signal.SIGINT)))
    # A terminal's Ctrl-C reaches the processes themselves too; outside distributed=local nothing changes.
    assert stop_signal(signal.SIGINT, {PARENT_SIGNAL_ENV: str(received)}) == signal.SIGINT
    assert stop_signal(signal.SIGUSR2, {}) == signal.SIGUSR2 and stop_signal(None, {}) is None
    assert stop_signal(None, {PARENT_SIGNAL_ENV: str(tmp_path / "gone")}) is None  # the parent removed it


@pytest.mark.parametrize("status, resume_auto, refused", [
    ("preempted", True, None), ("interrupted", True, None), ("error", True, None),
    ("ok", True, "(status ok): this folder holds an earlier run's outputs, which are never overwritten; "
                 "choose another hydra.run.dir"),
    ("preempted", False, "(status preempted): this folder holds an earlier run's outputs, which are never "
                         "overwritten; rerun with train.resume=auto to start it again in this folder (it saved no "
                         "complete checkpoint: it trains from step 0)"),
])
def test_only_an_unfinished_run_may_be_continued_in_its_folder(tmp_path, status, resume_auto, refused):
    outputs.write_json(tmp_path / "metrics.json", {"status": status})
    if refused:
        with pytest.raises(FileExistsError) as err:
            run_folder.ensure_fresh(tmp_path, resume_auto=resume_auto)
        assert refused in str(err.value)
    else:
        assert run_folder.ensure_fresh(tmp_path, resume_auto=resume_auto) == {"status": status}


def test_a_refused_sweep_folder_names_the_commands_that_continue_its_unfinished_jobs(tmp_path, capsys):
    # Was "rerun with train.resume=auto": the sweep rerun so is refused for its completed job 0.
    from omegaconf import OmegaConf

    sweep = tmp_path / "multirun"
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok"})
    outputs.write_json(sweep / "1" / "metrics.json", {"status": "interrupted"})
    (sweep / "1" / ".hydra").mkdir()
    (sweep / "1" / ".hydra" / "overrides.yaml").write_text("- model.width=24\n- rule.embed=[data,model]\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "train": {"resume": "auto"}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err
    # Was "[ERROR] <sweep>/0/metrics.json already exists": the sweep folder first, its completed jobs counted.
    assert printed.startswith(f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 2 jobs complete (0); job 0: "
                              f"{sweep / '0' / 'metrics.json'} already exists (status ok)")
    assert printed.rstrip().endswith("continue its one unfinished job with: python launch.py model.width=24 "
                                     f"'rule.embed=[data,model]' train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '1'}")
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "preempted"})  # no job completed: rerun it whole
    callback = folder_claim.RefuseCompletedRun()
    callback.on_multirun_start(config)
    callback.on_multirun_end(config)


def test_a_refused_sweep_names_the_completed_jobs_own_overrides_to_train_it_further(tmp_path, capsys):
    # Was: the command carried the sweep's own comma lists (rule=replicated,tensor), which Hydra refuses
    # under hydra.mode=RUN, and not the values job 0 ran with.
    from omegaconf import OmegaConf

    sweep = tmp_path / "multirun"
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok", "final_step": 8})
    (sweep / "0" / "checkpoints" / "8").mkdir(parents=True)
    (sweep / "0" / ".hydra").mkdir()
    (sweep / "0" / ".hydra" / "overrides.yaml").write_text("- train.steps=8\n- rule=replicated\n- mesh.model_axis=1\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}, "overrides": {"task": [
        "train.steps=8", "rule=replicated,tensor", "mesh.model_axis=1,2"]}}, "train": {"resume": None, "steps": 8}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err
    assert ("into a new folder: python launch.py rule=replicated mesh.model_axis=1 train.steps=16 "
            f"train.resume={sweep / '0'} hydra.mode=RUN hydra.run.dir={tmp_path / 'multirun-0-steps16'}") in printed
    assert "rule=replicated,tensor" not in printed


@pytest.mark.parametrize("multirun", [False, True])
def test_an_output_folder_that_is_a_file_is_named_with_the_override_to_change(tmp_path, capsys, multirun):
    # Was: "[Errno 17] File exists: '<path>'", or a NotADirectoryError traceback for a folder under a file.
    from omegaconf import OmegaConf

    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    afile = tmp_path / "afile"
    afile.write_text("")
    for folder in (afile, afile / "sub"):
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(folder)}, "run": {"dir": str(folder)}},
                                   "distributed": {"mode": "none", "process_id": None}})
        callback = folder_claim.RefuseCompletedRun()
        with pytest.raises(SystemExit):
            (callback.on_multirun_start if multirun else callback.on_run_start)(config)
        printed = capsys.readouterr().err
        assert printed.strip() == (f"[ERROR] {key}={folder}: {afile} is a file, not a folder; "
                                   f"choose another {key}")
    assert afile.read_text() == ""


def test_a_run_and_a_sweep_never_share_a_folder(tmp_path, capsys):
    # Was: a sweep into a run's folder (or a run into a sweep's) was accepted, mixing job folders,
    # multirun.yaml and the sweep summary with the run's own files.
    from omegaconf import OmegaConf

    run_dir, sweep = tmp_path / "run", tmp_path / "sweep"
    outputs.write_json(run_dir / "metrics.json", {"status": "ok"})
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("{}\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(run_dir)}}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.sweep.dir={run_dir} holds a single run's outputs ({run_dir / 'metrics.json'}, status ok): "
        "a sweep never writes into a run's folder; choose another hydra.sweep.dir")
    config = OmegaConf.create({"hydra": {"run": {"dir": str(sweep)}},
                               "distributed": {"mode": "none", "process_id": None}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_run_start(config)
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.run.dir={sweep} is a sweep's folder ({sweep / 'multirun.yaml'}): a run never writes "
        "into a sweep's folder; choose another hydra.run.dir (a sweep's job: hydra.run.dir=<sweep>/<job>)")
    assert sorted(p.name for p in sweep.iterdir()) == ["multirun.yaml"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.json"]


# A status no run writes (edited: {"status": 5}) was a finished run's: "already exists (status 5)", train it further.
# An object without a status ({}, edited) was "status unknown" wherever listed or refused: damaged, named, likewise.
@pytest.mark.parametrize("text", ["", "{trunc", "[1, 2]", '{"status": 5}', '{"status": "done", "final_step": 20}',
                                  "{}", '{"final_step": 20}'])
def test_a_damaged_metrics_json_is_named_and_its_folder_kept(tmp_path, capsys, text):
    # Was "[ERROR] JSONDecodeError: Expecting property name ..." (and Hydra's warning about its callback),
    # naming neither the file nor what to do; a sweep refused over it raised again inside its own refusal.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.sweep_rows import summary_rows

    run_dir, sweep = tmp_path / "run", tmp_path / "sweep"
    for folder in (run_dir, sweep / "0"):
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(text)
    outputs.write_json(sweep / "1" / "metrics.json", {"status": "ok"})
    with pytest.raises(FileExistsError) as err:
        run_folder.ensure_fresh(run_dir, resume_auto=True)
    assert str(err.value).startswith(f"{run_dir / 'metrics.json'} cannot be read (")
    assert str(err.value).endswith("this folder holds an earlier run's damaged record, which is never overwritten; "
                                   "choose another hydra.run.dir (or hydra.sweep.dir), or move "
                                   f"{run_dir / 'metrics.json'} aside")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "train": {"resume": "auto"}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert capsys.readouterr().err.startswith(  # a multirun's refusal names hydra.sweep.dir first (was job 0's path)
        f"[ERROR] hydra.sweep.dir={sweep}: 1 of its 2 jobs complete (1); job 0: {sweep / '0' / 'metrics.json'} "
        "cannot be read (")
    assert [(row["job"], row["metrics"]["status"]) for row in summary_rows(sweep)] == [("0", "damaged"), ("1", "ok")]
    assert (run_dir / "metrics.json").read_text() == text
    if "status" in text:
        assert f"cannot be read (its status {json.dumps(json.loads(text)['status'])} is not one a run writes: ok, " \
               "error, preempted, interrupted, stopped)" in str(err.value)


def test_a_sweep_subdir_that_gives_every_job_one_folder_is_refused_at_once(tmp_path, capsys):
    # Was: job 1 was refused job 0's folder only after Hydra had written its .hydra/ record there, so the
    # summary showed job 0's results under job 1's overrides (rule=tensor for an fsdp run).
    from omegaconf import OmegaConf

    sweep = tmp_path / "sweep"
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "job"},
                                         "overrides": {"task": ["rule=fsdp,tensor"]}}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.sweep.subdir=job gives all 2 jobs of this sweep one folder ({sweep / 'job'}); leave "
        "hydra.sweep.subdir out (a folder per job number) or make it differ per job, e.g. "
        "hydra.sweep.subdir='${hydra.job.num}_job'")
    for subdir, task in (("job", ["rule=fsdp"]), ("${hydra.job.num}_job", ["rule=fsdp,tensor"])):  # one job; per job
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": subdir},
                                             "overrides": {"task": task}}})
        callback = folder_claim.RefuseCompletedRun()
        callback.on_multirun_start(config)
        callback.on_multirun_end(config)


def test_a_process_that_failed_before_joining_records_nothing_in_a_folder_it_may_not_use(tmp_path, monkeypatch):
    # A process other than 0 that failed before JAX joined the processes claims the folder to record its
    # error; a folder it may not use (here a file) raised a ConfigError out of its error path.
    from omegaconf import OmegaConf

    monkeypatch.delenv(processes.LOCAL_CHILD_ENV, raising=False)
    (tmp_path / "afile").write_text("")
    cfg = OmegaConf.create({"train": {"resume": None, "steps": 8}, "dry_run": False,
                            "distributed": {"mode": "explicit", "process_id": 1}})
    folder = run_folder.RunFolder(tmp_path / "afile", cfg)
    assert folder.owner is False and folder.records() is False
    assert (tmp_path / "afile").read_text() == ""


def test_a_sweep_rerun_with_its_values_reordered_never_continues_another_jobs_checkpoint(tmp_path, capsys):
    # Was: job 0 (now lr 3e-3) continued folder 0, the lr 1e-3 job's checkpoint, without a word.
    from omegaconf import OmegaConf

    sweep = tmp_path / "sweep"
    for number, lr in enumerate(("0.001", "0.003")):
        outputs.write_json(sweep / str(number) / "metrics.json", {"status": "preempted"})
        (sweep / str(number) / ".hydra").mkdir()
        (sweep / str(number) / ".hydra" / "overrides.yaml").write_text(
            f"- train.learning_rate={lr}\n- train.steps={40 if number else 20}\n")

    def claim(task):
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"},
                                             "overrides": {"task": task}}, "train": {"resume": "auto"}})
        callback = folder_claim.RefuseCompletedRun()
        callback.on_multirun_start(config)
        callback.on_multirun_end(config)

    with pytest.raises(SystemExit):
        claim(["train.learning_rate=0.003,0.001", "train.steps=20"])
    assert capsys.readouterr().err.strip() == (
        f"[ERROR] hydra.sweep.dir={sweep}: job 0 of this sweep (train.learning_rate=0.003) would continue folder "
        f"{sweep / '0'}, which ran train.learning_rate=0.001: train.resume=auto continues each job in the folder of "
        "its number; rerun the sweep with its values in the order it first ran, or choose another hydra.sweep.dir")
    claim(["train.learning_rate=0.001,0.003", "train.steps=20"])  # as it first ran (job 1 continued alone to 40)
    with pytest.raises(SystemExit):  # a key the first sweep left at its default
        claim(["train.learning_rate=0.001,0.003", "train.steps=20", "seed=1,2"])
    assert f"would continue folder {sweep / '0'}, which ran seed unset: " in capsys.readouterr().err


# ------------------------------------------------------------------ real signals to launch.py

@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_completed_run_names_the_command_that_trains_it_further(tmp_path, reference_run):
    # Was: "choose another hydra.run.dir", and a new folder with train.resume=auto starts from step 0,
    # whose hint named the folder just refused. train.resume=<the run> into a new folder continues it.
    out = shutil.copytree(reference_run, tmp_path / "run")  # a completed run of the tiny config (its own copy)
    assert json.loads((out / "metrics.json").read_text())["status"] == "ok"
    refused = run_tiny(out, "train.resume=auto", "train.steps=16")
    assert refused["status"] == "error"
    # run(cfg) from Python: in the settings it sets (round 46; was launch.py's overrides, hydra.run.dir)
    found = re.search(r"never overwritten; choose another cfg.output_dir; to train it further from its final "
                      r"checkpoint \(step 8\) into a new folder: the same call with (.*); set cfg.output_dir in "
                      r"omegaconf.open_dict\(cfg\)$", refused["error"])
    assert found, refused["error"]
    assert found.group(1) == f"cfg.train.steps=16 and cfg.train.resume='{out}' and cfg.output_dir='{out}-steps16'"
    # The hint, followed (these overrides, from a copy of this completed run), and the run it makes: checked on
    # trained_further's launch of it (test_the_printed_command_trains_a_completed_run_further), not run again here.


def test_the_train_further_command_keeps_the_overrides_and_a_fresh_folder(tmp_path):
    from gensbi_sharding.harness.further_hint import train_further_hint

    run = tmp_path / "sw" / "r1"  # job r1 of the sweep sw: its new folder beside the sweep's, not in it
    (tmp_path / "sw-r1-steps40").mkdir()  # taken: the next free name
    assert train_further_hint(run, 20, 40, ["experiment=quick", "train.steps=40", "train.resume=auto",
                                            f"hydra.run.dir={run}", "model.width=a b"], multirun=True) == (
        f"; to train it further from its final checkpoint (step 20) into a new folder: python launch.py "
        f"experiment=quick 'model.width=a b' train.steps=40 train.resume={run} hydra.mode=RUN "
        f"hydra.run.dir={tmp_path / 'sw-r1-steps40-2'}")
    # train.steps not above the checkpoint's (the command would train nothing): a step to reach, twice the saved one.
    # Was "train.steps=<more than 20> ... hydra.run.dir=<run>-stepsmore": pasted, bash read "<more" as a redirection
    # ("bash: more: No such file or directory") and ran nothing.
    hint = train_further_hint(run, 20, 20, ["experiment=quick"])  # a single run (sw holds no multirun.yaml): beside it
    assert hint == (f"; to train it further from its final checkpoint (step 20) into a new folder: python launch.py "
                    f"experiment=quick train.steps=40 train.resume={run} hydra.run.dir={run}-steps40")
    assert "<" not in hint and ">" not in hint  # nothing the shell reads as a redirection
    assert train_further_hint(run, None, 40, None) == ""  # no checkpoint: nothing to continue from


@pytest.mark.slow
def test_a_sweeps_job_trains_further_beside_the_sweep_never_in_it(tmp_path):
    # Was: for job 0 of a sweep, "... hydra.run.dir=<sweep>/0-stepsmore"; run as printed, it became a row of the
    # sweep's summary (with a train.steps column the sweep never swept) and the sweep's refusal counted "3 of its 3
    # jobs complete (0, 0-stepsmore, 1)" for a 2-job sweep.
    from gensbi_sharding.harness import summary
    from gensbi_sharding.harness.further_hint import train_further_hint

    sweep = tmp_path / "sw"
    for job, rule in ((0, "fsdp"), (1, "tensor")):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": "ok", "rule": rule, "final_step": 20})
        (sweep / str(job) / ".hydra").mkdir()
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(f"- rule={rule}\n")
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task: ['rule=fsdp,tensor']\n")
    for multirun in (True, False):  # the sweep refused, or its job continued alone (Hydra's RUN mode)
        hint = train_further_hint(sweep / "0", 20, None, ["rule=fsdp"], multirun=multirun)
        assert hint.endswith(f"hydra.run.dir={tmp_path / 'sw-0-steps40'}"), hint
    (tmp_path / "sw-0-steps40").mkdir()
    assert train_further_hint(sweep / "0", 20, 40, ["rule=fsdp"]).endswith(f"hydra.run.dir={tmp_path / 'sw-0-steps40-2'}")
    assert [row["job"] for row in summary.refresh_sweep_summary(sweep / "0").rows] == ["0", "1"]


#: What a tiny launch imports inside its functions beyond RUN_IMPORTS: two_moons' simulator (numpyro, equinox, scipy),
#: Hydra's sweeper and launchers (found by Hydra's plugin scan), a sweep's summary figure. None starts a thread or
#: JAX's backend, so forking after them is safe.
LAUNCH_IMPORTS = ("sbibm_jax.tasks.two_moons.task", "numpyro", "equinox", "gensbi_sharding.harness.ema",
                  "hydra._internal.core_plugins.basic_sweeper", "hydra._internal.core_plugins.basic_launcher",
                  "hydra_plugins.hydra_submitit_launcher.submitit_launcher", "mpl_toolkits.mplot3d")


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """The module's launch.py processes, forked from one process that imported launch.py's modules once
    (tests/fork_server.py: ~1.5 s of CPU less per launch); each still runs launch.py from its first line.
    Beside a training run's imports (RUN_IMPORTS), those its task's simulator and a sweep import (~0.5 s a launch)."""
    from fork_server import RUN_IMPORTS, ForkServer

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("HYDRA_FULL_ERROR", None)
    server = ForkServer(tmp_path_factory.mktemp("forks"), env, imports=(*RUN_IMPORTS, *LAUNCH_IMPORTS))
    yield server
    server.close()


def _launch(forks, *args, env=None, flags=(), cwd, umask=None, start_new_session=False):
    """``python launch.py <flags> <TINY> <args>`` in ``cwd`` (a handle as subprocess.Popen's, output combined)."""
    return forks.launch([*flags, *TINY, *args], cwd=cwd, env=env, umask=umask, start_new_session=start_new_session)


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path} (exit {proc.poll()})")


def _signal_until_it_exits(proc: subprocess.Popen, timeout_s: float = 120) -> int:
    """SIGTERM ``proc`` every 20 ms until it exits, as a scheduler repeating its notice; returns how many were sent."""
    sent, deadline = 0, time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
            sent += 1
        time.sleep(0.02)
    return sent


@pytest.fixture(scope="module")
def requeued(tmp_path_factory, forks):
    """A ``train.resume=auto`` launch.py run of 100 steps (4 devices from XLA_FLAGS, umask 002) sent SIGTERM every
    20 ms from the moment it trains until it exits, then the same command again (requeued).

    Shared by the test of the repeated signal and the test of the requeue (each launch costs ~5 s of CPU); a single
    SIGTERM to a training launch.py is the preempted sweep's (``preempted_sweep``). What the stop left is read
    before the requeue.
    """
    tmp_path = tmp_path_factory.mktemp("requeued")
    out, cwd = tmp_path / "run", tmp_path
    command = ("train.steps=100", "train.log_every=50", "train.resume=auto", f"hydra.run.dir={out}")
    # The session's compile flags kept (conftest): the losses are compared with a run of this process.
    env = {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip()}
    first = _launch(forks, *command, env=env, cwd=cwd, umask=0o002)
    try:
        _wait_for(out / "launch.log", "[5/7] train", first)
        sent = _signal_until_it_exits(first)  # from while the step compiles, or a few steps in
        log = first.communicate(timeout=60)[0]
    finally:
        first.kill()
    stopped = json.loads((out / "metrics.json").read_text())
    at = stopped["stopped_at_step"]
    checkpoint = at is not None and (out / "checkpoints" / str(at)).is_dir()
    launch_log = (out / "launch.log").read_text()
    again = _launch(forks, *command, env=env, cwd=cwd, umask=0o002)
    again_log = again.communicate(timeout=300)[0]
    return SimpleNamespace(tmp_path=tmp_path, out=out, first=first, sent=sent, log=log, stopped=stopped,
                           checkpoint=checkpoint, launch_log=launch_log, again=again, again_log=again_log)


@pytest.mark.slow  # a launch.py process (requeued's first)
@pytest.mark.timeout(400)
def test_sigterm_again_while_a_preempted_run_records_and_exits_keeps_exit_75(requeued):
    # Was: exit 143 (killed by SIGTERM): once the run had recorded its stop, PreemptionWatch gave SIGTERM back to
    # Python's default action while the process still logged, exited and shut JAX down; SLURM signals repeatedly.
    out, metrics = requeued.out, requeued.stopped
    assert requeued.first.returncode == EXIT_PREEMPTED and requeued.sent > 1, (requeued.sent, requeued.log[-3000:])
    assert metrics["status"] == "preempted" and metrics["stopped_at_step"] is not None, metrics
    assert metrics["error"].endswith(f"train.resume=auto hydra.run.dir={out}"), metrics["error"]
    assert requeued.checkpoint


@pytest.fixture(scope="module")
def trained_further(tmp_path_factory, reference_run, forks):
    """The refusal of a completed run continued in its folder, then the command it prints, run, and sent SIGTERM
    every 20 ms from its last line ("done in") until it exits (one launch for the test of the command and the test of
    a signal after a completed run: each launch costs ~5 s of CPU)."""
    tmp_path = tmp_path_factory.mktemp("further")
    # The completed run: the tiny config's (train.checkpoint_every=0, the default), copied from the module's
    # reference run (a launch of its own cost ~5 s of CPU); what is launched is the refusal and its command.
    out = shutil.copytree(reference_run, tmp_path / "r1")
    completed = json.loads((out / "metrics.json").read_text())["status"]
    refused = _launch(forks, "train.checkpoint_every=0", "train.resume=auto", "train.steps=16",
                      f"hydra.run.dir={out}", cwd=tmp_path)
    text = refused.communicate(timeout=300)[0]
    # launch.py's path as typed in tmp_path (was "python launch.py", which fails pasted there)
    command = re.search(rf"into a new folder: {re.escape(command_for(folder=tmp_path))} (.*)$", text, re.M)
    further = sent = log = None
    if command:
        further = forks.launch(shlex.split(command.group(1)), cwd=tmp_path)
        try:
            _wait_for(tmp_path / "r1-steps16" / "launch.log", "done in ", further)
            sent = _signal_until_it_exits(further)
            log = further.communicate(timeout=60)[0]
        finally:
            further.kill()
    return SimpleNamespace(tmp_path=tmp_path, out=out, completed=completed, refused=refused, text=text,
                           command=command, further=further, sent=sent, log=log)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_printed_command_trains_a_completed_run_further(trained_further):
    tmp_path, out, text = trained_further.tmp_path, trained_further.out, trained_further.text
    assert trained_further.completed == "ok"
    assert trained_further.refused.returncode == 1
    command = trained_further.command
    assert command, text[-3000:]
    args = shlex.split(command.group(1))
    assert args[-3:] == ["train.steps=16", f"train.resume={out}", f"hydra.run.dir={out}-steps16"]
    further = trained_further.further
    assert further.returncode == 0, trained_further.log[-3000:]
    metrics = json.loads((tmp_path / "r1-steps16" / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["resumed_from_step"] == 8 and metrics["final_step"] == 16
    joined = _losses(tmp_path / "r1-steps16")  # the finished run's curve, then the 8 new steps
    assert metrics["steps"] == 8 and len(joined) == 16
    np.testing.assert_array_equal(joined[:8], _losses(out))


@pytest.mark.slow  # a launch.py process (trained_further's last)
@pytest.mark.timeout(400)
def test_sigterm_after_a_completed_run_keeps_its_exit_code(trained_further):
    # Was: exit 143 (killed by SIGTERM) with metrics.json's status ok: a signal while the process shut down (Python
    # gives its handlers back to the default action then) killed it; SLURM saw a failure of a finished run.
    proc = trained_further.further
    assert proc is not None, trained_further.text[-3000:]  # the command was printed
    assert proc.returncode == 0 and trained_further.sent > 1, (proc.returncode, trained_further.sent,
                                                               trained_further.log[-3000:])
    assert json.loads((trained_further.tmp_path / "r1-steps16" / "metrics.json").read_text())["status"] == "ok"


def _catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a handler of its own for SIGTERM (Linux: ``SigCgt`` of /proc/PID/status)."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        status = Path(f"/proc/{pid}/status").read_text()
        return bool(int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.M).group(1), 16) >> (signal.SIGTERM - 1) & 1)
    return False


@pytest.mark.slow  # a launch.py process
@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_sigterm_while_launch_py_starts_is_recorded_by_the_run(tmp_path):
    # Was: no handler until run() entered its PreemptionWatch, ~3 s after the start (JAX imported, Hydra composed,
    # the folder made): a SIGTERM before it killed the process (143) with no record. Now held from launch.py's first
    # lines (~0.1-0.25 s after the start, the interpreter's own start-up; measured on the 2-core machine).
    out = tmp_path / "run"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("HYDRA_FULL_ERROR", None)
    # A process of its own, not forked (the fork server imported JAX before): what is timed is its own start.
    proc = subprocess.Popen([sys.executable, str(REPO / "launch.py"), *TINY, "mesh=none", "train.steps=2000",
                             f"hydra.run.dir={out}"], env=env, text=True, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not _catches_sigterm(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert "jaxlib" not in Path(f"/proc/{proc.pid}/maps").read_text(), "caught only once JAX was imported"
        assert not out.exists(), "SIGTERM was only caught once the run's folder existed"
        proc.send_signal(signal.SIGTERM)
        log = proc.communicate(timeout=120)[0]
    finally:
        proc.kill()
    assert proc.returncode == EXIT_PREEMPTED, log[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "preempted" and metrics["stopped_at_step"] is None, metrics
    assert metrics["error"].endswith(f"train.resume=auto hydra.run.dir={out}"), metrics["error"]
    assert "received SIGTERM: stopping at the next step of the run" in log


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_sigterm_then_the_same_command_requeued(requeued, devices):
    # XLA_FLAGS names 4 devices and nothing else does: the run uses them (case 6). umask 002:
    # every file is group-writable as Hydra's own are (case 4).
    tmp_path, out, stopped = requeued.tmp_path, requeued.out, requeued.stopped
    assert requeued.first.returncode == EXIT_PREEMPTED, requeued.log[-3000:]
    assert stopped["status"] == "preempted" and 1 <= stopped["stopped_at_step"] < 100
    assert stopped["device_count"] == 4 and "cpu_count=4 (from XLA_FLAGS)" in requeued.launch_log

    assert requeued.again.returncode == 0, requeued.again_log[-3000:]
    done = json.loads((out / "metrics.json").read_text())
    assert done["status"] == "ok" and done["start_step"] == stopped["stopped_at_step"]
    reference = tmp_path / "reference"
    # The same (4, 1) mesh, on 4 of this process's 8 devices.
    assert run_tiny(reference, "mesh.devices=[0,1,2,3]", "train.steps=100", "train.log_every=50")["status"] == "ok"
    np.testing.assert_allclose(_losses(out), _losses(reference), rtol=1e-6, atol=0)
    files = [p for p in out.rglob("*") if p.is_file()]  # Orbax's checkpoint files too
    assert {str(p.relative_to(out)): oct(p.stat().st_mode & 0o777) for p in files} == \
        {str(p.relative_to(out)): "0o664" for p in files}


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ctrl_c_of_a_local_parent_is_an_interruption_in_its_processes_too(tmp_path, forks):
    # Was: status interrupted, but error "preempted by a preemption notice at step N" (the processes
    # get SIGTERM from the parent). Only the parent gets the SIGINT here, as from `kill -INT`.
    out = tmp_path / "run"
    parent = _launch(forks, "rule=fsdp", "mesh.model_axis=2", "train.steps=100000", "distributed=local",
                     f"hydra.run.dir={out}", cwd=tmp_path)
    try:
        _wait_for(out / "process_1.log", "[5/7] train", parent)
        parent.send_signal(signal.SIGINT)
        log = parent.communicate(timeout=180)[0]
    finally:
        parent.kill()
    assert parent.returncode == 130, log[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "interrupted" and metrics["process_exit_codes"] == [130, 130], metrics
    assert re.match(r"interrupted by Ctrl-C \(SIGINT\) (at step \d+|before training)", metrics["error"]), \
        metrics["error"]
    assert "preempt" not in metrics["error"].replace(str(tmp_path), "<tmp>")  # a folder's name may say it


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_terminals_ctrl_c_of_a_local_job_says_each_thing_once(tmp_path, forks):
    # A terminal's Ctrl-C reaches the parent and its processes (one process group). Was: "received Ctrl-C",
    # the [ERROR] naming the command and "interrupted: the job's metrics.json records it" once per process
    # (the last untagged, three times), with JAX's "Reached preemption sync point" and XLA's "SIGTERM caught".
    out = tmp_path / "run"
    # The job of the test before (rule=fsdp on data=4 x model=2): its processes load the programs that one compiled.
    parent = _launch(forks, "rule=fsdp", "mesh.model_axis=2", "train.steps=100000", "distributed=local",
                     f"hydra.run.dir={out}", cwd=tmp_path, start_new_session=True)
    try:
        # Both processes at their step boundaries ("[5/7] train" is logged inside them): the Ctrl-C is one of training
        # in each (was a fixed 1 s sleep after process 1's line).
        for rank in (1, 0):
            _wait_for(out / f"process_{rank}.log", "[5/7] train", parent)
        os.killpg(parent.pid, signal.SIGINT)
        log = parent.communicate(timeout=180)[0]
    finally:
        parent.kill()
    assert parent.returncode == 130, log[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "interrupted" and metrics["process_exit_codes"] == [130, 130], metrics
    lines = log.replace("\r", "\n").splitlines()
    assert [line for line in lines if "received Ctrl-C" in line] == [
        "[WARNING] [process 0/2] received Ctrl-C: stopping at the next step boundary, after a checkpoint "
        "(Ctrl-C again stops at once)"]
    assert [line for line in lines if line.startswith("[ERROR]")] == [f"[ERROR] [process 0/2] {metrics['error']}"]
    assert lines.count("interrupted: the job's metrics.json records it (status interrupted)") == 1
    assert not [line for line in lines if "[process 1/2]" in line or "sync point" in line or "XLA warned" in line]
    process_1 = (out / "process_1.log").read_text()  # the other process's own account is kept in its log
    assert "[process 1/2] received Ctrl-C" in process_1 and "[process 1/2] interrupted by Ctrl-C" in process_1


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_ctrl_c_reaching_one_local_process_during_setup_stops_both_at_the_same_stage(tmp_path, forks):
    # Was: a Ctrl-C that reached process 1 alone while the run set up (its data) stopped it at its next check, alone;
    # process 0 went on into the model's stage without it. Now both stop at the check the sync point names: the
    # stages each process's log reached are the same, and the job ends (bounded) with both processes' exit codes.
    out = tmp_path / "run"
    parent = _launch(forks, "rule=fsdp", "mesh.model_axis=2", "train.steps=100000", "distributed=local",
                     f"hydra.run.dir={out}", cwd=tmp_path)
    try:
        children = _local_children(parent)
        _wait_for(out / "process_1.log", "[3/7] data", parent)
        os.kill(children[1], signal.SIGINT)
        log = parent.communicate(timeout=240)[0]
    finally:
        parent.kill()
    stages = [re.findall(r"\[(\d)/7\]", (out / f"process_{rank}.log").read_text()) for rank in (0, 1)]
    assert stages[0] == stages[1], (stages, log[-3000:])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] in ("interrupted", "preempted") and None not in metrics["process_exit_codes"], metrics


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_ctrl_c_reaching_one_local_process_while_it_waits_for_the_other_stops_both(tmp_path, forks):
    # Was: a Ctrl-C that reached process 0 while it waited at [1/7] for process 1 to join (its handler ran before JAX's
    # preemption service took SIGTERM) was never told to that service; every check of several processes asks its
    # sync point alone, so neither process ever stopped: the job trained on (train.steps=100000). Now the first
    # check tells the service: both stop at the same stage, the job ends with both processes' exit codes.
    out = tmp_path / "run"
    with _local_job_with_process_1_held_at_start_up(forks, out, tmp_path) as (parent, ranks):
        time.sleep(1)
        os.kill(ranks[0], signal.SIGINT)
        time.sleep(1)
        os.kill(ranks[1], signal.SIGCONT)
        log = parent.communicate(timeout=180)[0]
    stages = [re.findall(r"\[(\d)/7\]", (out / f"process_{rank}.log").read_text()) for rank in (0, 1)]
    assert stages[0] == stages[1] and "7" not in stages[0], (stages, log[-3000:])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] in ("interrupted", "preempted") and None not in metrics["process_exit_codes"], metrics


def _local_children(parent, count: int = 2, timeout_s: float = 60) -> dict[int, int]:
    """Rank -> pid of the processes the ``distributed=local`` launch ``parent`` started, once all ``count`` are there."""
    deadline, found = time.monotonic() + timeout_s, {}
    while len(found) < count and parent.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            for pid in Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split():
                with contextlib.suppress(OSError, StopIteration):
                    arguments = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
                    rank = next(a for a in arguments if a.startswith("distributed.process_id="))
                    found[int(rank.split("=")[1])] = int(pid)
        time.sleep(0.005)
    assert len(found) == count, (found, parent.poll())
    return found


@contextlib.contextmanager
def _local_job_with_process_1_held_at_start_up(forks, out: Path, cwd: Path):
    """A ``distributed=local`` job (rule=fsdp, data=4 x model=2, endless) into ``out``, process 1 stopped (SIGSTOP).

    Yields ``(parent, ranks)`` (rank -> pid) once process 0 logs its ``[1/7]`` set-up: process 1 is still in its
    start-up (Python, its imports), so process 0 waits for it. On leaving, every process is continued (SIGCONT) and the
    launch killed, whatever the test did.
    """
    parent = _launch(forks, "rule=fsdp", "mesh.model_axis=2", "train.steps=100000", "distributed=local",
                     f"hydra.run.dir={out}", cwd=cwd)
    ranks = {}
    try:
        ranks = _local_children(parent)
        os.kill(ranks[1], signal.SIGSTOP)  # held still in its start-up: process 0 waits for it
        _wait_for(out / "process_0.log", "[1/7] devices", parent)  # process 0 in its run, on its way to process 1
        yield parent, ranks
    finally:
        for pid in ranks.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        parent.kill()


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_sigterm_while_one_local_process_still_starts_up_ends_the_job_as_preempted_at_once(tmp_path, forks):
    # Was: process 0 in its run (its handler took the SIGTERM the parent passed on) waited at the coordinator for
    # process 1, which the same SIGTERM had killed while it still imported (no handler yet); ~15 s later (the dead
    # peer's grace, distributed.heartbeat_s + 5 s) "process 1 of 2 died (killed by SIGTERM)", status error, exit 1.
    out = tmp_path / "run"
    with _local_job_with_process_1_held_at_start_up(forks, out, tmp_path) as (parent, ranks):
        process_1 = out / "process_1.log"
        assert not process_1.exists() or "[1/7]" not in process_1.read_text()
        parent.send_signal(signal.SIGTERM)
        os.kill(ranks[1], signal.SIGCONT)
        log = parent.communicate(timeout=120)[0]
    assert parent.returncode == EXIT_PREEMPTED, log[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "preempted" and metrics["stop_signal"] == signal.SIGTERM, metrics
    assert metrics["process_exit_codes"][1] == -signal.SIGTERM, metrics  # its start-up ended by the signal
    assert metrics["error"].startswith(
        "preempted by SIGTERM while the processes were starting up, before training (nothing trained: no checkpoint "
        f"to save); continue with: {command_for(folder=tmp_path)} "), metrics["error"]  # launch.py's path there
    assert metrics["error"].endswith(f" distributed=local train.resume=auto hydra.run.dir={out}"), metrics["error"]
    assert "died" not in log and not re.search(r"^[EF]\d{4} |Terminating process", log, re.M), log[-3000:]
    assert [line for line in log.splitlines() if "starting up" in line] == [
        f"[WARNING] {metrics['error']}"], log[-3000:]


def _stopped_sweep(forks, root: Path, signum: int, *args: str) -> SimpleNamespace:
    """``launch.py -m <TINY> <args>`` into ``root/sweep``, sent ``signum`` once job 0 trains.

    Returns the sweep's folder, the exit code, the console and sweep_summary.csv's text as the stop left it
    (read here: a test may continue job 0 afterwards, which rebuilds the summary).
    """
    sweep = root / "sweep"
    proc = _launch(forks, *args, f"hydra.sweep.dir={sweep}", flags=("-m",), cwd=root)
    try:
        _wait_for(sweep / "0" / "launch.log", "[5/7] train", proc)
        proc.send_signal(signum)
        log = proc.communicate(timeout=180)[0]
    finally:
        proc.kill()
    summary = sweep / "sweep_summary.csv"
    return SimpleNamespace(sweep=sweep, returncode=proc.returncode, log=log,
                           summary=summary.read_text() if summary.exists() else None)


# Each stopped sweep is launched once and shared by the tests of what it leaves (a launch costs ~10 s).
@pytest.fixture(scope="module")
def interrupted_sweep(tmp_path_factory, forks):
    """Ctrl-C (SIGINT) while job 0 of a two-job sweep trains (for ever: it never ends by itself)."""
    return _stopped_sweep(forks, tmp_path_factory.mktemp("interrupted"), signal.SIGINT, "model.width=16,24",
                          "train.steps=100000")


@pytest.fixture(scope="module")
def preempted_sweep(tmp_path_factory, forks):
    """SIGTERM while job 0 of a two-job sweep of 100 steps trains (a test continues job 0 to its end)."""
    return _stopped_sweep(forks, tmp_path_factory.mktemp("preempted"), signal.SIGTERM, "model.width=16,24",
                          "train.steps=100", "train.log_every=50")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_stopped_sweep_names_the_command_that_continues_it_whole(interrupted_sweep):
    # Was: only the stopped job's command, which leaves the jobs never started to be found and typed one by one.
    sweep, log = interrupted_sweep.sweep, interrupted_sweep.log
    assert interrupted_sweep.returncode == 130, log[-3000:]
    error = json.loads((sweep / "0" / "metrics.json").read_text())["error"]
    assert f" train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '0'}" in error  # the job's own, as before
    typed = command_for(folder=sweep.parent)  # where it was launched: launch.py's path (was "python launch.py")
    whole = (f"to continue the whole sweep, this job and those not started: {typed} -m {' '.join(TINY)} "
             f"model.width=16,24 train.steps=100000 train.resume=auto hydra.sweep.dir={sweep}")
    lines = log.replace("\r", "\n").splitlines()
    assert [line for line in lines if "whole sweep" in line] == [whole], log[-3000:]
    assert not (sweep / "1").exists()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_dead_local_process_ends_the_job_naming_it(tmp_path, forks):
    out = tmp_path / "run"
    parent = _launch(forks, "rule=fsdp", "mesh.model_axis=2", "train.steps=100000", "distributed=local",
                     "distributed.heartbeat_s=3", f"hydra.run.dir={out}", cwd=tmp_path)
    try:
        _wait_for(out / "process_1.log", "[5/7] train", parent)
        # Case 8: a second run into the same folder stops at once, naming the folder and the first run,
        # before Hydra writes anything there.
        config = (out / ".hydra" / "config.yaml").read_text()
        second = _launch(forks, f"hydra.run.dir={out}", cwd=tmp_path)
        text = second.communicate(timeout=120)[0]
        assert second.returncode == 1
        assert f"{out} is in use by another run (pid {parent.pid} on" in text
        assert (out / ".hydra" / "config.yaml").read_text() == config
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
        rank_1 = [int(pid) for pid in children
                  if "distributed.process_id=1" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(rank_1) == 1
        os.kill(rank_1[0], signal.SIGKILL)
        log = parent.communicate(timeout=120)[0]
    finally:
        parent.kill()
    assert parent.returncode == 1, log[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "error" and metrics["process_exit_codes"][1] == -signal.SIGKILL
    found = re.match(r"process 1 of 2 died \(killed by SIGKILL\); the others ended ([\d.]+) s later \(bound: "
                     r"distributed.heartbeat_s=3 \+ 5 s\): process 0 ", metrics["error"])
    assert found, metrics["error"]
    assert float(found.group(1)) <= 3 + 5 + 1  # the survivor noticed, or was stopped, within the bound
    # Said on the console, and error.txt written, as for any failed run (was only in metrics.json, after
    # XLA's stack trace of the survivor): process 0's traceback if it lived to write one, else the message.
    assert f"[ERROR] {metrics['error']}" in log
    # One line names the dead process and its log; XLA's teardown of the survivor (C++ E/F lines, "Terminating
    # process because the JAX distributed service detected fatal errors", source traces) is in its log, not here.
    assert metrics["first_failed_process"] == 1 and (
        f"[ERROR] {metrics['error']}; its log: {out / 'process_1.log'} (what the others printed as they were stopped "
        "is at the end of their process_<i>.log)") in log
    assert not re.search(r"^[EF]\d{4} |Terminating process|Source Location Trace|Check fail", log, re.M), log[-3000:]
    if metrics["process_exit_codes"][0] == -signal.SIGABRT:  # the survivor noticed before the parent stopped it
        assert "Terminating process because the JAX distributed" in (out / "process_0.log").read_text()
    error_txt = (out / "error.txt").read_text()
    assert metrics["error"] in error_txt or error_txt.startswith("Traceback (most recent call last)"), error_txt


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_sweep_job_continued_alone_updates_the_sweeps_summary(preempted_job_continued):
    # Job 0 of the preempted sweep (model.width=16,24: job 1 never started), continued alone with the command its
    # metrics.json names: the sweep's summary shows it done, no longer preempted.
    continued = preempted_job_continued
    sweep, output = continued.sweep, continued.output
    assert continued.again.returncode == 0, output[-3000:]
    assert f"sweep summary rebuilt with this job's result: {sweep / 'sweep_summary.csv'}" in output
    rows = (sweep / "sweep_summary.csv").read_text().splitlines()
    # Every cell but resumed_from, which names the job's own checkpoint under this test's folder, "preempted0/...".
    cells = [v for k, v in next(csv.DictReader(rows)).items() if k != "resumed_from"]
    assert len(rows) == 3 and rows[1].startswith("0,16,") and "preempted" not in ",".join(cells) and ",ok," in rows[1], rows
    assert rows[2].startswith("1,24,") and ",not run," in rows[2], rows


@pytest.mark.slow
def test_the_folder_callback_can_be_shipped_to_jobs_while_it_holds_the_sweep_lock(tmp_path):
    # submitit pickles Hydra's callbacks into every SLURM job; the sweep's lock (an RLock) made that fail.
    import pickle

    from omegaconf import OmegaConf

    callback = folder_claim.RefuseCompletedRun()
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}, "train": {"resume": None}})
    callback.on_multirun_start(config)
    try:
        shipped = pickle.loads(pickle.dumps(callback))
        shipped.on_multirun_end(config)  # the copy holds nothing: its end (a job's) lets no lock go
        with pytest.raises(folder_lock.FolderInUseError):  # still held by the launching process's callback
            _second_process_lock(tmp_path / "sweep")
    finally:
        callback.on_multirun_end(config)
    _second_process_lock(tmp_path / "sweep")  # the lock stayed here: the sweep's end let it go


def _second_process_lock(folder):
    code = ("import sys; from gensbi_sharding.harness.folder_lock import FolderLock; "
            f"FolderLock({str(folder)!r}).acquire()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if "FolderInUseError" in proc.stderr:
        raise folder_lock.FolderInUseError(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_mistyped_resume_path_can_be_corrected_in_the_same_folder(tmp_path, reference_run):
    # Was: the corrected train.resume=<run> was refused ("rerun with train.resume=auto"), and
    # train.resume=auto then started from scratch, ignoring the intended checkpoint.
    source, out = reference_run, tmp_path / "run"  # source: a completed run of the tiny config (only read)
    typo = run_tiny(out, f"train.resume={source.parent / 'sourse'}", "train.steps=12")
    assert typo["status"] == "error" and "does not exist" in typo["error"]
    fixed = run_tiny(out, f"train.resume={source}", "train.steps=12")
    assert fixed["status"] == "ok" and fixed["resumed_from"] == str(source / "checkpoints" / "8")
    assert fixed["final_step"] == 12 and fixed["previous_attempts"][0]["status"] == "error"
    # A folder that holds checkpoints of its own is continued with train.resume=auto only.
    (out / "checkpoints" / "3").mkdir(parents=True, exist_ok=True)
    outputs.write_json(out / "metrics.json", {"status": "preempted"})
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto"):
        run_folder.ensure_fresh(out, resume_from=True)


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_requeued_continuation_resumes_its_own_checkpoint(tmp_path, reference_run, forks):
    # Was: `train.resume=<run> hydra.run.dir=<cont>` preempted after <cont>'s own save, rerun as typed (a cluster's
    # requeue): refused, "rerun with train.resume=auto to continue it in this folder". Requeued through launch.py:
    # its folder check reads the checkpoint's config before JAX starts (through Orbax's Checkpointer it started JAX's
    # backend there, and the run then failed "devices.cpu_count=8 was asked for, but JAX's backend already started").
    source, out = reference_run, tmp_path / "cont"
    command = (f"train.resume={source}", "train.steps=16", "train.checkpoint_every=4")
    assert run_tiny(out, *command)["status"] == "ok"
    shutil.rmtree(out / "checkpoints" / "16")  # as preempted after its save of step 12
    record = json.loads((out / "metrics.json").read_text())
    outputs.write_json(out / "metrics.json", {**record, "status": "preempted", "stopped_at_step": 12})
    text = _launch(forks, *command, f"hydra.run.dir={out}", cwd=tmp_path).communicate(timeout=300)[0]
    assert f"{out} already holds its own checkpoint (step 12) of this continuation, as after a requeue" in text, text
    requeued = json.loads((out / "metrics.json").read_text())
    assert requeued["status"] == "ok" and requeued["final_step"] == 16 and requeued["resumed_from_step"] == 12
    assert requeued["resumed_from"] == str((out / "checkpoints" / "12").resolve())  # its own, not the source's
    assert requeued["previous_attempts"][0]["status"] == "preempted"


@pytest.fixture(scope="module")
def val4_source(tmp_path_factory, devices):
    """A completed run validating every 4 steps, the checkpoint two tests resume from (only read)."""
    source = tmp_path_factory.mktemp("val4") / "source"
    assert run_tiny(source, "train.val_every=4")["status"] == "ok"
    return source


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_resuming_on_other_held_out_pairs_starts_early_stopping_afresh(tmp_path, caplog, val4_source):
    # Was: the checkpoint's best validation loss, measured on other pairs, was kept and compared with
    # this run's: never beaten, the old weights were sampled after all the new training.
    import logging

    source, out = val4_source, tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        moved = run_tiny(out, f"train.resume={source}", "train.steps=12", "train.val_every=4",
                         "data.num_simulations=1024")
    assert moved["status"] == "ok"
    # On this run's pairs only: the restored weights (step 8, validated again), then step 12.
    assert [step for step, _ in moved["val_history"]] == [8, 12] and moved["best_step"] in (8, 12)
    assert moved["best_val_loss"] == min(loss for _, loss in moved["val_history"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("early stopping starts afresh" in w and "data.num_simulations=768 -> 1024" in w for w in warnings)
    # The run's warning carries the override that keeps the checkpoint's split (held_out_fix, wired at merge), as the
    # setting run(cfg)'s caller sets (WORDS77B; was launch.py's "add data.num_simulations=768 to the command")
    assert any(w.endswith("; set cfg.data.num_simulations=768 to keep the checkpoint's data split and its "
                          "best weights") for w in warnings), warnings
    same = run_tiny(tmp_path / "same", f"train.resume={source}", "train.steps=12", "train.val_every=4")
    assert [step for step, _ in same["val_history"]] == [4, 8, 12]  # same pairs: the history continues


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_resuming_compares_the_effective_data_shards_not_the_written_value(tmp_path, caplog, val4_source):
    # Was: data.shards=null (one shard per process: 1 here) against data.shards=1 counted as other held-out
    # pairs, and the checkpoint's early stopping was thrown away; across process counts null == null hid a
    # real change of pairs (tests/test_held_out.py covers the saved configs of 2 processes).
    import logging

    source = val4_source
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        same = run_tiny(tmp_path / "same", f"train.resume={source}", "train.steps=12", "train.val_every=4",
                        "data.shards=1")
        assert [step for step, _ in same["val_history"]] == [4, 8, 12]  # the same pairs: the history continues
        assert "early stopping starts afresh" not in caplog.text
        other = run_tiny(tmp_path / "other", f"train.resume={source}", "train.steps=12", "train.val_every=4",
                         "data.shards=2")
    assert [step for step, _ in other["val_history"]] == [8, 12]
    # run(cfg) from Python: the fix as the setting it sets (WORDS77B; was launch.py's "add data.shards=1")
    assert "data shards 1 -> 2 (data.shards=2 in 1 process(es); set cfg.data.shards=1 for the checkpoint's pairs)" \
        in caplog.text
    # Every process of a job says it alike: process 0 on the console, the others in their process_<i>.log only
    # (was: a 4-process continuation showed it four times).
    from gensbi_sharding.harness import console

    afresh = [r for r in caplog.records if "early stopping starts afresh" in r.getMessage()]
    assert len(afresh) == 1 and console.ConsoleFilter().filter(afresh[0])
    try:
        console.set_process(1, 2)
        assert not console.ConsoleFilter().filter(afresh[0])
    finally:
        console.set_process(0, 1)


def test_a_refused_sweep_with_many_unfinished_jobs_writes_their_commands_to_a_script(tmp_path, capsys):
    # A new user's report: after Ctrl-C of a 24-job sweep, the refusal was one ~5,000-character line of
    # 21 commands joined by " ; ". Over three, they go to a script in the sweep's folder, one per line.
    from omegaconf import OmegaConf

    sweep = tmp_path / "multirun"
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok"})
    for job in range(1, 6):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": "interrupted"})
        (sweep / str(job) / ".hydra").mkdir()
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(f"- model.width={8 * job}\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "train": {"resume": "auto"}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err.rstrip()
    script = sweep / "continue_unfinished.sh"
    commands = [f"python launch.py model.width={8 * job} train.resume=auto hydra.mode=RUN "
                f"hydra.run.dir={sweep / str(job)}" for job in range(1, 6)]
    assert printed.endswith(f"continue its unfinished jobs one by one: bash {script} (5 commands, one per line; "
                            f"the first: {commands[0]})"), printed
    # the two lines before the commands: run them where they were printed for, stop at Ctrl-C (test_sweep_hints.py)
    assert [line for line in script.read_text().splitlines() if not line.startswith("#")] == [  # the sweep's Python
        f"cd {Path.cwd()} || exit 1", "trap 'exit 130' INT", *[shlex.quote(sys.executable) + c[6:] for c in commands]]
    assert len(printed.splitlines()) == 1 and len(printed) < 800


def test_a_refused_sweep_also_names_the_jobs_that_never_started(tmp_path, capsys):
    # Was: SIGTERM during job 1 of rule=replicated,fsdp,tensor: job 2 had no folder, the hint named
    # job 1 only, and the rebuilt summary showed two jobs, both ok: the tensor job was silently gone.
    from omegaconf import OmegaConf

    sweep = tmp_path / "multirun"
    for job, (rule, status) in enumerate([("replicated", "ok"), ("fsdp", "preempted")]):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": status})
        (sweep / str(job) / ".hydra").mkdir()
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(f"- experiment=quick\n- rule={rule}\n")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}, "overrides": {"task": [
        "experiment=quick", "rule=replicated,fsdp,tensor", "train.resume=auto"]}}, "train": {"resume": "auto"}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err.rstrip()
    assert printed.endswith(
        f"continue its unfinished jobs (1 never started) one by one: python launch.py experiment=quick rule=fsdp "
        f"train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '1'} ; python launch.py experiment=quick "
        f"rule=tensor train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '2'}")


def test_sweep_jobs_expand_as_hydra_does():
    from gensbi_sharding.harness.sweep_plan import sweep_jobs

    assert sweep_jobs(["experiment=quick", "rule=fsdp,tensor", "seed=range(2)"]) == [
        ["experiment=quick", "rule=fsdp", "seed=0"], ["experiment=quick", "rule=fsdp", "seed=1"],
        ["experiment=quick", "rule=tensor", "seed=0"], ["experiment=quick", "rule=tensor", "seed=1"]]
    assert sweep_jobs(["data=sir"], {"data": "two_moons,slcp", "data.num_simulations": "1000,10000"}) == [
        ["data=sir", "data.num_simulations=1000"], ["data=sir", "data.num_simulations=10000"]]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("stopped, code, status", [("preempted_sweep", EXIT_PREEMPTED, "preempted"),
                                                   ("interrupted_sweep", 130, "interrupted")])
def test_a_stopped_sweep_leaves_its_summary_so_far_and_the_jobs_not_run(request, stopped, code, status):
    # Was: SIGTERM ends the multirun inside a job, Hydra's end-of-sweep callback never runs: no summary;
    # then a summary without the jobs that never started; Ctrl-C: none at all.
    stopped = request.getfixturevalue(stopped)
    assert stopped.returncode == code, stopped.log[-3000:]
    assert stopped.summary is not None, stopped.log[-3000:]
    rows = stopped.summary.splitlines()
    assert len(rows) == 3 and rows[1].startswith("0,16,") and f",{status}," in rows[1], rows
    assert rows[2].startswith("1,24,") and ",not run," in rows[2], rows
    # Was the job's own line (or "interrupted: the job's metrics.json records it"): the sweep's outcome, last.
    last = [line for line in stopped.log.replace("\r", "\n").splitlines() if line.strip()][-1]
    assert last == (f"sweep stopped: 0 ok, 0 failed, 1 {status}, 1 not run; sweep_summary.csv/.md/.png in "
                    f"{stopped.sweep}"), stopped.log[-3000:]


@pytest.fixture(scope="module")
def preempted_job_continued(preempted_sweep, tmp_path_factory, forks):
    """Job 0 of ``preempted_sweep`` continued alone, with the command its metrics.json names (a launch costs ~5 s of
    CPU: shared by the test of that command and the test of the sweep summary it rebuilds). ``stopped``: job 0's
    metrics.json as the stop left it."""
    import shlex

    stopped = json.loads((preempted_sweep.sweep / "0" / "metrics.json").read_text())
    command = stopped["error"].split("; continue with: ")[1]
    again = forks.launch(shlex.split(command)[2:], cwd=tmp_path_factory.mktemp("continued"))
    output = again.communicate(timeout=300)[0]
    return SimpleNamespace(sweep=preempted_sweep.sweep, stopped=stopped, command=command, again=again, output=output)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_preempted_sweep_job_names_the_command_that_continues_it(preempted_sweep, preempted_job_continued):
    # Was "rerun the same command with train.resume=auto (and the same hydra.run.dir)": under -m that
    # command starts a new sweep from scratch, and hydra.run.dir means nothing there.
    sweep, log = preempted_sweep.sweep, preempted_sweep.log
    assert preempted_sweep.returncode == EXIT_PREEMPTED, log[-3000:]
    typed = command_for(folder=sweep.parent)  # where it was launched: launch.py's path (was "python launch.py")
    assert (f"to continue the whole sweep, this job and those not started: {typed} -m {' '.join(TINY)} "
            f"model.width=16,24 train.steps=100 train.log_every=50 train.resume=auto hydra.sweep.dir={sweep}") in log
    stopped, command, again = (preempted_job_continued.stopped, preempted_job_continued.command,
                               preempted_job_continued.again)
    assert command.startswith(f"{typed} experiment=quick ")
    assert command.endswith(f" train.resume=auto hydra.mode=RUN hydra.run.dir={sweep / '0'}")
    assert {"model.width=16", "train.steps=100"} <= set(command.split())  # the job's own overrides, not the sweep's
    assert again.returncode == 0, preempted_job_continued.output[-3000:]
    done = json.loads((sweep / "0" / "metrics.json").read_text())
    assert done["status"] == "ok" and done["final_step"] == 100
    assert done["resumed_from_step"] == stopped["stopped_at_step"] >= 1


@pytest.mark.slow  # end-to-end runs (run_tiny, twice)
def test_a_continued_run_keeps_the_training_figures_of_the_attempts_that_trained(tmp_path, usr1_at_3):
    # Was: a run resumed only to evaluate wrote samples_per_s / median_step_s / final_train_loss null and
    # compile_s 0.0, and previous_attempts kept only status, error and wall time.
    out, stopped = usr1_at_3.out, usr1_at_3.stopped
    assert stopped["status"] == "preempted" and stopped["steps"] == 3 and stopped["samples_per_s"] > 0
    # Continued under another rule and mesh, as a user moving a job to another allocation would (the stopped
    # run's copy: the fixture's own folder was continued as it was).
    out = usr1_at_3.stopped_copy
    done = run_tiny(out, "train.resume=auto", "rule=tensor", "mesh.model_axis=2")
    assert done["status"] == "ok" and done["steps"] == 5 and done["resumed_from_step"] == 3
    first = done["previous_attempts"][0]
    # Was: previous_attempts kept no word of where an attempt ran, so metrics.json read as if all 8 steps ran
    # under tensor on (4, 2): steps 1-3 ran under replicated on (8, 1).
    assert {k: first[k] for k in ("rule", "mesh_shape", "device_count", "process_count", "final_step")} == {
        "rule": "replicated", "mesh_shape": [8, 1], "device_count": 8, "process_count": 1, "final_step": 3}
    assert (done["rule"], done["mesh_shape"], done["process_count"], done["final_step"]) == ("tensor", [4, 2], 1, 8)
    from PIL import Image  # the plot of the whole curve: was titled "rule tensor on mesh 4x2", steps 1-3 included

    with Image.open(out / "losses.png") as image:
        assert image.text["Title"] == "two_moons, mlp | rule tensor on mesh 4x2 from step 3"
    assert {k: first[k] for k in ("status", "steps", "compile_s", "median_step_s", "samples_per_s",
                                  "final_train_loss")} == {k: stopped[k] for k in (
        "status", "steps", "compile_s", "median_step_s", "samples_per_s", "final_train_loss")}
    # As an evaluation cut short leaves it (trained, figures written, then preempted): resumed only to evaluate.
    record = json.loads((out / "metrics.json").read_text())
    outputs.write_json(out / "metrics.json", {**record, "status": "preempted"})
    again = run_tiny(out, "train.resume=auto")
    assert again["status"] == "ok" and again["steps"] == 0 and again["training_figures_from_attempt"] == 2
    for key in ("compile_s", "median_step_s", "samples_per_s", "final_train_loss"):
        assert again[key] == done[key] is not None, key
    assert [a["steps"] for a in again["previous_attempts"]] == [3, 5]
    # The figures it shows are attempt 2's, measured under tensor on (4, 2), and its record says so.
    assert [(a["rule"], a["mesh_shape"]) for a in again["previous_attempts"]] == [
        ("replicated", [8, 1]), ("tensor", [4, 2])]
    # Nothing trained and no attempt of its own that did: null, never compile_s 0.0.
    elsewhere = run_tiny(tmp_path / "evaluated", f"train.resume={out}")
    assert elsewhere["status"] == "ok" and elsewhere["steps"] == 0
    assert [elsewhere[k] for k in ("compile_s", "median_step_s", "samples_per_s", "final_train_loss")] == [None] * 4


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_an_attempt_refused_before_it_restored_records_no_resume_point(usr1_at_3):
    # Was: an attempt refused after its checkpoint was found (train.steps below the checkpoint's step, another
    # task) recorded resumed_from_step 3 and resumed_from, in its metrics.json and then in previous_attempts,
    # as if it had continued from there.
    out = usr1_at_3.stopped_copy_2  # SIGUSR1 after step 3 of a train.resume=auto run, as the stop left it
    assert json.loads((out / "metrics.json").read_text())["status"] == "preempted"
    beyond = run_tiny(out, "train.resume=auto", "train.steps=2")
    # run(cfg) from Python, as run_tiny runs it: the settings named as cfg's (da586b8)
    assert beyond["status"] == "error" and "is at step 3, beyond cfg.train.steps=2" in beyond["error"]
    assert beyond["resumed_from_step"] is None and beyond["resumed_from"] is None
    other_task = run_tiny(out, "train.resume=auto", "data=gaussian_linear")
    assert other_task["status"] == "error" and "data=two_moons" in other_task["error"]
    assert other_task["resumed_from_step"] is None and other_task["resumed_from"] is None
    done = run_tiny(out, "train.resume=auto")
    assert done["status"] == "ok" and done["resumed_from_step"] == 3
    assert done["resumed_from"] == str(out / "checkpoints" / "3") and done["final_step"] == 8
    assert [(a["status"], a["resumed_from_step"], a["steps"]) for a in done["previous_attempts"]] == [
        ("preempted", None, 3), ("error", None, None), ("error", None, None)]


@pytest.mark.slow
@pytest.mark.parametrize("answered", [False, True])
def test_a_signal_a_setup_step_holds_is_answered_by_the_watchdog_within_its_grace(monkeypatch, answered):
    # Was: a SIGTERM while XLA compiled or initialised a large model waited for it to end (no Python handler runs
    # meanwhile; 10-40 s measured with model.width=1024 model.depth=8), where SLURM's SIGKILL follows within 30 s.
    from gensbi_sharding.harness import stop_watchdog

    monkeypatch.setattr(stop_watchdog, "GRACE_S", 0.1)
    stopped = []
    with PreemptionWatch() as watch:
        stop_watchdog.StopWatchdog(watch, stopped.append)
        if answered:  # the run reached a step of its own (or began training) first: it answers the signal itself
            watch.settle()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # a setup step that outlasts the grace
    assert stopped == ([] if answered else [signal.SIGTERM]) and watch.signum == signal.SIGTERM
    assert signal.set_wakeup_fd(-1) == -1  # let go on the watch's exit


@pytest.mark.slow
def test_a_second_signal_while_the_watchdog_waits_out_its_grace_is_taken_quietly(monkeypatch):
    # Was: 'Exception ignored when trying to write to the signal wakeup fd: BrokenPipeError' and its traceback on
    # the console (the watchdog closed its end of the pipe on reading the first signal; SLURM may signal twice).
    from gensbi_sharding.harness import stop_watchdog

    monkeypatch.setattr(stop_watchdog, "GRACE_S", 0.3)
    unraisable, stopped = [], []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with PreemptionWatch() as watch:
        stop_watchdog.StopWatchdog(watch, stopped.append)
        for _ in range(2):  # the second one after the watchdog has read the first
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        time.sleep(0.5)
    assert [str(u.exc_value) for u in unraisable] == [] and stopped == [signal.SIGTERM]
    assert watch.signum == signal.SIGTERM and signal.set_wakeup_fd(-1) == -1


HELD_IN_SETUP = """import os, signal, time
from gensbi_sharding.harness import state, stop_watchdog
stop_watchdog.GRACE_S = 1.0  # 10 s: a test need not wait so long
def build_state(*args, **kwargs):  # a model whose build outlasts the grace, as XLA compiling a large one
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(300)
state.build_state = build_state"""  # then launch.py runs in that process


@pytest.mark.slow  # a launch.py process, then the rerun it names
def test_sigterm_while_building_the_model_ends_the_run_at_once_and_the_folder_resumes(tmp_path, devices, forks):
    out = tmp_path / "run"
    proc = forks.launch([*TINY, f"hydra.run.dir={out}"], cwd=tmp_path, prelude=HELD_IN_SETUP)
    printed = proc.communicate(timeout=120)[0]
    assert proc.returncode == EXIT_PREEMPTED, printed[-3000:]
    log = (out / "launch.log").read_text()
    times = [time.mktime(time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")) for line in log.splitlines()
             if "received SIGTERM" in line or "preempted by SIGTERM" in line]
    assert len(times) == 2 and times[1] - times[0] <= 4, log[-3000:]  # GRACE_S (1 s here) after the signal
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "preempted" and metrics["stopped_at_step"] is None, metrics
    assert metrics["error"].startswith("preempted by SIGTERM before training (nothing trained: no checkpoint to "
                                       "save); stopped 1 s after the signal, inside a setup step; continue with: ")
    assert metrics["error"].endswith(f"train.resume=auto hydra.run.dir={out}"), metrics["error"]
    assert "preempted after" in printed  # the run's last console line, as a stop at a step
    assert not (out / "checkpoints").exists()
    assert run_tiny(out, "train.resume=auto")["status"] == "ok"  # the folder is left to continue in


def test_a_failed_attempt_that_saved_nothing_is_run_again_not_continued(tmp_path):
    from faults_helpers import saved_checkpoint

    # Was "rerun with train.resume=auto to continue it" for a run a config check stopped: nothing to continue.
    # Now the folder takes the next command as it is (its attempt kept in previous_attempts).
    outputs.write_json(tmp_path / "metrics.json", {"status": "error"})
    assert run_folder.ensure_fresh(tmp_path) == {"status": "error"}
    saved_checkpoint(tmp_path, {"seed": 0}, {}, step=5)  # a complete step (was an empty folder: a save cut short)
    with pytest.raises(FileExistsError, match="train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(tmp_path)


@pytest.mark.slow  # end-to-end run with evaluation
@pytest.mark.parametrize("held", [True, False])  # launch.py's hold (a sweep's next job), or run() from Python
def test_a_stop_during_the_last_c2st_ends_the_run_finished_and_stops_its_sweep(tmp_path, monkeypatch, held):
    # Was: the last observation's score written, yet status interrupted, c2st null, "before the evaluation
    # finished", and a rerun asked for that had nothing left to score.
    from gensbi_sharding.harness import evaluate, signal_hold

    real, calls = evaluate.c2st_scores, []

    def interrupted_scores(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # while observation 2, the last, is scored
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate, "c2st_scores", interrupted_scores)
    before = {signum: signal.getsignal(signum) for signum in signal_hold.PREEMPT_SIGNALS}
    out = tmp_path / "run"
    try:
        if held:
            signal_hold.hold_preemption_signals()
        try:
            run_tiny(out, "eval.enabled=true", "eval.observations=[1,2]")
            raised = False
        except KeyboardInterrupt:
            raised = True
        taken = signal_hold.take_held()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    # Held, launch.py's next job never starts (stopped_between_jobs); from Python, the Ctrl-C is Python's own
    assert (taken, raised) == (([signal.SIGINT], False) if held else ([], True))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "ok" and "error" not in metrics and len(calls) == 2
    assert [row["observation"] for row in metrics["c2st_observations"]] == [1, 2]
    assert metrics["c2st"] == pytest.approx(np.mean([row["c2st"] for row in metrics["c2st_observations"]]))
    with open(out / "c2st.csv") as f:
        assert [row["observation"] for row in csv.DictReader(f)] == ["1", "2"]


def _two_processes_whose_sync_point_answers_at_check_3(monkeypatch) -> list:
    """Simulate two processes of a job whose JAX preemption sync point answers at its third call; the list of the
    calls' counts, which the caller reads."""
    from jax.experimental import multihost_utils

    asked = []
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "reached_preemption_sync_point", lambda n: asked.append(n) or n == 3)
    monkeypatch.setattr(signal, "raise_signal", lambda signum: None)  # telling JAX's service: simulated, not sent
    return asked


@pytest.mark.parametrize("own", [signal.SIGINT, None])
def test_the_runs_plain_stop_checks_stop_several_processes_together(monkeypatch, own):
    # Was: the run's checks between its setup stages (run.py's watch.check(): after the mesh, the data, the model)
    # stopped a process whose own signal came first (a terminal's Ctrl-C reaches each of distributed=local's
    # processes) there, alone: the others went on into the next stage's collectives without it. Now every check asks
    # the sync point, as check_together: all processes stop at its check (3 here), a process without a signal too.
    from gensbi_sharding.harness.preemption import Preempted, PreemptionWatch

    asked = _two_processes_whose_sync_point_answers_at_check_3(monkeypatch)
    watch = PreemptionWatch()
    watch.signum = own  # this process's own Ctrl-C, recorded before the first check (or none came here)
    watch.check()
    watch.check()
    assert asked == [1, 2]
    with pytest.raises(Preempted) as stop:
        watch.check()
    assert asked == [1, 2, 3]
    assert str(stop.value).startswith("interrupted by Ctrl-C (SIGINT)" if own else "preempted by SIGTERM")
    with watch.at_step_boundaries():  # inside the training loop should_stop asks instead: a check asks nothing
        watch.check()
    assert asked == [1, 2, 3]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_that_came_before_jaxs_preemption_service_started_is_told_to_it(monkeypatch, signum):
    # Was: a signal recorded before jax.distributed.initialize (held since launch.py's start, or during [1/7]: the
    # handler passes it on to JAX's service only once it runs) never reached that service, and since every check of
    # several processes asks the sync point alone, no process ever stopped for it: the run trained on. Now the first
    # check after the start tells the service (SIGTERM, once): all processes stop at the check it names (3 here).
    from gensbi_sharding.harness.preemption import Preempted, PreemptionWatch

    told, asked = [], []
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    watch = PreemptionWatch()
    watch._handle(signum, None)  # before the service started: recorded only
    _two_processes_whose_sync_point_answers_at_check_3(monkeypatch)
    from jax.experimental import multihost_utils

    monkeypatch.setattr(signal, "raise_signal", told.append)
    monkeypatch.setattr(multihost_utils, "reached_preemption_sync_point",
                        lambda n: asked.append(n) or (told == [signal.SIGTERM] and n == 3))
    watch.check()
    assert told == [signal.SIGTERM]  # told at the first check, once
    watch.check()
    with pytest.raises(Preempted) as stop:
        watch.check()
    assert asked == [1, 2, 3] and told == [signal.SIGTERM]
    assert str(stop.value).startswith("interrupted by Ctrl-C" if signum == signal.SIGINT else "preempted by SIGTERM")


def test_a_multi_process_c2st_asks_for_a_stop_between_chunks_of_ode_steps_all_processes_alike(monkeypatch):
    # Was: distributed=local's processes never asked between chunks (only a one-process run did), so a Ctrl-C during
    # a multi-process C2ST waited for the observation's whole integration (eval.ode_steps up to 2**31 - 1: hours).
    # Now the run's check between chunks is PreemptionWatch.check_together: JAX's preemption sync point, asked with
    # the count of checks every process makes alike, answers all processes at the same call; a process the sync point
    # tells before its own signal came stops there too. Simulated: two processes, the sync point reached at check 3.
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness import flow_sampler
    from gensbi_sharding.harness.preemption import Preempted, PreemptionWatch

    asked = _two_processes_whose_sync_point_answers_at_check_3(monkeypatch)
    watch = PreemptionWatch()
    sampler = flow_sampler.FlowSampler(lambda th, x, t: jnp.tanh(th) + x[:1], rows=8, mesh=None,
                                       num_steps=10 * flow_sampler.CHUNK_STEPS, stop_check=watch.check_together)
    with pytest.raises(Preempted) as stop:
        sampler(np.zeros(2, np.float32), np.ones((8, 2), np.float32))
    assert asked == [1, 2, 3]  # between chunks 1-2, 2-3, 3-4: the third chunk's end stops it (of 10)
    assert watch.signum == signal.SIGTERM and str(stop.value).startswith("preempted by SIGTERM")
    plain = flow_sampler.FlowSampler(lambda th, x, t: jnp.tanh(th) + x[:1], rows=8, mesh=None,
                                     num_steps=2 * flow_sampler.CHUNK_STEPS, stop_check=lambda: asked.append("plain"))
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda out, tiled: out)  # one process stands for two
    plain(np.zeros(2, np.float32), np.ones((8, 2), np.float32))
    assert "plain" not in asked  # a check one process makes alone is never asked where several run the chunks


def test_a_multi_process_c2st_stops_at_the_sync_point_though_a_signal_came_before(monkeypatch):
    # Was: a process whose own signal had come (a terminal's Ctrl-C reaches each of distributed=local's processes)
    # stopped at its next check between chunks of ODE steps, alone, where the sync point had not answered yet: the
    # other processes, whose signal landed a moment later, ran the next chunk without it. Simulated: two processes,
    # this one's Ctrl-C recorded before the first check, the sync point reached at check 3.
    import jax.numpy as jnp

    from gensbi_sharding.harness import flow_sampler
    from gensbi_sharding.harness.preemption import Preempted, PreemptionWatch

    asked = _two_processes_whose_sync_point_answers_at_check_3(monkeypatch)
    watch = PreemptionWatch()
    watch.signum = signal.SIGINT  # its own Ctrl-C, as the handler records it (the handler passes it on as SIGTERM)
    sampler = flow_sampler.FlowSampler(lambda th, x, t: jnp.tanh(th) + x[:1], rows=8, mesh=None,
                                       num_steps=10 * flow_sampler.CHUNK_STEPS, stop_check=watch.check_together)
    with pytest.raises(Preempted) as stop:
        sampler(np.zeros(2, np.float32), np.ones((8, 2), np.float32))
    assert asked == [1, 2, 3]  # the sync point's call, as every other process
    assert str(stop.value).startswith("interrupted by Ctrl-C (SIGINT)")  # worded by its own signal
