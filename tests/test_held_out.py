"""held_out.held_out_changes: a checkpoint's validation losses compare with this run's only on the same
held-out pairs, which follow the *effective* data-shard count (data.shards=null: one per process)."""

from gensbi_sharding.harness.held_out import DATA_SHARDS, effective_shards, held_out_changes

BASE = {"seed": 0, "data": {"num_simulations": 1000, "val_fraction": 0.1, "shards": None},
        "train": {"val_draws": 1}}


def config(shards=None, distributed=None, **top):
    saved = {**BASE, **top, "data": {**BASE["data"], "shards": shards}}
    if distributed is not None:
        saved["distributed"] = distributed
    return saved


# A child of distributed=local distributed.local_processes=2, as its checkpoint's config holds it.
TWO_PROCESSES = {"mode": "explicit", "num_processes": 2, "process_id": 0, "local_processes": 1}
ONE_PROCESS = {"mode": "none", "num_processes": None, "process_id": None, "local_processes": 1}


def test_effective_shards_of_both_saved_config_shapes():
    assert effective_shards(config(distributed=TWO_PROCESSES)) == 2
    assert effective_shards(config(distributed=ONE_PROCESS)) == 1
    assert effective_shards(config(shards=4, distributed=TWO_PROCESSES)) == 4  # written: it wins
    # The checkpoint's own record wins over what the config can tell.
    assert effective_shards(config(distributed={"mode": "auto", "num_processes": None}), {DATA_SHARDS: 8}) == 8
    # Cannot tell: processes auto-detected (SLURM), or a config without distributed settings.
    assert effective_shards(config(distributed={"mode": "auto", "num_processes": None})) is None
    assert effective_shards(config()) is None


def test_two_processes_resumed_in_one_with_default_shards_is_a_change():
    # Was: data.shards null == null, no change, though the pairs went from 2 shards to 1.
    changes = held_out_changes(config(distributed=TWO_PROCESSES), {}, config(distributed=ONE_PROCESS), 1)
    assert changes == ["data shards 2 -> 1 (data.shards=null in 1 process(es); add data.shards=2 for the "
                       "checkpoint's pairs)"]
    # The same with the checkpoint's own record, as checkpoints are written now.
    assert held_out_changes(config(distributed=TWO_PROCESSES), {DATA_SHARDS: 2},
                            config(distributed=ONE_PROCESS), 1)[0].startswith("data shards 2 -> 1")


def test_a_one_process_checkpoint_in_two_processes_names_no_shard_count_they_refuse():
    # Was "add data.shards=1 for the checkpoint's pairs", which two processes refuse (a multiple of 2 needed).
    changes = held_out_changes(config(distributed=ONE_PROCESS), {DATA_SHARDS: 1}, config(distributed=TWO_PROCESSES), 2)
    assert changes == ["data shards 1 -> 2 (data.shards=null in 2 process(es); the checkpoint's 1 shard(s) do not "
                       "split over 2 processes: its pairs need a process count that divides 1, with data.shards=1)"]


def test_the_same_pairs_under_other_raw_values_are_no_change():
    # Was: "data.shards=None -> 2" and early stopping thrown away, though the pairs were identical.
    assert held_out_changes(config(distributed=TWO_PROCESSES), {}, config(shards=2, distributed=ONE_PROCESS), 1) == []
    assert held_out_changes(config(distributed=ONE_PROCESS), {DATA_SHARDS: 1}, config(shards=1), 1) == []
    # 1 process with data.shards=2, resumed in 2 processes with the default.
    assert held_out_changes(config(shards=2, distributed=ONE_PROCESS), {DATA_SHARDS: 2},
                            config(distributed=TWO_PROCESSES), 2) == []


def test_an_unknown_shard_count_is_not_carried_over_and_other_settings_still_count():
    changes = held_out_changes(config(distributed={"mode": "auto", "num_processes": None}), {}, config(), 4)
    assert changes == ["data shards unknown -> 4 (the checkpoint records neither data.shards nor its process count)"]
    changes = held_out_changes(config(distributed=ONE_PROCESS, seed=1), {DATA_SHARDS: 1},
                               config(distributed=ONE_PROCESS, train={"val_draws": 2}), 1)
    assert changes == ["seed=1 -> 0", "train.val_draws=1 -> 2"]
