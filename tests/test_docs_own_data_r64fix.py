"""docs/gensbi_models.md on a data set of one's own, as the README's "your own simulator" link lands (round 64).

Was: the link's section opened on a model of one's own; that such a data set trains but cannot be sampled or scored
came a long paragraph later, and the keyword check of its factory before any folder (a075a49) went unsaid.
"""

import re
import sys

from faults_helpers import REPO


def _section() -> str:
    text = (REPO / "docs" / "gensbi_models.md").read_text()
    return text.split("## A model or data set of your own in the harness\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_link_lands_on_the_sentence_that_such_a_data_set_cannot_be_sampled_or_scored():
    readme = (REPO / "README.md").read_text()
    link = "[your own simulator or model](docs/gensbi_models.md#a-model-or-data-set-of-your-own-in-the-harness)"
    assert link in readme
    first = " ".join(_section().strip().split("\n\n", 1)[0].split())  # the paragraph right under the heading
    assert first.startswith("A data set of your own trains, but its runs cannot be sampled or scored")
    assert "`eval.enabled=false`" in first


def test_the_page_quotes_the_factory_keyword_refusal_as_it_is_given(tmp_path, monkeypatch):
    from gensbi_sharding.harness.factory_keywords import data_factory_keyword_problem

    section = " ".join(_section().split())
    quoted = re.search(r"\(`(data=noisy_gauss's factory load_noisy \(my_data\.py\) takes no keyword process_count), "
                       r"\.\.\.(: add process_count to its keywords)`\)", section)
    assert quoted and "is refused before the run's folder is made" in section
    (tmp_path / "my_data.py").write_text(
        "def load_noisy(*, num_simulations, val_fraction, seed, num_observation, theta_transform, x_transform,\n"
        "               process_index):\n    raise AssertionError('not called')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_data", None)
    import my_data

    said = data_factory_keyword_problem("noisy_gauss", my_data.load_noisy)
    assert said.startswith(quoted.group(1)) and quoted.group(2) in said, said
