"""``mesh_sizes_hint``: the mesh that axis sizes (``mesh={data:2,model:4}``, ``mesh.data_axis=3``) describe, as this
harness sets it (``mesh.model_axis``, and the devices to get).

Shared by ``override_dicts`` (a mesh given as a dict) and ``key_paths`` (a data axis size typed as a key); it lives
below both so neither imports the other. Pure Python: no JAX.
"""

from __future__ import annotations

from gensbi_sharding.harness.units import is_int

__all__ = ["mesh_sizes_hint"]


def mesh_sizes_hint(value: dict) -> str:
    """For ``mesh={data:2,model:4}``: the mesh those axis sizes describe, as this harness sets it."""
    data, model = value.get("data"), value.get("model")
    if data is model is None or not all(is_int(n) and n >= 1
                                        for n in (1 if data is None else data, 1 if model is None else model)):
        return ""  # mesh={x:1}, data=0, data=abc: no mesh to name
    data, model = (None if n is None else int(n) for n in (data, model))  # NumPy's: 's' * np.bool_ is a TypeError
    if model is None:
        return f"; the data axis takes the devices mesh.model_axis leaves: for data={data}, mesh.model_axis=1 on " \
               f"{data} device{'s' * (data != 1)} ({_devices(data)})"
    n = (data or 1) * model if data else None
    return (f"; the mesh's axes come from mesh.model_axis (data = devices // model_axis): for "
            + (f"data={data} x model={model}, mesh.model_axis={model} on {n} device{'s' * (n != 1)} "
               f"({_devices(n)})" if n else f"model={model}, mesh.model_axis={model}"))


def _devices(n: int) -> str:
    """How to get ``n`` devices: ``devices.cpu_count=n``, and the list of their ids where it is short enough to type
    (``data=1000000``: was a 14 MB line of 2,000,000 ids; ``data=2000000000``: a list too big to build)."""
    listed = f", or mesh.devices=[{','.join(map(str, range(n)))}]" if n <= _LISTED_DEVICES else ""
    return f"devices.cpu_count={n}{listed}"


_LISTED_DEVICES = 16  # ids written out up to here (a node of 8 or 16 accelerators); beyond: devices.cpu_count only
