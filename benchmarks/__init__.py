"""The benchmark scripts as a package, for ``python -m benchmarks.<script>`` from the repository.

Each script and module here imports its siblings by their own names (``from cli_args import ...``), as
``python benchmarks/<script>.py`` finds them beside it; under ``-m`` only the repository's folder is searched, so
``python -m benchmarks.sbibm_plot`` (and ``init``, ``shard_model``, ...) ended in ``ModuleNotFoundError: No module named
'cli_args'``. Python imports this package first: its folder joins the path, last, so that it shadows nothing.
"""

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))

from cli_args import not_a_script  # noqa: E402 (after the path above)

not_a_script(__name__, __file__)  # run as a file (python benchmarks/__init__.py): name the script to run
