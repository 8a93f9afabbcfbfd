"""Faults the lead fixed in round 46: a count option's refusal that suggests a value the next check refuses."""

import argparse
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("flag, typed, said, accepted", [
    # Was "'-1e1' is a whole number written as a float; write -10", then "--num-samples -10 must be an integer >= 1".
    ("--num-samples", "-1e1", "'-1e1' must be a whole number >= 1; e.g. 10000", "10000"),
    ("--num-samples", "0e0", "'0e0' must be a whole number >= 1; e.g. 10000", "10000"),
    ("--ode-steps", "-2e0", "'-2e0' must be a whole number >= 1; e.g. 32", "32"),
    ("--seed", "-1e3", "'-1e3' must be a whole number >= 0; e.g. 0", "0"),
    # Was "e.g. -10", itself refused.
    ("--ode-steps", "-10.5", "'-10.5' is not a whole number; e.g. 32", "32"),
    ("--num-samples", "0.4", "'0.4' is not a whole number; e.g. 10000", "10000"),
    ("--seed", "-0.7", "'-0.7' is not a whole number; e.g. 0", "0"),  # a least value of 0 counts too
    # Still told the int to write when that int is taken.
    ("--seed", "1e3", "'1e3' is a whole number written as a float; write 1000", "1000"),
    ("--num-samples", "2.5", "'2.5' is not a whole number; e.g. 2", "2"),
])
def test_sample_py_names_a_value_its_own_checks_take(capsys, flag, typed, said, accepted):
    from gensbi_sharding.harness.own_observation import main

    with pytest.raises(SystemExit) as stop:
        main(["run", "x.npy", flag, typed])
    assert stop.value.code == 2 and f"sample.py: error: argument {flag}: {said}\n" in capsys.readouterr().err
    # The value named passes the option's type (the run folder is refused next, not the value).
    assert main(["no-such-run", "x.npy", flag, accepted]) == 2  # refused, as the value was: argparse's code
    err = capsys.readouterr().err
    assert flag not in err and "no-such-run" in err


@pytest.mark.parametrize("typed, said", [
    ("-1e1", "'-1e1' must be an integer >= 1; e.g. 2"),  # was "write -10", then "-10 must be >= 1"
    ("0.0", "'0.0' must be an integer >= 1; e.g. 2"),  # was "write 0", then "0 must be >= 1"
    ("-0.5", "'-0.5' is not an integer; e.g. 2"),  # was "e.g. 0" (round(-0.5)), refused next
    ("0", "0 must be >= 1"),
    ("3e0", "'3e0' is a whole number written as a float; write 3"),
])
def test_a_benchmark_count_option_names_a_value_it_takes(typed, said):
    sys.path.append(str(REPO / "benchmarks"))
    from cli_args import positive_int

    with pytest.raises(argparse.ArgumentTypeError) as err:
        positive_int(typed)
    assert str(err.value) == said


@pytest.mark.parametrize("typed, suggested", [
    ("train.steps=-1e3", "train.steps=3000"),  # was train.steps=-1000, refused next: "must be >= 1"
    ("seed=-2e0", "seed=0"),  # was seed=-2, refused next: "must be >= 0"
    ("train.keep=0.4", "train.keep=2"),  # rounds to 0: the default, as before
    ("train.steps=1.5e3", "train.steps=1500"),  # a whole value taken as it is
    ("train.steps=2.6", "train.steps=3"),
])
def test_a_launch_override_typed_as_a_float_names_a_value_the_range_checks_take(typed, suggested):
    from gensbi_sharding.harness.override_types import override_problem

    problem = override_problem([typed])
    assert problem is not None and problem.endswith(f"; e.g. {suggested}"), problem
