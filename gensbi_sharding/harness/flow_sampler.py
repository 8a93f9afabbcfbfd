"""One compiled ODE sampler per velocity field: many observations, one compile.

A run scores up to ten observations and tops up each one's draws when some land outside
the prior: every one of those draws has the same shapes, so ``FlowSampler`` traces and
compiles the integration once and takes the observation, the noise and the weights as
arguments. JAX is imported inside, so importing this module never starts JAX's backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gensbi_sharding import batch_axes, mesh_context, pad_for_mesh, replicate, shard_sample_init
from gensbi_sharding.harness.units import is_int

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh

__all__ = ["FlowSampler", "CHUNK_STEPS", "BATCH_ROWS"]

#: Rows integrated at once by default (``eval.batch_size``). Measured (8 simulated CPU devices, mesh (8, 1), the
#: default rule; docs/memory.md): the GPU-sized Flux1 of benchmarks/gensbi_scale.py needs 4.0 GB of temporaries a
#: device to integrate 10,000 rows at once, against its train step's 2.2 GB at data.batch_size=1024; 2,048 rows need
#: 0.42 GB. The default mlp: 2.7 MB at 10,000 rows against 2.4 MB for the step, 0.56 MB at 2,048.
BATCH_ROWS = 2048

#: ODE steps per compiled call: between calls the sampler asks ``stop_check`` and Python runs its signal handlers
#: (a Ctrl-C raises there), so a stop is answered within this many steps. As one program, the whole integration of
#: ``eval.ode_steps=2147483647`` would hold SIGTERM and Ctrl-C for hours (only SIGKILL ending it).
CHUNK_STEPS = 8


class FlowSampler:
    """Posterior samples from a flow-matching velocity field, ``rows`` at a time, compiled once.

    Integrates d theta/dt = v(theta_t, x, t) from t = 0 (the given standard normal noise)
    to t = 1 (data) with ``num_steps`` fixed midpoint (explicit RK2) steps: two velocity
    evaluations per step, second order, exact for fields constant in theta. The loop is
    a jitted ``lax.fori_loop`` under ``mesh_context(mesh)``, traced and compiled at the
    first call only, run ``CHUNK_STEPS`` steps a call (the first step an argument, so one
    program serves every chunk; the same steps, so the same samples, as one loop). The
    noise is padded with zero rows to ``pad_for_mesh`` and split over the mesh
    (``shard_sample_init``); the observation is replicated as a (dim_x,) vector and
    broadcast inside jit, constrained to theta's sharding, so every device conditions its
    own rows without communication.

    Parameters
    ----------
    velocity_fn : callable
        Pure, jittable ``v(theta_t, x, t)`` or, when ``params`` is given,
        ``v(params, theta_t, x, t)``, with theta_t (B, dim_theta), x (B, dim_x),
        t (B,), all float32, returning (B, dim_theta), in the model's (z-scored) units.
    rows, num_steps : int
        Samples per call and integration steps, both >= 1 (checked by the caller).
    batch_size : int, optional
        Rows integrated at once (``eval.batch_size``): a call runs ``rows`` in blocks of this many, one compiled
        program for them all, so the sampler's device memory follows it, not ``rows`` (10,000 samples of a GPU-sized
        model at once can outgrow the train step's). The same noise rows at any size; the samples equal to float32
        rounding across sizes (XLA's CPU matmul rounds by a program's row count), bit for bit at one size. None:
        ``BATCH_ROWS``.
    mesh : jax.sharding.Mesh or None
        Mesh the samples are split over (its batch axes); None: default device.
    params : pytree, optional
        Passed to ``velocity_fn`` as a jit argument (e.g. an ``nnx.State``): its arrays
        keep their placement and are not baked into the executable.
    stop_check : callable, optional
        Called between chunks of steps (it raises to stop: the run's ``PreemptionWatch.check_together``).
        Several processes run every chunk alike: there it is asked only where it is marked ``collective``
        (all processes stop at the same call; one stopping alone would leave the others waiting in a collective).

    Raises
    ------
    ValueError
        ``batch_size`` not an int >= 1; at the first call, if the velocity's output is not (B, dim_theta).
    """

    def __init__(self, velocity_fn: Callable[..., Any], *, rows: int, num_steps: int, mesh: Mesh | None,
                 params: Any = None, stop_check: Callable[[], None] | None = None, batch_size: int | None = None):
        import jax

        self.rows, self.mesh, self.params, self.num_steps = rows, mesh, params, num_steps
        if batch_size is not None and (not is_int(batch_size) or batch_size < 1):  # True is no row count
            raise ValueError(f"batch_size={batch_size!r}: rows integrated at once, an int >= 1 (None: {BATCH_ROWS})")
        self.block = min(rows, BATCH_ROWS if batch_size is None else int(batch_size))  # rows per program call
        self.stop_check = stop_check or (lambda: None)
        self._padded, _ = pad_for_mesh(self.block, mesh)
        # Per instance, not a module-level cache keyed on velocity_fn: such a cache would keep
        # every caller's closure (and any arrays it holds) alive.
        self._integrate = jax.jit(self._integrator(velocity_fn, num_steps))

    def _integrator(self, velocity_fn: Callable[..., Any], num_steps: int) -> Callable[..., Any]:
        import jax
        import jax.numpy as jnp
        from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

        mesh, padded, with_params = self.mesh, self._padded, self.params is not None
        row_sharding = None if mesh is None else NamedSharding(mesh, P(batch_axes(mesh) or None))
        h = 1.0 / num_steps

        def integrate(theta0, obs_vec, prm, first):
            x = jnp.broadcast_to(obs_vec, (padded, obs_vec.shape[0]))
            if row_sharding is not None:
                # Explicit mesh axes carry shardings in the types: change them with reshard;
                # on Auto axes a constraint guides the partitioner.
                explicit = any(t == AxisType.Explicit for t in mesh.axis_types)
                x = (jax.sharding.reshard(x, row_sharding) if explicit
                     else jax.lax.with_sharding_constraint(x, row_sharding))

            def velocity(theta, t):
                t_rows = jnp.full((padded,), t, jnp.float32)
                # prm is a tracer here: params reach the model as a jit argument, not a constant.
                v = velocity_fn(prm, theta, x, t_rows) if with_params else velocity_fn(theta, x, t_rows)
                if v.shape != theta.shape:
                    raise ValueError(f"velocity_fn returned shape {v.shape}, expected {theta.shape} "
                                     "(batch, dim_theta)")
                return v.astype(theta.dtype)

            def step(k, theta):
                t = k * h
                mid = theta + 0.5 * h * velocity(theta, t)
                return theta + h * velocity(mid, t + 0.5 * h)

            # num_steps - first, not first + CHUNK_STEPS: that overflows int32 near eval.ode_steps' bound (2**31 - 1)
            return jax.lax.fori_loop(first, first + jnp.minimum(CHUNK_STEPS, num_steps - first), step, theta0)

        return integrate

    def __call__(self, observation: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Integrate ``noise`` (rows, dim_theta) float32 at ``observation`` (dim_x,) float32.

        Returns
        -------
        ndarray, shape (rows, dim_theta), float32
            Padding rows removed; gathered from every process in a multi-process run.
        """
        blocks = [self._block(observation, noise[at:at + self.block]) for at in range(0, self.rows, self.block)]
        return np.concatenate(blocks)[:self.rows]

    def compiled_block(self, dim_x: int, dim_theta: int) -> Any:
        """The compiled program of one block of ODE steps (``jax.stages.Compiled``), from shapes alone: what
        ``compiled_report`` reads the sampler's per-device memory from (``params`` may be abstract:
        ``jax.ShapeDtypeStruct`` leaves at their shardings)."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec as P

        rows_at = None if self.mesh is None else NamedSharding(self.mesh, P(batch_axes(self.mesh) or None))
        everywhere = None if self.mesh is None else NamedSharding(self.mesh, P())
        theta = jax.ShapeDtypeStruct((self._padded, dim_theta), np.float32, sharding=rows_at)
        obs = jax.ShapeDtypeStruct((dim_x,), np.float32, sharding=everywhere)
        with mesh_context(self.mesh):
            return self._integrate.lower(theta, obs, self.params, np.int32(0)).compile()

    def _block(self, observation: np.ndarray, noise: np.ndarray) -> np.ndarray:
        import jax

        padded = np.zeros((self._padded, noise.shape[1]), np.float32)
        padded[:len(noise)] = noise
        with mesh_context(self.mesh):
            out, obs = shard_sample_init(padded, self.mesh), replicate(observation, self.mesh)
            for first in range(0, self.num_steps, CHUNK_STEPS):
                if first:  # the chunk before has ended (dispatch is asynchronous): ask now, not all chunks queued
                    out.block_until_ready()
                    if jax.process_count() == 1 or getattr(self.stop_check, "collective", False):
                        self.stop_check()  # several processes: only a check they all make alike
                out = self._integrate(out, obs, self.params, np.int32(first))
        if jax.process_count() > 1:  # rows live on other hosts too: gather the global array
            from jax.experimental import multihost_utils
            out = multihost_utils.process_allgather(out, tiled=True)
        return np.asarray(out, dtype=np.float32)[:len(noise)]
