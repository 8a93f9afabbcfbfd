"""Step 6's words: posterior.png's title names what its ± is, and the header counts the samples kept, not the draws.

Was: the title "two_moons, observation 1 | rule tensor on mesh 4x2 | C2ST 0.612 ± 0.011", its ± unnamed (read as the
posterior's uncertainty; it is the spread over the classifier's folds, as the final line says); the header "[6/7]
sample + C2ST: 500 posterior draws per observation", where data.theta_transform=none draws more than it keeps (the
draws outside the prior rejected: ~551 for 500 at 91% acceptance).
"""

from gensbi_sharding.harness.console_lines import evaluation_header
from gensbi_sharding.harness.plots import posterior_title


def test_the_posterior_plots_title_names_its_spread_as_over_the_folds():
    title = dict(task="two_moons", observation=1, rule="tensor", mesh_shape=[4, 2], c2st=0.61234)
    assert posterior_title(**title, c2st_sd=0.0112, folds=5) == (
        "two_moons, observation 1 | rule tensor on mesh 4x2 | C2ST 0.612 ± 0.011 over 5 folds")
    assert posterior_title(**title, c2st_sd=None, folds=5) == "two_moons, observation 1 | rule tensor on mesh 4x2 | " \
                                                              "C2ST 0.612"  # no spread: no folds named


def test_step_6s_header_counts_the_posterior_samples_kept():
    header = evaluation_header(500, [1], [], {"weights": "EMA at the best validation step", "step": 8})
    assert header.startswith("[6/7] sample + C2ST: 500 posterior samples per observation [1] "), header
    assert "draws" not in header
