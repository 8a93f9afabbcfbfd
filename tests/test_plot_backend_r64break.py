"""The harness's PNG files are drawn whatever ``MPLBACKEND`` names (it never opens a window).

Was: ``MPLBACKEND=nonexistent python launch.py ...`` trained, then ended at its first plot (``losses.png``, drawn by
every run, ``eval.plot`` or not) with matplotlib's ``ValueError: Key backend: 'nonexistent' is not a valid value for
backend``, raised by ``import matplotlib`` itself: the C2ST was never computed nor the samples written.
"""

import os
import subprocess
import sys

import pytest

DRAW = ("import pathlib, sys, numpy as np; from gensbi_sharding.harness import plots; "
        "p = plots.plot_losses(pathlib.Path(sys.argv[1]), steps=np.arange(1, 5), losses=np.ones(4), window=2); "
        "import matplotlib; print(matplotlib.get_backend().lower())")


def draw(tmp_path, backend):
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | ({"MPLBACKEND": backend} if backend else {})
    return subprocess.run([sys.executable, "-c", DRAW, str(tmp_path / "losses.png")], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_a_backend_matplotlib_does_not_know_leaves_the_plot_drawn_and_says_how_to_fix_it(tmp_path):
    done = draw(tmp_path, "nonexistent")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "losses.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    warned = [line for line in done.stderr.splitlines() if "MPLBACKEND" in line]
    assert warned == ["MPLBACKEND=nonexistent is not a backend matplotlib knows: ignored (the harness draws its PNG "
                      "files with Agg, whatever it names); unset it, or set MPLBACKEND=agg"], done.stderr[-2000:]
    assert done.stdout.split() != ["nonexistent"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["agg", "svg"])
def test_a_backend_matplotlib_knows_is_kept_as_matplotlib_itself_keeps_it(tmp_path, backend):
    # The advice above works as written (MPLBACKEND=agg), and a valid choice of the user's is matplotlib's backend
    # after the harness drew, as it would have been without the harness.
    done = draw(tmp_path, backend)
    assert done.returncode == 0 and "MPLBACKEND" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.split() == [backend]
    assert (tmp_path / "losses.png").stat().st_size > 1000


def test_every_figure_of_the_harness_and_the_benchmarks_is_made_where_mplbackend_is_checked():
    # The kind, not the one plot: a module importing matplotlib on its own would end on MPLBACKEND=nonexistent again
    # (was: plots.py, evaluate.py's posterior plot and benchmarks/sbibm_plot.py each imported it).
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    sources = [*(repo / "gensbi_sharding").rglob("*.py"), *(repo / "benchmarks").glob("*.py"), *repo.glob("*.py")]
    direct = sorted(str(path.relative_to(repo)) for path in sources if path.name != "agg_figure.py"
                    and any(line.strip().startswith(("import matplotlib", "from matplotlib.backends",
                                                     "from matplotlib.figure", "from matplotlib import"))
                            for line in path.read_text().splitlines()))
    assert direct == []
