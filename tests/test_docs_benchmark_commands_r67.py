"""docs/benchmarks.md's shrunk commands to try each script paste as they are (round 67).

Was: they began with the script's path (``benchmarks/step_overhead.py --blocks 2 --steps 5``); the scripts are not
executable, so a pasted one ended "Permission denied". Each now begins with ``python``, as every other command does.
"""

import os
import re
import shlex

from faults_helpers import REPO


def test_the_try_one_commands_name_the_interpreter_of_scripts_that_need_one():
    text = (REPO / "docs" / "benchmarks.md").read_text()
    sentence = text.split("to try one, shrink it", 1)[1].split("Numbers this small mean nothing", 1)[0]
    commands = [shlex.split(span) for span in re.findall(r"`([^`]+)`", sentence)]
    assert [c[1] for c in commands] == ["benchmarks/shard_model.py", "benchmarks/step_overhead.py",
                                        "benchmarks/init.py", "benchmarks/gensbi_pipeline.py"]
    assert [c[0] for c in commands] == ["python"] * 4
    assert not any(os.access(REPO / c[1], os.X_OK) for c in commands)  # why: without python, "Permission denied"
