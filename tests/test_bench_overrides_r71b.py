"""benchmarks/gensbi_pipeline.py refuses a harness override that would leave its side fewer steps than GenSBI's."""

import sys

import pytest

from faults_helpers import REPO, load_benchmark


def _script(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its cli_args
    return load_benchmark("gensbi_pipeline")


@pytest.mark.parametrize("override, said", [
    # Was: accepted; the harness's side stopped early (train.patience) or went on from a checkpoint (train.resume),
    # so its C2ST and step count were not those of --steps steps, under a table caption saying "--steps steps" of
    # each and a GenSBI side that ran them all from scratch.
    ("train.patience=2", "harness override train.patience=2: this script sets train.patience for both sides; "
                         "leave it out (early stopping is off on both sides, so both run every --steps step)"),
    ("+train.resume=/tmp/run", "harness override +train.resume=/tmp/run: this script sets train.resume for both "
                               "sides; leave it out (both sides train every --steps step from scratch)"),
])
def test_an_override_that_cuts_the_harness_sides_steps_is_refused(monkeypatch, capsys, override, said):
    script = _script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", "30", override])

    def accepted(parser):  # past the refusals: the run would start (minutes), so the test stops it here
        raise AssertionError(f"{override} was accepted")
    monkeypatch.setattr(script, "require_gensbi", accepted)
    with pytest.raises(SystemExit) as stop:
        script.main()
    assert stop.value.code == 2
    assert said in capsys.readouterr().err
