"""What a run logs (not refuses) says its fix in its caller's words: under ``run(cfg)`` from Python (no Hydra app)
cfg's settings, under launch.py its overrides (r79f). Each failed before: the lines said launch.py's overrides
(``set train.patience=0``, ``run with mesh.model_axis=1``, ``lower it, e.g. model.width=119``) to a Python caller,
who sets ``cfg.train.patience = 0``."""

import logging

import pytest

import gensbi_sharding as gs
from gensbi_sharding.harness.placement_hints import idle_model_axis_hint, splits_nothing_hint
from gensbi_sharding.harness.python_words import as_overrides, in_python_words, run_setting
from gensbi_sharding.harness.train_notes import at_steps_line, nothing_trained_line, patience_note


def test_a_resumed_run_s_lines_say_cfg_s_settings_from_python():
    assert nothing_trained_line(10, 2, 6, 1, "0.5000", 40, 20).endswith(
        "to train on to train.steps=20, set cfg.train.patience=0 (or above 2)")
    assert at_steps_line(8, False).endswith("(set cfg.eval.enabled=True to score it)")
    with as_overrides():  # launch.py's words, as they were
        assert nothing_trained_line(10, 2, 6, 1, "0.5000", 40, 20).endswith(
            "to train on to train.steps=20, set train.patience=0 (or above 2)")
        assert at_steps_line(8, False) == ("train.resume: step 8 is train.steps: nothing to train, and "
                                           "eval.enabled=false: only its validation loss is measured (set "
                                           "eval.enabled=true to score it)")
    assert at_steps_line(8, True) == "train.resume: step 8 is train.steps: nothing to train, evaluating its weights"


def test_the_patience_note_in_a_run_from_python():
    with in_python_words(reword=False):
        note = patience_note(patience=20, val_every=250, steps=3000)
    assert "cfg.train.val_every=" in note and note.endswith("; cfg.train.patience=0 says no early stopping")
    assert patience_note(patience=20, val_every=250, steps=3000).endswith("; train.patience=0 says no early stopping")


def test_the_placement_hints_in_a_run_from_python():
    with in_python_words(reword=False):
        idle = idle_model_axis_hint({"data": 4, "model": 2}, {"embed": "data"}, "fsdp", "dict")
        nothing = splits_nothing_hint({"data": 8, "model": 1}, {"mlp": "model"}, "tensor", "auto")
    assert idle.endswith("repeat the same work; set cfg.mesh.model_axis=1 so every device takes data, or cfg composed "
                         "with rule=tensor")
    assert nothing.endswith("; to split, add 'mesh=dict', 'mesh.model_axis=2' to the overrides cfg is composed with")
    with in_python_words(reword=False):  # every split fell back; the model axes under which some split
        fell = idle_model_axis_hint({"data": 1, "model": 8}, {"mlp": "model"}, "tensor", "dict",
                                    placed_on_model=False, splits_at=[4, 2])
    assert fell.endswith("set cfg.mesh.model_axis=1 so every device takes data, or cfg.mesh.model_axis=4 or "
                         "cfg.mesh.model_axis=2, under which it splits some")
    assert idle_model_axis_hint({"data": 4, "model": 2}, {"embed": "data"}, "fsdp", "dict").endswith(
        "repeat the same work; run with mesh.model_axis=1 so every device takes data, or rule=tensor")


def test_a_low_acceptance_warning_s_fix():
    assert run_setting("data.theta_transform", "support") == "cfg.data.theta_transform='support'"
    with as_overrides():
        assert run_setting("data.theta_transform", "support") == "data.theta_transform=support"


@pytest.mark.slow  # an end-to-end run (a dry run): the memory check, the placement hint and the fallback as logged
def test_a_dry_run_from_python_logs_cfg_s_settings(tmp_path, devices, caplog, monkeypatch):
    from faults_helpers import run_tiny
    from gensbi_sharding.harness import memory_check

    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 10_000_000)  # a host of 10 MB
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        dry = run_tiny(tmp_path / "dry", "dry_run=true", "model.width=302", "mesh.model_axis=2", "rule=fsdp")
    assert dry["status"] == "ok", dry.get("error")
    said = "\n".join(caplog.messages)
    assert "lower it, e.g. cfg.model.width=" in said and "e.g. model.width=" not in said, said
    assert "set cfg.mesh.model_axis=1 so every device takes data" in said, said
    assert "set cfg.rule.embed=None" in said and "map 'embed' to None" not in said, said
