"""A model or simulation budget too big for the machine is refused before anything allocates, naming the setting.

Was: ``model.width=100000`` ended in XLA's ``RESOURCE_EXHAUSTED: Out of memory allocating 80000000000 bytes``,
``data.num_simulations=2000000000`` the same from the simulator (then the OOM killer), ``model.depth=100000000``
built Python modules for minutes, deaf to SIGTERM; none named the setting.
"""

import re

import pytest

import gensbi_sharding as gs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.memory_check import check_fits, state_bytes_per_device
from gensbi_sharding.harness.rule_config import as_rule, rule_table

from faults_helpers import compose_tiny, run_tiny

GB = 10**9


def _rule(cfg):
    return as_rule(*rule_table(cfg.rule))


@pytest.mark.slow
@pytest.mark.parametrize("overrides, named", [
    (("model.width=100000",), "model.width=100000 (at its default 128: "),
    (("model.depth=100000000",), "model.depth=100000000 (at its default 3: "),  # extrapolated, never built
    (("model=transformer", "model.embed=100000"), "model.embed=100000 (at its default 64: "),
    (("data.num_simulations=2000000000",), "data.num_simulations=2000000000 cannot fit"),
])
def test_a_state_or_budget_too_big_is_refused_naming_the_setting(devices, overrides, named):
    cfg = compose_tiny(*overrides)
    with pytest.raises(ConfigError) as err:
        check_fits(cfg, gs.make_mesh(), _rule(cfg), available=16 * GB)
    message = str(err.value)
    assert named in message and "16.0 GB is available" in message, message
    fix = re.search(r"(?:e\.g\.|set) ([a-z_.]+=\d+)", message).group(1)
    check_fits(compose_tiny(*overrides, fix), gs.make_mesh(), _rule(cfg), available=16 * GB)  # the fix fits


@pytest.mark.slow
def test_the_estimate_is_the_planned_state_per_device(devices):
    # What training holds per device, from the library's own plan and byte count of the model (abstract, placed):
    # parameters, two AdamW moments, the EMA, the best weights; deeper: linear in the layers, extrapolated.
    from flax import nnx

    from gensbi_sharding.harness.state import builder

    mesh = gs.make_mesh()
    for depth in (1, 7):
        cfg = compose_tiny("rule=fsdp", f"model.depth={depth}")
        model, _ = gs.abstract_sharded(builder(cfg, dim_theta=2, dim_x=2, partition_axis=None), mesh, _rule(cfg),
                                       warn=False)
        params = max(gs.bytes_per_device(nnx.state(model, nnx.Param)).values())
        others = max(gs.bytes_per_device(nnx.state(model, nnx.Not(nnx.Param))).values(), default=0)
        assert state_bytes_per_device(cfg, mesh, _rule(cfg), (2, 2)) == 5 * params + others


def test_the_run_refuses_before_simulating(devices, tmp_path):
    metrics = run_tiny(tmp_path, "model.width=100000")
    assert metrics["status"] == "error" and "RESOURCE_EXHAUSTED" not in metrics["error"]
    assert metrics["error"].startswith("ConfigError: the training state cannot fit: model=mlp under rule 'replicated'")
    assert "model.width=100000" in metrics["error"] and "val_pairs" not in metrics  # nothing simulated, nothing built


@pytest.mark.slow
@pytest.mark.parametrize("overrides, named, fix", [
    (("model=flux1", "model.axes_dim=[100000,0]"), "model.axes_dim=[100000,0] (at its default [8,0]: ",
     "model.axes_dim=[8,0]"),
    (("model=flux1", "model.mlp_ratio=100000.0"), "model.mlp_ratio=100000.0 (at its default 4.0: ",
     "model.mlp_ratio=4.0"),
])
def test_a_raised_float_or_list_setting_is_checked_not_spared_as_a_default(devices, monkeypatch, overrides, named,
                                                                           fix):
    """The trace is spared for a model at its defaults; integers alone were compared, so a list (flux1's
    axes_dim) or a float (mlp_ratio) raised a thousandfold passed as "at its defaults" into XLA's unnamed
    out-of-memory error. The machine's memory is read, as in a run (no ``available`` given)."""
    from gensbi_sharding.harness import memory_check

    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 16 * GB)
    cfg = compose_tiny(*overrides)
    with pytest.raises(ConfigError) as err:
        check_fits(cfg, gs.make_mesh(), _rule(cfg))
    assert named in str(err.value) and f"e.g. {fix}" in str(err.value), str(err.value)
    check_fits(compose_tiny(*overrides, fix), gs.make_mesh(), _rule(cfg))  # the suggested override fits


def test_distributed_local_processes_share_the_host_for_their_simulations(devices, monkeypatch):
    """distributed=local's processes live on one host: each checked its half of the budget against the whole
    host (300M two_moons simulations: 2 x 9.6 GB passed against 16 GB) and was told a budget that fit one half,
    so together they met the kernel's OOM killer with no setting named."""
    import jax

    from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV

    monkeypatch.setenv(LOCAL_CHILD_ENV, "3")  # a child of distributed=local, one of 2 processes
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    cfg = compose_tiny("data=two_moons", "data.num_simulations=300000000")  # 64 bytes a simulation (4 copies)
    with pytest.raises(ConfigError) as err:
        check_fits(cfg, gs.make_mesh(), _rule(cfg), available=16 * GB)
    message = str(err.value)
    assert "need about 19.2 GB on this host (2 processes of distributed=local share it)" in message, message
    assert "set data.num_simulations=120000000 or fewer" in message, message  # 2 x 3.84 GB: half of 16 GB
    check_fits(compose_tiny("data=two_moons", "data.num_simulations=120000000"), gs.make_mesh(), _rule(cfg),
               available=16 * GB)
    monkeypatch.delenv(LOCAL_CHILD_ENV)  # processes on hosts of their own (distributed=auto): a share each
    check_fits(cfg, gs.make_mesh(), _rule(cfg), available=16 * GB)


@pytest.mark.slow
@pytest.mark.parametrize("overrides, named, fix", [
    (("experiment=quick", "model.width=100000"), "model.width=100000 (at its default 32: ", "model.width=32"),
    (("experiment=quick", "model=transformer", "model.embed=100000"), "model.embed=100000 (at its default 32: ",
     "model.embed=32"),
    (("model.width=100000",), "model.width=100000 (at its default 128: ", "model.width=128"),  # conf/model's own
])
def test_the_default_a_message_names_is_the_one_the_commands_composition_gives(devices, overrides, named, fix):
    # Was "model.width=100000 (at its default 128 ...); lower it, e.g. model.width=128" under experiment=quick, whose
    # composed width is 32: conf/model/mlp.yaml's default was named, not the one the command's preset gives.
    from faults_helpers import under_command

    def refused(cfg):
        with pytest.raises(ConfigError) as err:
            check_fits(cfg, gs.make_mesh(), _rule(cfg), available=16 * GB)
        return str(err.value)

    message = under_command(overrides, refused)
    assert named in message and message.endswith(f"lower it, e.g. {fix}"), message


@pytest.mark.slow
@pytest.mark.parametrize("overrides, fix, above", [
    (("model.width=300",), "model.width=119", "model.width=120"),  # width 128, its default, needs 11.4 MB
    (("model.width=300", "model.depth=50"), "model.width=119 model.depth=1", "model.width=120 model.depth=1"),
    (("model.width=300", "model.depth=50"), "model.width=119 model.depth=1", "model.width=119 model.depth=2"),
])
def test_the_value_offered_fits_where_the_default_does_not(devices, overrides, fix, above):
    # Was "model.width=300 (at its default 128: 11.4 MB); lower it, e.g. model.width=128" with 10 MB available:
    # the advice, followed, was refused in turn. Then "e.g. model.width=64": halved, where 119 fits by the same
    # estimate; the value offered is the largest that fits (one more is refused), each setting in turn.
    cfg = compose_tiny(*overrides)
    with pytest.raises(ConfigError) as err:
        check_fits(cfg, gs.make_mesh(), _rule(cfg), available=10_000_000)
    assert str(err.value).endswith(f"e.g. {fix}"), str(err.value)
    check_fits(compose_tiny(*overrides, *fix.split()), gs.make_mesh(), _rule(cfg), available=10_000_000)
    with pytest.raises(ConfigError):
        check_fits(compose_tiny(*overrides, *above.split()), gs.make_mesh(), _rule(cfg), available=10_000_000)


@pytest.mark.slow
def test_a_float_setting_offered_is_the_largest_that_fits_to_two_digits(devices):
    # flux1's mlp_ratio: its default 4.0 (3.0 MB) does not fit 2.8 MB; was halved to 2.0, now the largest of two
    # significant digits that fits (2.9), and one step of the second digit more is refused.
    overrides = ("model=flux1", "model.mlp_ratio=100000.0")
    cfg = compose_tiny(*overrides)
    with pytest.raises(ConfigError) as err:
        check_fits(cfg, gs.make_mesh(), _rule(cfg), available=2_800_000)
    fix = re.search(r"e\.g\. model\.mlp_ratio=([0-9.]+)$", str(err.value)).group(1)
    assert 2.0 < float(fix) < 4.0, str(err.value)
    check_fits(compose_tiny(*overrides, f"model.mlp_ratio={fix}"), gs.make_mesh(), _rule(cfg), available=2_800_000)
    with pytest.raises(ConfigError):
        check_fits(compose_tiny(*overrides, f"model.mlp_ratio={float(fix) + 0.1:.12g}"), gs.make_mesh(), _rule(cfg),
                   available=2_800_000)


@pytest.mark.slow
def test_where_no_smaller_value_fits_the_message_says_so_and_names_splitting(devices):
    cfg = compose_tiny("model.width=300")  # its simulations take 49.2 KB of the 52 KB: 2.8 KB left for the state
    with pytest.raises(ConfigError) as err:
        check_fits(cfg, gs.make_mesh(), _rule(cfg), available=52_000)
    assert str(err.value).endswith("but 2.8 KB is available; the setting(s) responsible: model.width=300 (at its "
                                   "default 128: 11.4 MB); no smaller value fits (model.width=1 still needs 8.3 KB): "
                                   "split the weights (rule=fsdp, or rule=tensor with mesh.model_axis > 1) or use "
                                   "fewer devices"), str(err.value)
    with pytest.raises(ConfigError):  # the width it names is refused too: the message did not hide a fitting value
        check_fits(compose_tiny("model.width=1"), gs.make_mesh(), _rule(cfg), available=52_000)
