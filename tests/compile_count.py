"""``compiles()``: the programs XLA compiles inside a ``with`` block, for tests that a path compiles nothing (or one)."""

import contextlib

import jax


@contextlib.contextmanager
def compiles():
    """Yield a list that collects the name of every program compiled in the block (JAX's backend-compile event);
    the caller may empty it in place (``names[:] = []``) to count a part of the block."""
    names = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            names.append(kwargs.get("fun_name", event))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield names
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
