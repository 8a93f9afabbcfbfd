"""The README's library examples run as printed."""

import pytest

from faults_helpers import REPO


def _readme_python(holding):
    """The ```python block whose text holds ``holding``, in the README or the page it links for it (the training
    script is on docs/library.md, the wrapping of GenSBI's models on docs/gensbi_models.md)."""
    import re

    pages = [REPO / "README.md", REPO / "docs" / "library.md", REPO / "docs" / "gensbi_models.md"]
    blocks = [block for page in pages for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)]
    return next(block for block in blocks if holding in block)


@pytest.fixture(scope="module")
def readme_examples(request, tmp_path_factory):
    """``{holding: its run}``: each README example the session's tests run, as ``python <file of the block>`` in a
    folder of its own (``PYTHONPATH`` the repository), forked one after the other from one process that imported
    JAX, Flax and optax once (tests/fork_launch.py: each still a process of its own, from the block's first line)."""
    import os

    from fork_launch import run_forked

    wanted = [item.callspec.params["holding"] for item in request.session.items
              if getattr(item, "originalname", None) == "test_the_readme_s_library_examples_run_as_printed"
              and item.callspec.params["printed"] is not None]
    root = tmp_path_factory.mktemp("readme")
    (root / "run.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
    runs = []
    for i, holding in enumerate(wanted):
        (root / str(i)).mkdir()
        (root / f"{i}.py").write_text(_readme_python(holding))
        runs.append({"args": [str(root / f"{i}.py")], "cwd": root / str(i)})
    (root / "fork").mkdir()
    procs = run_forked(runs, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300 * max(len(runs), 1),
                       workdir=root / "fork", script=root / "run.py", imports=("jax", "flax.nnx", "optax"))
    return dict(zip(wanted, procs))


@pytest.mark.parametrize("holding, printed", [
    # The examples run as processes (forked from one that imported JAX once): ~10-20 s for the two, slow.
    pytest.param("class Block(nnx.Module)", "P(None, 'model')", marks=pytest.mark.slow),
    ("A training script of your own", None),  # (the prose before it; the block itself below)
    pytest.param("def factory():", "30 P('data', None) True", marks=pytest.mark.slow),
    pytest.param("def flux1_factory():", "(8, 2) (8, 2)", marks=pytest.mark.slow),  # GenSBI's models: 30 s
])
def test_the_readme_s_library_examples_run_as_printed(request, holding, printed):
    # Typed: the README's Python examples, copied into a file, in a fresh clone. Was: the library's part had no
    # example of a training script of one's own (sharded init, steps, checkpoints, a restore onto another mesh),
    # and its table showed CheckpointWriter(dir, every=, keep=).save(...), where save ignores every= (maybe_save
    # reads it): a loop calling save each step wrote every step.
    readme = (REPO / "README.md").read_text()
    if printed is None:
        assert holding in readme and "`.maybe_save(step, state, key)` (saves when `step` is a multiple of N)" in readme
        return
    proc = request.getfixturevalue("readme_examples")[holding]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == printed
