"""A matplotlib figure drawn by Agg, whatever the environment's ``MPLBACKEND`` names.

The harness only writes PNG files and never opens a window, so the backend matplotlib would choose is never used.
Yet ``import matplotlib`` itself checks ``MPLBACKEND`` and raises on a name it does not know
(``MPLBACKEND=nonexistent``, a typo): that ended a run after training, at its first plot, with nothing scored.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

__all__ = ["agg_figure", "import_matplotlib"]

log = logging.getLogger("gensbi_sharding")
_LOCK = threading.Lock()  # the environment is the process's: one import at a time reads it without the variable


def import_matplotlib():
    """Import matplotlib, ignoring (with one warning) an ``MPLBACKEND`` it does not know.

    Returns
    -------
    module
        ``matplotlib``. A backend it knows stays matplotlib's choice, exactly as its own import sets it.
    """
    if "matplotlib" in sys.modules:  # imported already (by the user, or earlier here): its backend is settled
        return sys.modules["matplotlib"]
    with _LOCK:
        value = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib
        finally:
            if value is not None:
                os.environ["MPLBACKEND"] = value
    if value:  # what matplotlib's import does with the variable, with the name checked here instead
        try:
            matplotlib.rcParams["backend"] = value
        except ValueError:
            log.warning("MPLBACKEND=%s is not a backend matplotlib knows: ignored (the harness draws its PNG files "
                        "with Agg, whatever it names); unset it, or set MPLBACKEND=agg", value)
    return matplotlib


def agg_figure(**figure_kwargs):
    """A ``matplotlib.figure.Figure`` with an Agg canvas, which ``savefig`` draws to PNG without any backend.

    Parameters
    ----------
    **figure_kwargs
        ``Figure``'s own arguments (``figsize``, in inches).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, its canvas attached.
    """
    import_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**figure_kwargs)
    FigureCanvasAgg(fig)
    return fig
