"""A resume whose held-out pairs changed is told the override that keeps its checkpoint's data split."""

import shlex

from omegaconf import OmegaConf

from faults_helpers import compose_tiny
from gensbi_sharding.harness.held_out import DATA_SHARDS, held_out_changes
from gensbi_sharding.harness.held_out_fix import held_out_warning, keep_split_overrides


def _resolved(*overrides):
    return OmegaConf.to_container(compose_tiny(*overrides), resolve=True)


def test_a_changed_val_fraction_is_told_the_override_that_keeps_the_saved_split():
    # Was: "early stopping starts afresh: ... (data.val_fraction=0.1 -> 0.2)" after a preset file's 0.1 became 0.2,
    # with no word of data.val_fraction=0.1, which keeps the checkpoint's held-out pairs and its best weights.
    saved, now, info = _resolved(), _resolved("data.val_fraction=0.2"), {DATA_SHARDS: 1}
    changed = held_out_changes(saved, info, now, 1)
    overrides = keep_split_overrides(saved, now)
    assert (changed, overrides) == (["data.val_fraction=0.1 -> 0.2"], ["data.val_fraction=0.1"])
    assert held_out_warning(changed, overrides) == (
        "early stopping starts afresh: the checkpoint's validation losses were measured on other held-out pairs or "
        "draws (data.val_fraction=0.1 -> 0.2); add data.val_fraction=0.1 to the command to keep the checkpoint's "
        "data split and its best weights")
    assert held_out_warning(changed, overrides, sampling=True) == (
        "its newest weights are sampled, not its best: the checkpoint's validation losses were measured on other "
        "held-out pairs or draws (data.val_fraction=0.1 -> 0.2)")
    # The advice, followed (added after what the command has, as pasted): nothing differs any more.
    followed = _resolved("data.val_fraction=0.2", *(w for o in overrides for w in shlex.split(o)))
    assert held_out_changes(saved, info, followed, 1) == [] and keep_split_overrides(saved, followed) == []


def test_every_changed_setting_gets_its_override_and_none_is_offered_for_the_data_shards_alone():
    saved, info = _resolved(), {DATA_SHARDS: 1}
    now = _resolved("seed=3", "data.num_simulations=1024", "train.val_draws=2")
    overrides = keep_split_overrides(saved, now)
    assert overrides == ["seed=0", "data.num_simulations=768", "train.val_draws=8"]
    assert held_out_changes(saved, info, _resolved(*overrides), 1) == []
    assert held_out_changes(saved, {DATA_SHARDS: 2}, saved, 1)[0].startswith("data shards 2 -> 1")
    assert keep_split_overrides(saved, saved) == []  # the shards' entry carries its own fix (add data.shards=2)
