"""harness.train and harness.ema: the schedule, the EMA, early stopping that restores the best weights,
a diverging run that stops, and the EMA placed and checkpointed like the parameters."""

import dataclasses
import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding

import gensbi_sharding as gs
from compile_count import compiles
from gensbi_sharding import checkpoint
from gensbi_sharding.harness import train as T
from gensbi_sharding.harness.data import iterate_batches
from gensbi_sharding.harness.ema import EMA, EMAParam, warmed_up_decay
from gensbi_sharding.harness.models.mlp import make_mlp

pytestmark = pytest.mark.filterwarnings("ignore::gensbi_sharding.sharding.ExperimentalRuleWarning")


def tiny_state(mesh=None, ema_decay=0.9, lr=1e-2, steps=40, rule="tensor", width=16, weight_decay=0.0):
    model = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=width, depth=1, time_embed_dim=8)
    if mesh is not None:
        gs.shard_model(model, mesh, rule)
    tx = T.make_optimizer(learning_rate=lr, weight_decay=weight_decay, steps=steps, schedule="constant")
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    if mesh is not None:
        gs.shard_model(optimizer, mesh, rule)
    ema = EMA(model, ema_decay) if ema_decay else None
    if ema is not None and mesh is not None:
        gs.shard_model(ema, mesh, rule)
    return model, optimizer, ema


def batches(rows=64, batch=16, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((rows, 2)).astype(np.float32)
    x = np.concatenate([theta, rng.standard_normal((rows, 1))], axis=1).astype(np.float32)
    return iterate_batches(theta, x, batch_size=batch, seed=seed, mesh=None, place=False)


def leaves(tree):
    return [np.asarray(a) for a in jax.tree.leaves(tree)]


@pytest.mark.slow
def test_schedules():
    lr = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100, end_value=0.0)
    tx = T.make_optimizer(learning_rate=1e-3, weight_decay=0.0, steps=100, warmup_steps=10)
    params = {"w": jnp.zeros(())}
    state = tx.init(params)
    # The schedule drives AdamW: its first update is lr(0) = 0, the warm-up's start.
    updates, state = tx.update({"w": jnp.ones(())}, state, params)
    assert float(updates["w"]) == 0.0
    assert float(lr(10)) == pytest.approx(1e-3) and float(lr(100)) == pytest.approx(0.0, abs=1e-12)
    assert float(lr(55)) == pytest.approx(0.5e-3, rel=1e-5)  # half-way down the cosine
    const = T.make_optimizer(learning_rate=1e-3, weight_decay=0.0, steps=100, schedule="constant")
    updates, _ = const.update({"w": jnp.ones(())}, const.init(params), params)
    assert float(updates["w"]) == pytest.approx(-1e-3, rel=1e-3)  # adam's first step: -lr * sign
    with pytest.raises(ValueError, match="train.schedule='linear'"):
        T.make_optimizer(learning_rate=1e-3, weight_decay=0.0, steps=100, schedule="linear")
    with pytest.raises(ValueError, match="train.warmup_steps=100"):
        T.make_optimizer(learning_rate=1e-3, weight_decay=0.0, steps=100, warmup_steps=100)


def test_an_optimizer_of_array_settings_is_made_as_optax_makes_it():
    # Was (make_optimizer cached by its settings): TypeError "unhashable type: 'ArrayImpl'" for a learning rate that
    # is an array, which optax.adamw takes; such an optimizer is made afresh each call, others are shared.
    params = {"w": jnp.zeros(())}
    for learning_rate in (jnp.float32(1e-3), np.array(1e-3)):
        tx = T.make_optimizer(learning_rate=learning_rate, weight_decay=0.0, steps=100, schedule="constant")
        updates, _ = tx.update({"w": jnp.ones(())}, tx.init(params), params)
        assert float(updates["w"]) == pytest.approx(-1e-3, rel=1e-3)
        assert T.make_optimizer(learning_rate=learning_rate, weight_decay=0.0, steps=100) is not tx


@pytest.mark.slow
def test_ema_follows_the_warmed_up_decay():
    model, _, ema = tiny_state(ema_decay=0.999)
    start = leaves(ema.params)
    assert all(np.array_equal(a, b) for a, b in zip(start, leaves(nnx.state(model, nnx.Param))))
    assert float(warmed_up_decay(0.999, jnp.uint32(0))) == pytest.approx(0.1)
    assert float(warmed_up_decay(0.999, jnp.uint32(10 ** 6))) == pytest.approx(0.999)
    nnx.update(model, jax.tree.map(lambda a: a + 1.0, nnx.state(model, nnx.Param)))
    ema.update(model, jnp.uint32(0))  # decay 0.1: 90 % of the way to the new weights
    for old, new in zip(start, leaves(ema.params)):
        np.testing.assert_allclose(new, old + 0.9, atol=1e-6)
    with pytest.raises(ValueError, match="train.ema_decay=0.999"):
        EMA(model, 1.0)


@pytest.mark.slow
def test_ema_is_placed_and_checkpointed_like_the_params(devices, tmp_path):
    mesh = gs.make_mesh(model_axis=2)
    model, optimizer, ema = tiny_state(mesh)
    specs = {k: v.spec for k, v in gs.sharding_of(model).items()}
    ema_specs = {k.removeprefix("params/"): v.spec for k, v in gs.sharding_of(ema).items()}
    assert ema_specs == specs and any("model" in str(s) for s in specs.values())
    assert all(isinstance(v, EMAParam) for v in jax.tree.leaves(
        ema.params, is_leaf=lambda x: isinstance(x, nnx.Variable)))
    functions, state = T.make_step_functions(model, optimizer, mesh, ema=ema)
    result = T.train(functions, state, batches(), steps=6, key=jax.random.key(0), mesh=mesh,
                     batch_size=16, progress=False)
    saved_ema = leaves(functions.weights(result.state))
    with checkpoint.CheckpointWriter(tmp_path / "ckpt") as writer:
        writer.save(6, result.state, jax.random.key(0))
    # Restore onto another mesh: the EMA comes back with its values, placed by the new plan.
    mesh_b = gs.make_mesh(model_axis=4)
    fresh = tiny_state(mesh_b)
    restored = checkpoint.restore(tmp_path / "ckpt", checkpoint.abstract_state_for(fresh, mesh_b, "tensor"))
    assert len(restored.state) == 3
    for a, b in zip(saved_ema, leaves(restored.state[2])):
        np.testing.assert_array_equal(a, b)
    kernel = restored.state[2]["params"]["blocks"][0]["up"]["kernel"].get_value()
    assert kernel.sharding.is_equivalent_to(NamedSharding(mesh_b, gs.sharding_of(fresh[0])[
        "blocks/0/up/kernel"].spec), 2)


@pytest.mark.slow
def test_a_second_step_of_the_same_graph_mesh_and_placements_reuses_its_programs(devices):
    # Was: a new jitted pair per call, so every run in one process (a sweep's next job, an in-process run) traced,
    # lowered and compiled its step and validation loss again: about 0.9 s of a tiny run's 1.6 s.
    mesh = gs.make_mesh(model_axis=2)
    model, optimizer, ema = tiny_state(mesh)
    first, state = T.make_step_functions(model, optimizer, mesh, ema=ema)
    model, optimizer, ema = tiny_state(mesh)  # new objects, the same settings
    again, state_again = T.make_step_functions(model, optimizer, mesh, ema=ema)
    assert again is not first and again.train_step is first.train_step and again.eval_loss is first.eval_loss
    assert T.make_optimizer(learning_rate=1e-2, weight_decay=0.0, steps=40, schedule="constant") is optimizer.tx
    ran = T.train(first, state, batches(), steps=3, key=jax.random.key(0), mesh=mesh, batch_size=16, progress=False)
    with compiles() as compiled:
        rerun = T.train(again, state_again, batches(), steps=3, key=jax.random.key(0), mesh=mesh, batch_size=16,
                        progress=False)
    assert not [name for name in compiled if "train_step" in name], compiled
    np.testing.assert_array_equal(rerun.losses, ran.losses)


@pytest.mark.slow
def test_a_step_of_another_setting_mesh_or_placement_gets_programs_of_its_own(devices):
    mesh = gs.make_mesh(model_axis=2)

    def step_of(mesh=mesh, **settings):
        model, optimizer, ema = tiny_state(mesh, **settings)
        return T.make_step_functions(model, optimizer, mesh, ema=ema)[0].train_step

    shared = step_of()
    assert step_of() is shared
    others = {"mesh": [gs.make_mesh(model_axis=4), None], "rule": ["fsdp"], "ema_decay": [0.5, 0], "lr": [1e-3],
              "steps": [41], "width": [8], "weight_decay": [1e-4]}
    for field, values in others.items():
        for value in values:
            assert step_of(**{field: value}) is not shared, (field, value)
    # The learning rate 1 and 1.0 make the same program, but the settings' types are kept apart, not mixed up.
    assert T.make_optimizer(learning_rate=1, weight_decay=0.0, steps=4) is not T.make_optimizer(
        learning_rate=1.0, weight_decay=0.0, steps=4)
    from gensbi_sharding.harness.step_programs import jitted_steps

    assert jitted_steps.cache_info().currsize <= jitted_steps.cache_info().maxsize == 8  # 10 keys made above


class ScaledVelocity(nnx.Module):
    """A bfloat16 velocity scaled by a setting (or a tuple of them): a Python float keeps it bfloat16 (JAX's weak
    type), a NumPy one makes it float32, though the two settings compare (and hash) equal."""

    def __init__(self, scale):
        self.linear = nnx.Linear(2 + 3 + 1, 2, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
        self.scales = scale if isinstance(scale, tuple) else (scale,)

    def __call__(self, theta, x, t):
        velocity = self.linear(jnp.concatenate([theta, x, t[:, None]], axis=-1))
        for scale in self.scales:
            velocity = velocity * scale
        return velocity


@pytest.mark.slow
@pytest.mark.parametrize("setting, equal_setting", [(0.75, np.float32(0.75)), (1, 1.0), (True, 1),
                                                    ((0.75, 2), (np.float32(0.75), 2))])
def test_settings_equal_in_value_but_not_in_type_get_steps_of_their_own(setting, equal_setting):
    # Was: one jitted step for both (the split graphs compare equal), traced with the first's settings: a bfloat16
    # batch's loss under np.float32(0.75) came back bfloat16, as under 0.75, where its own program gives float32.
    from gensbi_sharding.harness.step_programs import jitted_steps

    def steps_of(scale):
        model = ScaledVelocity(scale)
        tx = T.make_optimizer(learning_rate=1e-2, weight_decay=0.0, steps=4, schedule="constant")
        return T.make_step_functions(model, nnx.Optimizer(model, tx, wrt=nnx.Param), None)

    rng = np.random.default_rng(0)
    batch = {"theta": jnp.asarray(rng.standard_normal((16, 2)), jnp.bfloat16),
             "x": jnp.asarray(rng.standard_normal((16, 3)), jnp.bfloat16)}
    first, _ = steps_of(setting)
    second, state = steps_of(equal_setting)
    own_eval_loss = jitted_steps.__wrapped__(second.graphdef, None)[1]
    loss, _ = second.eval_loss(state, batch, jax.random.key(0))
    own_loss, _ = own_eval_loss(state, batch, jax.random.key(0))
    assert loss.dtype == own_loss.dtype and float(loss) == float(own_loss)
    if np.float32(0.75) in (equal_setting if isinstance(equal_setting, tuple) else (equal_setting,)):
        assert loss.dtype == jnp.float32  # the NumPy scalar's promotion, not the Python float's bfloat16
    assert first.graphdef == second.graphdef and second.eval_loss is not first.eval_loss
    assert second.train_step is not first.train_step
    assert steps_of(equal_setting)[0].eval_loss is second.eval_loss  # the same types again: shared


@pytest.mark.slow
def test_a_reused_step_says_the_warnings_of_its_trace_again(devices):
    # Was: said by the run that traced the step only. A sweep's next job (experiment=quick model=transformer
    # rule=tensor mesh.model_axis=8 seed=0,1, in one process) reused the step, so its launch.log lacked the
    # "activation ... left unsplit" warning the first job's held.
    mesh = gs.make_mesh(model_axis=4)

    def unsplit_state():
        model = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=6, depth=1, time_embed_dim=8,
                         partition_axis=gs.PartitionAxis(hidden_state_axis="model"))  # width 6 over 4 devices
        optimizer = nnx.Optimizer(model, T.make_optimizer(learning_rate=1e-2, weight_decay=0.0, steps=40,
                                                          schedule="constant"), wrt=nnx.Param)
        gs.shard_model(model, mesh, "replicated")
        gs.shard_model(optimizer, mesh, "replicated")
        return model, optimizer

    def unsplit_run():
        model, optimizer = unsplit_state()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")  # as a job's: a repeat from the same line is said once
            functions, state = T.make_step_functions(model, optimizer, mesh)
            with gs.mesh_context(mesh):  # as train validates: traced too, saying the step's warnings again
                functions.eval_loss(state, gs.shard_batch(next(batches()), mesh), jax.random.key(1))
            T.train(functions, state, batches(), steps=2, key=jax.random.key(0), mesh=mesh, batch_size=16,
                    progress=False)
        return functions, [(str(w.message), w.lineno) for w in caught if "left unsplit" in str(w.message)]

    first, said = unsplit_run()
    again, said_again = unsplit_run()
    assert again.train_step is first.train_step  # reused: traced once
    assert len(said) == 2 and sorted(said_again) == sorted(said), (said, said_again)  # the input's and the block's
    assert "activation ('batch', 'hidden') of shape (16, 6) left unsplit" in said[0][0]
    # sample.py's own observation only merges the state, running no step: the step's trace is not said there (was,
    # with the step cache: every warning of the training run's trace, in sample.py's output).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged, _ = T.make_step_functions(*unsplit_state(), mesh, warn_again=False)
    assert merged.train_step is first.train_step and [str(w.message) for w in caught] == []


@dataclasses.dataclass
class LazyNotes:
    """A mutable dataclass (unhashable) whose ``summary`` is filled in on first use: unset until then."""
    data: list
    summary: str = dataclasses.field(init=False)


@pytest.mark.slow
@pytest.mark.parametrize("notes", [{"data": [1, 2]}, LazyNotes([1, 2])], ids=["dict", "dataclass with a field unset"])
def test_a_graph_that_cannot_be_hashed_gets_a_step_of_its_own(notes):
    # The dataclass was: AttributeError "'LazyNotes' object has no attribute 'summary'" from the step cache's key (the
    # types of the graph's settings, read field by field), though a graph it cannot hash needs no key.
    model, optimizer, ema = tiny_state()
    model.notes = notes  # a static attribute holding a dict or a mutable dataclass: the split graph cannot be hashed
    with pytest.raises(TypeError, match="unhashable"):
        hash(nnx.split((model, optimizer, ema))[0])
    first, state = T.make_step_functions(model, optimizer, None, ema=ema)
    again, _ = T.make_step_functions(model, optimizer, None, ema=ema)
    assert again.train_step is not first.train_step
    result = T.train(first, state, batches(), steps=2, key=jax.random.key(0), mesh=None, batch_size=16,
                     progress=False)
    assert result.steps == 2 and np.all(np.isfinite(result.losses))


@pytest.mark.slow
def test_a_bfloat16_models_ema_starts_in_float32_compiling_one_program(devices):
    # Was an eager astype per parameter (bfloat16 -> float32), a program compiled per shape and sharding: 7 here,
    # about 40 for a Flux1 with model.param_dtype=bfloat16.
    mesh = gs.make_mesh(model_axis=2)
    model = make_mlp(dim_theta=3, dim_x=7, rngs=nnx.Rngs(0), width=40, depth=1, time_embed_dim=6)  # shapes no other
    nnx.update(model, jax.tree.map(lambda v: v.astype(jnp.bfloat16), nnx.state(model, nnx.Param)))
    gs.shard_model(model, mesh, "tensor")
    weights = {name: v.get_value() for name, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    with compiles() as compiled:
        ema = EMA(model, 0.9)
    assert len(compiled) == 1, compiled
    averages = {name: v.get_value() for name, v in nnx.to_flat_state(ema.params)}
    assert averages.keys() == weights.keys()
    for name, value in weights.items():
        average = averages[name]
        assert value.dtype == jnp.bfloat16 and average.dtype == jnp.float32, name
        assert average.sharding.is_equivalent_to(value.sharding, value.ndim), name
        np.testing.assert_array_equal(np.asarray(average), np.asarray(value, np.float32))


@pytest.mark.slow
def test_the_ema_and_the_kept_best_weights_are_copies_made_compiling_nothing(devices):
    # Was a program compiled per parameter shape (Array.copy) for the EMA's start, and again for the first best weights
    # early stopping keeps: 14 compilations and 0.2 s in a run of the tiny MLP, more for models with more shapes.
    from types import SimpleNamespace

    from gensbi_sharding.harness.validation import EarlyStopping, record_validation

    mesh = gs.make_mesh(model_axis=2)
    model = make_mlp(dim_theta=2, dim_x=5, rngs=nnx.Rngs(0), width=24, depth=1, time_embed_dim=8)  # shapes no other
    gs.shard_model(model, mesh, "tensor")  # test copies: nothing cached
    params = nnx.state(model, nnx.Param)
    weights = {name: v.get_value() for name, v in nnx.to_flat_state(params)}
    with compiles() as compiled:
        ema = EMA(model, 0.9)
        stopper = EarlyStopping()
        record_validation(stopper, SimpleNamespace(weights=lambda state: state), weights, 4, 1.5)
    assert compiled == [] and stopper.best_step == 4
    averages = {name: v.get_value() for name, v in nnx.to_flat_state(ema.params)}
    for copies in (averages, stopper.best_weights):
        assert copies.keys() == weights.keys()
        for name, value in weights.items():
            copy = copies[name]
            assert copy.sharding == value.sharding and copy.dtype == value.dtype, name
            np.testing.assert_array_equal(np.asarray(copy), np.asarray(value))
            # New buffers: the train step donates the parameters and the averages, each once.
            assert {s.data.unsafe_buffer_pointer() for s in copy.addressable_shards}.isdisjoint(
                s.data.unsafe_buffer_pointer() for s in value.addressable_shards), name


@pytest.mark.slow
@pytest.mark.parametrize("ema_decay", [0.9, 0.0])
def test_early_stopping_restores_the_best_weights(ema_decay):
    """Validation losses 5, 4, 3, then worse: stop after `patience` worse ones, return the third's weights."""
    model, optimizer, ema = tiny_state(ema_decay=ema_decay)
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    scripted = iter([5.0, 4.0, 3.0, 3.5, 3.2, 3.1, 1.0])
    functions.eval_loss = lambda state, batch, key: (next(scripted), 1.0)  # (mean loss, pairs)
    seen = {}
    result = T.train(functions, state, batches(), steps=40, key=jax.random.key(0), mesh=None, batch_size=16,
                     val_batches=[{}], progress=False, val_every=4, patience=3,
                     on_step=lambda step, st: seen.__setitem__(step, leaves(functions.weights(st))))
    assert result.stopped_early and result.steps == 24 and len(result.losses) == 24
    assert result.best_step == 12 and result.val_loss == 3.0
    assert [s for s, _ in result.val_history] == [4, 8, 12, 16, 20, 24]
    returned = leaves(functions.weights(result.state))
    assert all(np.array_equal(a, b) for a, b in zip(returned, seen[12]))
    assert not all(np.array_equal(a, b) for a, b in zip(returned, seen[24]))
    # The rest of the state is the last step's: training could go on from it.
    _, last_optimizer, *_ = nnx.merge(functions.graphdef, result.state)
    assert int(last_optimizer.step[...]) == 24


@pytest.mark.slow
def test_without_patience_the_loop_runs_on_and_keeps_the_best():
    model, optimizer, ema = tiny_state()
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    real = functions.eval_loss
    result = T.train(functions, state, batches(), steps=20, key=jax.random.key(0), mesh=None, batch_size=16,
                     val_batches=[next(batches(seed=1))], progress=False, val_every=5)
    assert not result.stopped_early and result.steps == 20 and len(result.val_history) == 4
    best_step, best_loss = min(result.val_history, key=lambda pair: pair[1])
    assert result.best_step == best_step and result.val_loss == best_loss
    # The returned weights score the best validation loss again (same fixed key).
    val_key = jax.random.fold_in(jax.random.key(0), 0x7FFFFFFF)
    assert float(real(result.state, next(batches(seed=1)), val_key)[0]) == pytest.approx(best_loss, rel=1e-6)


@pytest.mark.slow
def test_a_diverging_run_stops():
    model, optimizer, ema = tiny_state(lr=1e30)
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    with pytest.raises(FloatingPointError, match=r"training diverged: .* steps 1\.\.5; lower train.learning_rate"):
        T.train(functions, state, batches(), steps=400, key=jax.random.key(0), mesh=None, batch_size=16,
                progress=False, log_every=5)


def test_a_pause_waits_for_the_queued_steps_and_leaves_out_only_itself():
    # Was: a validation was timed from where the loop had dispatched to, so the queued (asynchronous)
    # steps it waited for were subtracted too, and such a window looked twice as fast.
    from gensbi_sharding.harness.step_timer import StepTimer

    now = [0.0]
    timer = StepTimer(clock=lambda: now[0], sync=lambda pending: now.__setitem__(0, now[0] + 5.0))
    timer.start_window()
    now[0] += 2.0  # steps dispatched
    with timer.paused(pending=object()):  # the queued steps finish first: 5 s of step time
        now[0] += 1000.0  # the save / validation
        with timer.paused():  # nested: counted once
            now[0] += 10.0
    now[0] += 3.0  # more steps
    assert timer.window_s() == 10.0 and timer.paused_s == 1010.0
    timer.start_window()
    now[0] += 4.0
    assert timer.window_s() == 4.0 and timer.paused_s == 1010.0


@pytest.mark.slow  # an end-to-end run
def test_checkpoint_saves_and_validations_are_not_step_time(tmp_path, monkeypatch, devices):
    # Was: on_step's checkpoint save was timed as step time (60 steps: 5.66 ms a step without
    # checkpoints, 56 ms with one every 20). A save or a validation here takes 0.5 s; a step, milliseconds.
    import time

    from faults_helpers import run_tiny
    from gensbi_sharding.harness import validation

    real_save, real_validation = checkpoint.CheckpointWriter.save, T.validation_loss
    timed = []

    def slow_save(self, *args, **kwargs):
        time.sleep(0.5)
        timed.append("save")
        return real_save(self, *args, **kwargs)

    def slow_validation(*args, **kwargs):
        time.sleep(0.5)
        timed.append("validation")
        return real_validation(*args, **kwargs)

    monkeypatch.setattr(checkpoint.CheckpointWriter, "save", slow_save)
    monkeypatch.setattr(T, "validation_loss", slow_validation)
    assert validation.validation_loss is real_validation  # the harness's own validation is the one slowed
    metrics = run_tiny(tmp_path / "run", "train.checkpoint_every=2", "train.val_every=2")
    assert metrics["status"] == "ok" and metrics["steps"] == 8
    assert timed.count("save") >= 4 and timed.count("validation") >= 4  # in every window of 4 steps
    # Included, they would add at least 0.25 s a step (1 s per window of 4 steps).
    assert metrics["median_step_s"] < 0.2, metrics["median_step_s"]
    assert metrics["samples_per_s"] == pytest.approx(metrics["config"]["data"]["batch_size"]
                                                     / metrics["median_step_s"], rel=1e-6)


@pytest.mark.slow
def test_the_progress_bar_shows_no_best_validation_before_the_first(monkeypatch):
    """Before the first validation the bar read best_val=inf, as a diverged loss would."""
    postfixes = []

    class Bar:
        def __init__(self, *args, **kwargs):
            pass

        def update(self, n):
            pass

        def refresh(self):
            pass

        def close(self):
            pass

        def set_postfix(self, refresh=True, **fields):
            postfixes.append(fields)

    monkeypatch.setattr(T, "progress_bar", Bar)
    model, optimizer, ema = tiny_state()
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    result = T.train(functions, state, batches(), steps=6, key=jax.random.key(0), mesh=None, batch_size=16,
                     val_batches=[next(batches(seed=1))], log_every=2, val_every=4)
    assert [f["step"] for f in postfixes] == [2, 4, 6]
    assert [f["best_val"] for f in postfixes] == ["not yet", f"{result.val_history[0][1]:.4f}",
                                                  f"{result.val_loss:.4f}"]


@pytest.mark.slow
def test_the_loss_curve_is_copied_to_the_host_not_stacked_into_one_program(monkeypatch):
    # Was: jnp.stack over every step's loss at the end of the loop and after a Ctrl-C: XLA compiled one program
    # of that many operands (9.5 s at 5,000 steps, minutes at the sbibm preset's 20,000, during which a Ctrl-C
    # or a preemption's SIGTERM went unanswered).
    stacked = []
    real_stack = jnp.stack
    monkeypatch.setattr(jnp, "stack",
                        lambda arrays, *a, **k: stacked.append(len(arrays)) or real_stack(arrays, *a, **k))
    model, optimizer, ema = tiny_state()
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    result = T.train(functions, state, batches(), steps=30, key=jax.random.key(0), mesh=None, batch_size=16,
                     progress=False, log_every=10)
    assert result.losses.shape == (30,) and result.losses.dtype == np.float32 and np.isfinite(result.losses).all()

    def ctrl_c(step, state):
        if step == 25:
            raise KeyboardInterrupt

    model, optimizer, ema = tiny_state()
    functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
    with pytest.raises(KeyboardInterrupt) as stop:
        T.train(functions, state, batches(), steps=30, key=jax.random.key(0), mesh=None, batch_size=16,
                progress=False, log_every=10, on_step=ctrl_c)
    assert stop.value.losses.shape == (25,) and np.array_equal(stop.value.losses[:20], result.losses[:20])
    assert stacked == []


def test_a_line_logged_during_training_is_not_glued_to_the_progress_bar(capsys):
    # Was: a console line logged while the bar was drawn (a Ctrl-C's warning, a validation) came right after the
    # bar's text, "train:   0%|...| 0/100000 [00:00<?, ?step/s][WARNING] received Ctrl-C ...", on one line.
    import logging
    import sys

    handler = logging.StreamHandler(sys.stderr)  # the console: the bar's stream too, as on a terminal
    logging.root.addHandler(handler)
    try:
        model, optimizer, ema = tiny_state()
        functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
        T.train(functions, state, batches(), steps=6, key=jax.random.key(0), mesh=None, batch_size=16,
                val_batches=[], progress=True, log_every=2,
                on_step=lambda step, st: step == 3 and logging.getLogger("gensbi_sharding").warning("a line"))
    finally:
        logging.root.removeHandler(handler)
    err = capsys.readouterr().err
    assert "train:" in err  # the bar was drawn
    assert "a line" in err.replace("\r", "\n").splitlines(), repr(err)


@pytest.mark.parametrize("terminal", [False, True])
def test_an_error_after_the_progress_bar_starts_its_own_line(monkeypatch, capsys, terminal):
    # Was, with the console in a file (python launch.py ... > log.txt 2>&1): "\rtrain:   0%|...| 0/40 [...][ERROR]
    # FloatingPointError: ...", the error on the bar's line (tqdm's carriage returns, no newline after the last state,
    # and the bar left drawn while the error was logged). In a file the bar now writes whole lines; on a terminal it
    # is cleared before the error.
    import logging
    import os
    import sys

    from gensbi_sharding.harness.console import ConsoleFormatter

    monkeypatch.setattr(os, "isatty", lambda fd: terminal)  # the console's stderr: a terminal, or a file
    handler = logging.StreamHandler(sys.stderr)  # the console, in the bar's stream (as `> log.txt 2>&1` joins them)
    handler.setFormatter(ConsoleFormatter("%(message)s"))
    logging.root.addHandler(handler)

    def on_step(step, state):
        if step == 3:
            logging.getLogger("gensbi_sharding").warning("a warning during training")
        if step == 5:
            raise FloatingPointError("training diverged")

    try:
        model, optimizer, ema = tiny_state()
        functions, state = T.make_step_functions(model, optimizer, None, ema=ema)
        with pytest.raises(FloatingPointError):
            T.train(functions, state, batches(), steps=8, key=jax.random.key(0), mesh=None, batch_size=16,
                    val_batches=[], progress=True, log_every=2, on_step=on_step)
        logging.getLogger("gensbi_sharding").error("FloatingPointError: training diverged")  # as run() ends the job
    finally:
        logging.root.removeHandler(handler)
    err = capsys.readouterr().err
    if terminal:  # redrawn in place; cleared (a carriage return) before the error, which starts the line
        assert "train:" in err and err.split("[ERROR]")[0].endswith("\r"), repr(err)
        assert "[ERROR] FloatingPointError: training diverged" in err.replace("\r", "\n").splitlines(), repr(err)
    else:  # whole lines: the bar's states (one per window), each console line on its own
        lines = err.splitlines()
        assert "\r" not in err and [line for line in lines if not line.startswith("train:")] == [
            "[WARNING] a warning during training", "[ERROR] FloatingPointError: training diverged"], repr(err)
        assert [line.split("|")[2].split("[")[0].strip() for line in lines if line.startswith("train:")] == [
            "0/8", "2/8", "4/8"], repr(err)


@pytest.mark.slow  # a launch.py process
def test_in_a_log_file_the_error_that_ends_training_has_a_line_of_its_own(tmp_path):
    # The console to a file, as `python launch.py ... > log.txt 2>&1` (or a SLURM job's output file) writes it.
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    log = tmp_path / "log.txt"
    with open(log, "w") as console:
        code = subprocess.run([sys.executable, str(repo / "launch.py"), "experiment=quick", "mesh=none", "train.steps=40",
                               "train.log_every=5", "eval.enabled=false", "data.num_simulations=768",
                               "train.learning_rate=1e8", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                              env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=console, stderr=subprocess.STDOUT,
                              timeout=300).returncode
    text = log.read_bytes().decode()  # as written: read_text() would turn the bar's carriage returns into newlines
    assert code == 1 and "\r" not in text, text[-2000:]
    errors = [line for line in text.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and errors[0].startswith("[ERROR] FloatingPointError: training diverged"), text[-2000:]
    assert any(line.startswith("train:   0%|          | 0/40 ") for line in text.splitlines()), text[-2000:]


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_a_diverged_run_names_its_learning_rate_and_one_to_try(tmp_path, devices):
    # Was: "training diverged: mean loss nan over steps 1..4; lower train.learning_rate or check the data; no finite
    # checkpoint was saved before it", naming neither the value that diverged nor a value to try.
    from faults_helpers import run_tiny

    metrics = run_tiny(tmp_path / "run", "train.learning_rate=1e30")
    assert metrics["status"] == "error" and metrics["error"] == (
        "FloatingPointError: training diverged: mean loss nan over steps 1..4; lower train.learning_rate or check the "
        "data (this run: train.learning_rate=1e+30; e.g. train.learning_rate=0.003); no finite checkpoint to resume "
        "from: start afresh with a lower train.learning_rate (train.checkpoint_every=N keeps some)")
    # A resumed run that diverges before its first save: the checkpoint it resumed from is finite, the one to go back
    # to (was: "no finite checkpoint was saved before it (train.checkpoint_every=N keeps some)", that set or not).
    assert run_tiny(tmp_path / "finite", "train.steps=4")["status"] == "ok"
    metrics = run_tiny(tmp_path / "resumed", f"train.resume={tmp_path / 'finite'}", "train.learning_rate=1e30",
                       "train.checkpoint_every=2")
    assert metrics["status"] == "error" and metrics["error"].endswith(
        f"resume from the last finite checkpoint with train.resume={tmp_path / 'finite' / 'checkpoints' / '4'} and a "
        "lower train.learning_rate"), metrics["error"]


@pytest.mark.slow
@pytest.mark.parametrize("model_axis", [None, 2])
def test_the_loop_steps_plain_arrays_and_trains_bitwise_as_the_step_over_variables(devices, model_axis):
    # Was: the loop stepped the split nnx.State, so every step flattened and rebuilt its nnx.Variables (Flux1: 379,
    # about 3 ms of host work a step). The loop now steps their arrays; on_step sees them, and the trained state is
    # bitwise the one of the step over the variables, and of a hand-written nnx.jit step on the modules.
    mesh = None if model_axis is None else gs.make_mesh(model_axis=model_axis)
    key = jax.random.key(3)
    model, optimizer, ema = tiny_state(mesh)
    functions, state = T.make_step_functions(model, optimizer, mesh, ema=ema)
    seen = []
    result = T.train(functions, state, batches(), steps=5, key=key, mesh=mesh, batch_size=16, progress=False,
                     on_step=lambda step, st: seen.append(jax.tree.leaves(st, is_leaf=lambda x: isinstance(
                         x, (nnx.Variable, nnx.State)))))
    assert len(seen) == 5 and all(isinstance(leaf, jax.Array) for leaves_seen in seen for leaf in leaves_seen)
    assert isinstance(result.state, nnx.State) and jax.tree.structure(result.state) == functions.state_def

    model, optimizer, ema = tiny_state(mesh)  # the same seed: the same start
    again, state = T.make_step_functions(model, optimizer, mesh, ema=ema)
    losses = []
    with gs.mesh_context(mesh):
        for batch in itertools.islice(batches(), 5):
            state, loss = again.train_step(state, batch, key)  # as train() is given them
            losses.append(float(loss))
    np.testing.assert_array_equal(result.losses, np.float32(losses))
    assert jax.tree.structure(state) == jax.tree.structure(result.state)
    for a, b in zip(leaves(result.state), leaves(state)):
        np.testing.assert_array_equal(a, b)
    if mesh is not None:
        return
    model, optimizer, ema = tiny_state()

    @nnx.jit
    def hand_step(model, optimizer, ema, batch):  # the textbook step on the modules
        count = optimizer.step[...]
        loss, grads = nnx.value_and_grad(lambda m: T.flow_matching_loss(
            m, batch["theta"], batch["x"], jax.random.fold_in(key, count)))(model)
        optimizer.update(model, grads)
        ema.update(model, count)
        return loss

    hand = [float(hand_step(model, optimizer, ema, batch)) for batch in itertools.islice(batches(), 5)]
    np.testing.assert_array_equal(result.losses, np.float32(hand))
    for a, b in zip(leaves(result.state), leaves(nnx.state((model, optimizer, ema)))):
        np.testing.assert_array_equal(a, b)
