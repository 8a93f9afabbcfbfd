"""The held-out pairs check counts the pairs as the split takes them: shard by shard, each rounding its own share.

Was: the check rounded over the whole budget (round(0.01 * 1000) = 10, passed) while each of 8 shards of 125
held out round(1.25) = 1, so the run validated on 8 pairs, below the 10 the check promises.
"""

import pytest

from faults_helpers import compose_tiny
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.split_rows import held_out_pairs, split_sizes

SHARDED = ("data.num_simulations=1000", "data.val_fraction=0.01", "data.shards=8")


def test_held_out_pairs_sum_the_shards_split():
    assert held_out_pairs(1000, 0.01, 8) == 8 == 8 * split_sizes(125, 0.01)[1]
    assert held_out_pairs(1000, 0.01) == 10 == split_sizes(1000, 0.01)[1]
    # uneven shards: 1001 = 126 + 7 * 125; round(1.26) + 7 * round(1.25) = 8; 10 shards of 100: 1 each
    assert held_out_pairs(1001, 0.01, 8) == 8 and held_out_pairs(1000, 0.01, 10) == 10


def test_a_sharded_split_below_the_minimum_is_refused_and_its_fixes_pass():
    with pytest.raises(ConfigError) as err:
        validate(compose_tiny(*SHARDED))
    message = str(err.value)
    assert message.startswith("data.val_fraction=0.01 holds out 8 of the 1000 simulations (data.num_simulations) "
                              "(split over 8 data shards, each rounding its own share) for validation"), message
    assert ": set data.val_fraction=0.012 (the smallest that holds out 10) or data.num_simulations=1194 " in message
    for fix in ("data.val_fraction=0.012", "data.num_simulations=1194"):  # the advice passes, pasted
        key = fix.split("=")[0]
        fixed = compose_tiny(*[o for o in SHARDED if not o.startswith(key)], fix)
        validate(fixed)
        assert held_out_pairs(fixed.data.num_simulations, fixed.data.val_fraction, 8) >= 10
    assert held_out_pairs(1000, 0.011, 8) < 10 and held_out_pairs(1193, 0.01, 8) < 10  # the smallest, each
    validate(compose_tiny("data.num_simulations=1000", "data.val_fraction=0.01"))  # one shard: 10, accepted


def test_the_check_counts_one_shard_per_local_process():
    with pytest.raises(ConfigError, match=r"holds out 8 of the 1000 .*\(split over 8 data shards"):
        validate(compose_tiny("data.num_simulations=1000", "data.val_fraction=0.01", "distributed=local",
                              "distributed.local_processes=8"))


@pytest.mark.slow
def test_the_pipeline_holds_out_the_pairs_the_check_counts():
    from gensbi_sharding.harness.pipeline import build_pipeline

    cfg = compose_tiny("data.num_simulations=1194", "data.val_fraction=0.01", "data.shards=8")
    validate(cfg)
    assert build_pipeline(cfg.data, seed=0, mesh=None, shards=8).val_pairs == held_out_pairs(1194, 0.01, 8) == 10


@pytest.mark.slow  # launch.py refuses before simulating (~5 s)
def test_launch_refuses_a_sharded_split_below_the_minimum_and_its_fix_runs(tmp_path):
    import subprocess
    import sys

    from faults_helpers import LAUNCH, TINY

    def launch(*overrides, folder):
        done = subprocess.run([sys.executable, str(LAUNCH), *TINY, *overrides, "dry_run=true",
                               f"hydra.run.dir={tmp_path / folder}"], cwd=LAUNCH.parent, capture_output=True,
                              text=True, timeout=300)
        return done.returncode, done.stdout + done.stderr

    code, said = launch(*SHARDED, folder="refused")
    assert code != 0 and "holds out 8 of the 1000 simulations" in said, said[-3000:]
    code, said = launch("data.num_simulations=1194", "data.val_fraction=0.01", "data.shards=8", folder="fixed")
    assert code == 0 and "dry run done" in said, said[-3000:]
