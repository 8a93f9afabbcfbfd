"""Save the train state as an Orbax checkpoint (``checkpoint_steps.ITEMS``): every N steps, the last K kept, never a
non-finite one. Imported through ``gensbi_sharding.checkpoint``."""

import os
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from gensbi_sharding.leaf_checks import check_placeable
from gensbi_sharding.checkpoint_items import (check_state_and_key, checked_json, checked_step, flat_by_path,
                                              item_handlers, nest_by_path, non_finite, stored_dtype)
from gensbi_sharding.checkpoint_steps import as_path, committed_steps
from gensbi_sharding.checkpoint_lock import (check_none_cut_short, check_save_directory, commit_barrier, continued,
                                             failed_save, finish_and_unlock, lock_directory, unlock,
                                             unwatch_if_idle, warn_beside_earlier, watch_exit)
from gensbi_sharding.factory import refuse_in_factory, refuse_traced
from gensbi_sharding.messages import shown
from gensbi_sharding.nodes import check_flag, check_value_leaves, is_int, is_prng_key, node_state

__all__ = ["CheckpointWriter"]

_FORMAT = 1
# A traced step, state or key met JAX's ConcretizationTypeError or Orbax's TypeHandler error (a tmp folder left).
_AFTER_STEP = ("writes files once per call, which a trace cannot: call it after the jitted step returns, "
               "writer.maybe_save(int(optimizer.step[...]), nnx.state((model, optimizer)), key)")


class CheckpointWriter:
    """Save the train state every ``every`` steps, keeping the last ``keep``; the caller saves the final step.

    Parameters
    ----------
    directory : str or os.PathLike
        The checkpoints folder (``<run>/checkpoints``); ``~`` expanded, made absolute, created if missing.
    every : int, default 0
        Steps between saves by ``maybe_save``, >= 0; 0: only ``save`` saves.
    keep : int, default 2
        Newest checkpoints kept, >= 1.
    config : mapping or None, default None
        The resolved config, JSON data (a Hydra ``DictConfig`` too, resolved), stored with every checkpoint
        (``saved_config`` reads it).
    async_save : bool, default True
        Write in the background (``close`` waits; an unclosed writer finishes at the script's end, at most
        ``exit_timeout_s``, and warns); a failed save is a RuntimeError at the next ``save``, ``steps``, ``close``.

    Raises
    ------
    ValueError, TypeError
        A bad ``every`` (< 0), ``keep`` (< 1), ``async_save``, ``config`` (no JSON mapping; an OmegaConf key ``???`` or
        not resolved, named) or ``directory`` (``""``, ``\\`` or ``[x]``, which TensorStore misreads).
    NotADirectoryError, OSError, FileNotFoundError
        ``directory`` a file or under one, not writable, or a symbolic link to nothing.
    RuntimeError
        Another ``CheckpointWriter``, in this process or another, has ``directory`` open (``close`` it first).
    FileExistsError
        ``directory`` holds step-named folders that are no checkpoints or cut short, or ``checkpoints/`` (a run
        folder), or is a checkpoint's step folder.
    """

    exit_timeout_s: float = 300.0  # the longest wait at the script's end for a save still under way
    commit_timeout_s: float = 30.0  # the other processes' wait for process 0's commit (a rename); read at __init__

    def __init__(self, directory: str | os.PathLike, *, every: int = 0, keep: int = 2,
                 config: Mapping[str, Any] | None = None, async_save: bool = True):
        if not is_int(every) or every < 0:
            raise ValueError(f"every must be an integer >= 0, got {shown(every)}; pass 0 to save only at the end")
        if not is_int(keep) or keep < 1:
            raise ValueError(f"keep must be an integer >= 1, got {shown(keep)}; pass e.g. keep=2")
        check_flag(async_save, "async_save")
        self.directory = as_path(directory, "directory").absolute()
        self.config = checked_json(config, "config", "the resolved config, e.g. OmegaConf.to_container(cfg, "
                                   "resolve=True)", label="config")
        check_save_directory(self.directory)
        lock = lock_directory(self.directory)  # before Orbax's manager: it deletes others' unfinished saves
        self.every, self.keep, self._closed = every, keep, False
        # Step folders made in ``save``, not by a background thread, which Python's exit refuses (the exit hung).
        asynchronous = ocp.AsyncOptions(create_directories_asynchronously=False,
                                        barrier_sync_fn=commit_barrier(self.commit_timeout_s))
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=async_save,
                                               async_options=asynchronous)
        try:  # saves cut short removed here, not by Orbax's cleanup_tmp_directories: its thread ran on past close()
            for temporary in ocp.step.all_temporary_paths(self.directory) if jax.process_index() == 0 else ():
                temporary.get().rmtree()  # (a script ending then printed its traceback, "cannot schedule new futures")
            check_none_cut_short(self.directory)
            self._manager = ocp.CheckpointManager(self.directory, options=options,
                                                  item_handlers=item_handlers(saving=True))
        except BaseException:
            unlock(lock)
            raise
        # Collected unclosed (or at exit): its save under way finishes before the folder is let go (finish_and_unlock).
        self._status = {"directory": self.directory, "step": None, "warned": False}  # named if the exit cuts a save
        self._unlock = weakref.finalize(self, finish_and_unlock, self._manager, lock, self._status)
        self.last_saved: int | None = None
        watch_exit(self)

    def due(self, step: int) -> bool:
        """Whether ``maybe_save`` saves at ``step`` (a multiple of ``every`` > 0).

        Parameters
        ----------
        step : int (or a 0-d integer array, as ``save`` takes)

        Returns
        -------
        bool

        Raises
        ------
        ValueError, RuntimeError
            ``step`` no integer >= 0, whatever ``every``; a call under ``jax.jit`` (any JAX transformation).
        """
        refuse_traced("CheckpointWriter.due", _AFTER_STEP)
        return self._due(step)

    def _due(self, step: Any) -> bool:  # the public methods' body, each checked for a trace once (a step's one call)
        step = checked_step(step)  # with every=0 too
        return self.every > 0 and step % self.every == 0

    def maybe_save(self, step: int, state: Any, key: jax.Array, *, info: Mapping[str, Any] | None = None) -> bool:
        """Call ``save`` if ``due(step)``.

        Parameters
        ----------
        step, state, key, info : as ``save``

        Returns
        -------
        bool
            Whether it saved (as ``save``'s).

        Raises
        ------
        ValueError, TypeError, FloatingPointError, RuntimeError
            As ``save`` when due; else a closed writer, a bad ``step``, ``state``, ``key`` or ``info``, at every step.
        """
        refuse_traced("CheckpointWriter.maybe_save", _AFTER_STEP)
        if self._due(step):
            return self._save(step, state, key, info)
        self._checked_arguments(state, key, info)
        return False

    def save(self, step: int, state: Any, key: jax.Array, *, info: Mapping[str, Any] | None = None) -> bool:
        """Save ``state`` and the RNG ``key`` as checkpoint ``step``, unless ``step`` was the last one saved.

        Parameters
        ----------
        step : int
            The training step of ``state``, >= 0 (a 0-d integer array too, ``optimizer.step[...]``).
        state : nnx.State or mapping of arrays
            The train state (``nnx.state((model, optimizer))``; a graph node is read as its ``nnx.state``), any mesh.
        key : jax.Array
            A typed PRNG key (``jax.random.key(0)``), any shape.
        info : mapping or None, default None
            JSON data (str keys, no NaN or inf) saved beside the arrays: ``Restored.info``, ``saved_info``.

        Returns
        -------
        bool
            True if saved; False if ``step`` equals ``last_saved`` (nothing written).

        Raises
        ------
        ValueError
            ``step`` not an integer >= 0 after every step on disk, ``info`` no JSON data, a NumPy value its placed
            dtype cannot hold, or, in a job of several processes, ``key`` on this process's devices alone (nothing is
            written).
        RuntimeError
            The writer closed, the previous save failed, an array of ``state`` deleted (donated), or a call under
            ``jax.jit`` (any JAX transformation; ``due`` and ``maybe_save`` too).
        TypeError
            ``state`` no NNX node, state or non-empty mapping (or holding a leaf neither an array nor a number, an
            abstract one, or one of a dtype TensorStore cannot hold: uint4), ``key`` no typed PRNG key, or ``info`` no
            mapping.
        FloatingPointError
            NaN anywhere, or inf outside optimizer state (``nnx.OptState``, or under an ``opt_state`` key): nothing
            written; the latest finite checkpoint named.
        """
        refuse_traced("CheckpointWriter.save", _AFTER_STEP)
        return self._save(step, state, key, info)

    def _save(self, step: Any, state: Any, key: jax.Array, info: Mapping[str, Any] | None) -> bool:
        step = checked_step(step)
        # Checked before the last step's early return: save(final, None, key) after maybe_save(final, ...) passed.
        info = self._checked_arguments(state, key, info)
        if step == self.last_saved:
            return False
        # The steps on disk once the save under way is done: Orbax's cached list kept a folder moved aside since
        # (refused as "already saved", which ``steps`` no longer listed; its StepAlreadyExistsError named no fix).
        self._named(self._manager.wait_until_finished)  # the previous save's failure, on every process, named here
        self._manager.reload()
        steps = list(self._manager.all_steps())
        if steps and step <= max(steps):
            # An older step would be saved, then ``keep`` would delete newer ones and ``latest`` never pick it.
            what = "is already saved" if step in steps else f"is older than step {max(steps)}, the newest"
            raise ValueError(f"step {step} {what} in {self.directory} (steps {steps}); save under a step after "
                             f"{max(steps)} (a run continuing them restores from that folder first), or write to "
                             "another directory (a new run: this script run again from its start)")
        warn_beside_earlier(self.directory, steps, step, self.keep)  # a run again from its start
        # As nnx.state: a Module as a pytree would save tied weights twice. No sown values: a fresh target has none.
        tree = node_state(state, False)
        named = dict(check_value_leaves(flat_by_path(tree).items(), "CheckpointWriter.save"))
        for name, leaf in named.items():  # restore places every array: one it would change is not saved
            check_placeable(leaf, f"CheckpointWriter.save: {name} (shape {np.shape(leaf)})")
            if isinstance(leaf, jax.ShapeDtypeStruct):  # Orbax's "TypeHandler lookup failed" named no fix
                raise TypeError(f"CheckpointWriter.save: {name} is abstract ({leaf}), a shape without values: save a "
                                "built state (init_sharded's, a train step's), not abstract_sharded's or a restore "
                                "target")
            # else Orbax's thread fails, its error naming only the folder
            if not is_prng_key(leaf) and not stored_dtype(dtype := getattr(leaf, "dtype", np.float32)):
                wider = "uint8" if jnp.issubdtype(dtype, jnp.unsignedinteger) else "float16"
                raise TypeError(f"CheckpointWriter.save: {name} is {dtype}, which TensorStore, Orbax's array storage, "
                                f"cannot hold: keep it as a dtype it holds (e.g. {wider}) or out of the saved state")
        # An optimizer's state may hold inf (a running max): a variable's type says so, a plain (typeless) leaf's path
        var = lambda v: isinstance(v, nnx.Variable)  # noqa: E731
        optimizer = flat_by_path(jax.tree.map(lambda v: v if isinstance(v, nnx.OptState) else None, tree, is_leaf=var))
        plain = flat_by_path(jax.tree.map(lambda v: None if var(v) else v, tree, is_leaf=var))
        if bad := non_finite(named, {*optimizer, *(name for name in plain if "opt_state" in name.split("/"))}):
            latest = self.latest()
            raise FloatingPointError(
                f"the train state at step {step} is not finite ({len(bad)} array(s) hold NaN or inf, "
                f"e.g. {', '.join(bad[:3])}); it was not saved and displaces no checkpoint. "
                + (f"Last finite checkpoint: {latest}" if latest else "No earlier checkpoint was saved"))
        # Zero-size arrays (Orbax refuses them) and values holding none (MaskedNode): ``restore`` takes its target's.
        flat = {**{f"state/{name}": leaf for name, leaf in named.items()
                   if getattr(leaf, "size", 1) != 0 and jax.tree.leaves(leaf)}, "rng": key}
        impls = {name: str(jax.random.key_impl(leaf)) for name, leaf in flat.items() if is_prng_key(leaf)}
        flat.update({name: jax.random.key_data(flat[name]) for name in impls})
        meta = {"format": _FORMAT, "step": step, "key_impls": impls, "info": info}
        self._named(lambda: self._manager.save(step, force=True, args=ocp.args.Composite(  # a failed commit
            arrays=ocp.args.PyTreeSave(nest_by_path(flat)), meta=ocp.args.JsonSave(meta),  # (async_save=False) named
            config=ocp.args.JsonSave(self.config))), step, OSError)
        self.last_saved = self._status["step"] = step
        continued(self.directory)  # a writer reopened on it here continues them
        return True

    def _checked_arguments(self, state: Any, key: Any, info: Any) -> Any:
        """``info`` as ``save`` writes it, once a closed writer, ``state``, ``key`` and ``info`` are checked."""
        refuse_in_factory("CheckpointWriter.save",
                          "save the model once built: writer.save(step, nnx.state(model), key)")
        if self._closed:
            raise RuntimeError(f"this CheckpointWriter of {self.directory} is closed; open a new one to save")
        check_state_and_key(state, key)
        return checked_json(info, "info", "e.g. {'best_step': 3}")

    def steps(self) -> list[int]:
        """List the complete steps on disk after waiting for pending writes (``committed_steps``).

        Returns
        -------
        list of int
            Ascending.
        """
        self._named(self._manager.wait_until_finished)
        return committed_steps(self.directory)

    def latest(self) -> Path | None:
        """Find the newest complete step folder after pending writes.

        Returns
        -------
        pathlib.Path or None
            ``directory / str(step)``; None before any.
        """
        return self.directory / str(steps[-1]) if (steps := self.steps()) else None

    def close(self) -> None:
        """Wait for pending writes and release the Orbax manager (also on leaving a ``with`` block); idempotent.

        Raises
        ------
        RuntimeError
            If the save under way failed (named as ``save`` names it); the writer is closed all the same.
        """
        try:  # once (a weakref.finalize): waits for pending writes, releases the manager, then the folder
            self._named(self._unlock)
        finally:
            self._closed = True
            unwatch_if_idle()

    def _named(self, call: Any, step: int | None = None, errors: type = Exception) -> None:
        """Call ``call`` (a wait for the save under way, or the save of ``step``); raise its failure naming the fix."""
        try:
            call()
        except errors as err:  # Orbax's own: process 0's OSError, the others' TimeoutError
            raise failed_save(err, self.last_saved if step is None else step, self.directory,
                              self.commit_timeout_s) from err

    def __enter__(self) -> "CheckpointWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

