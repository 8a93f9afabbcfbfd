"""A sweep ranked by validation loss compares jobs over the same held-out pairs: the keys ``held_out`` compares
(one list, ``HELD_OUT_KEYS``, shared with resume's check) and the EFFECTIVE data shards, so ``data.shards=1`` in one
process and ``data.shards=null`` (one shard per process: one) are alike (REVIEW73D: raw ``data.shards`` named no best
job for them), while two shards and one are not."""

from gensbi_sharding.harness.best_job import lowest


def _val(loss, shards):
    config = {"seed": 0, "data": {"theta_transform": "support", "val_fraction": 0.1, "num_simulations": 1000,
                                  "shards": shards}, "train": {"val_draws": 8}, "distributed": {"mode": "none"}}
    return {"status": "ok", "data": "two_moons", "best_val_loss": loss, "config": config}


def test_one_shard_said_two_ways_ranks_and_two_shards_do_not():
    assert lowest({"0": _val(1.2, None), "1": _val(0.75, 1)}) == ("best val loss", 0.75, ["1"])
    assert lowest({"0": _val(1.2, 2), "1": _val(0.75, 1)}) is None

