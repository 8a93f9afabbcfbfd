"""docs/harness.md names the console line a sweep table's ``best val loss`` column repeats: ``validation: best``.

Was: "the best held-out loss (the console's `val loss`...)", while the console's ``val loss`` is the last
validation's (``final_val_loss``, as the same page says of metrics.json): a user comparing a job's table row with its
console read 0.4734 against 0.4743 and could not tell which was right (found trying the harness, session 73).
"""

import re
from pathlib import Path

DOC = (Path(__file__).parents[1] / "docs" / "harness.md").read_text()


def test_the_console_s_val_loss_is_never_called_the_best():
    # every "the console's `val loss`" the page writes sits beside the last validation, not the best
    for match in re.finditer(r"the console's `val loss`", DOC):
        before = DOC[max(0, match.start() - 120):match.start()]
        assert "best held-out loss (" not in before[-30:], before + match.group()


def test_the_sweep_table_s_best_val_loss_is_the_validation_best_line():
    assert "the best held-out loss (the console's `validation: best ... at step N`" in DOC
