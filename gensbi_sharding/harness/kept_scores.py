"""An earlier attempt's posterior samples file, kept where it was scored from the same weights and settings.

The file names of an observation's samples, and the score a resumed job's evaluation keeps rather than sample and
score again (``posterior.evaluate_observations``, which samples and scores).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from gensbi_sharding.harness.earlier_attempts import with_aside_copies

__all__ = ["samples_name", "earlier_scores", "scored_before", "one_process"]


def samples_name(num_observation: int, first: bool) -> str:
    """File name of an observation's samples: the first keeps the historical name."""
    return "posterior_samples.npz" if first else f"posterior_samples_{num_observation}.npz"


def one_process() -> bool:
    """Whether the job runs in one process (``jax.process_count``): only there is an earlier attempt's score kept, the
    others cannot see process 0's files, and every process must draw alike."""
    import jax

    return jax.process_count() == 1


def earlier_scores(out: Path, observations: list[int], n_of: dict[int, int],
                   settings_of: Callable[[int], dict[str, Any]]) -> dict[int, tuple]:
    """Each observation's score an earlier attempt wrote (``scored_before``) under either file name, or set aside
    (``earlier_attempts``), all read before one is written (so none is overwritten before it is read)."""
    found = {}
    for k in observations:
        for path in with_aside_copies([out / samples_name(k, first) for first in (True, False)]):
            if (kept := scored_before(path, n_of[k], settings_of(k))) is not None:
                found[k] = kept
                break
    return found


def scored_before(path: Path, n: int, settings: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float, Path] | None:
    """``(samples, c2st_scores, acceptance, path)`` of ``path`` if an earlier attempt wrote it with these ``settings``
    and ``n`` samples, else None (no file, one from other weights or settings, or one written before these fields)."""
    try:
        with np.load(path) as saved:
            if len(saved["samples"]) != n or any(saved[key].item() != value for key, value in settings.items()):
                return None
            return saved["samples"], saved["c2st_scores"], float(saved["acceptance"]), path
    # (an empty or cut-off file: EOFError, BadZipFile; a foreign one: KeyError, TypeError)
    except Exception:  # noqa: BLE001
        return None  # not an error out of the resumed job, for a file it would write over
