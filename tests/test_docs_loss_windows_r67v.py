"""docs/harness.md describes losses.png's windows as they are since windows are counted from step 0 (80c54dc): the
page still said a window was 'cut shorter at a resume', which a resumed run whose history is joined no longer does."""

from pathlib import Path

import numpy as np

from gensbi_sharding.harness.loss_history import windows

REPO = Path(__file__).resolve().parents[1]


def test_harness_md_says_windows_are_counted_from_step_0_not_cut_at_a_resume():
    text = " ".join((REPO / "docs" / "harness.md").read_text().split())
    assert "cut shorter at a resume" not in text
    assert "train loss per window of `train.log_every` steps, counted from step 0" in text
    # what the page now says: a run resumed at step 4 (its history joined) has the uninterrupted run's windows
    steps = np.arange(1, 11)
    ends, _, sizes = windows(steps, np.ones(10), 3)
    assert ends.tolist() == [3, 6, 9, 10] and sizes.tolist() == [3, 3, 3, 1]
    # and the first window after a resume whose earlier losses are not found holds fewer steps (a hollow point)
    ends, _, sizes = windows(np.arange(5, 11), np.ones(6), 3)
    assert ends.tolist() == [6, 9, 10] and sizes.tolist() == [2, 3, 1]
