"""Count options of sample.py, the benchmarks and launch.py typed as floats, exponents or negatives: each refusal
names a value the option's own checks take.
"""

import argparse
import sys

import pytest

from faults_helpers import REPO


def test_a_count_typed_with_an_exponent_is_named_as_the_whole_number_to_write(capsys):
    # Was: `python sample.py <run> x_o.npy --num-samples 1e3`: argparse's bare "invalid int value: '1e3'" (and the
    # benchmark scripts' "'1e3' is not an integer; e.g. 2"), where launch.py's train.steps=1e3 names 1000. Now each
    # numeric option of sample.py and of the benchmark scripts names the number to write.
    import argparse

    import pytest

    from gensbi_sharding.harness.own_observation import main

    for option in ("--num-samples", "--seed", "--ode-steps"):
        with pytest.raises(SystemExit) as ended:
            main(["runs/a", "x_o.npy", option, "1e3"])
        assert ended.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"sample.py: error: argument {option}: '1e3' is a whole number written as a float; write 1000")
    with pytest.raises(SystemExit):
        main(["runs/a", "x_o.npy", "--num-samples", "1.5"])
    assert capsys.readouterr().err.endswith("'1.5' is not a whole number; e.g. 2\n")

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import cli_args
        import sbibm_method
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    for kind, typed, message in [
            (cli_args.positive_int, "1e3", "'1e3' is a whole number written as a float; write 1000"),
            (cli_args.integer, "-2e0", "'-2e0' is a whole number written as a float; write -2"),
            (cli_args.one_of((1000, 10000), int, argument="--budgets"), "1e4",
             "'1e4' is a whole number written as a float; write 10000"),
            (sbibm_method.rounds_arg, "2e0", "'2e0' is a whole number written as a float; write 2; pass --rounds 1 "
             "(amortised, the default) or --rounds 2 (sequential)")]:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            kind(typed)
        assert str(refused.value) == message
    assert cli_args.positive_int("12") == 12 and sbibm_method.rounds_arg("2") == 2


def test_a_negative_number_to_an_option_reaches_the_options_own_check(tmp_path, capsys):
    # Was: `sample.py run x.npy --seed -1e3` (and any benchmark script's option given -1e3, -inf, -1_000) ended in
    # argparse's "argument --seed: expected one argument": it took the value for an option, and named nothing.
    import pytest

    from gensbi_sharding.harness.own_observation import main

    sys.path.append(str(REPO / "benchmarks"))
    from sbibm import main as sbibm_main

    for argv, said in [
        (["r", "x.npy", "--seed", "-1e3"], "argument --seed: '-1e3' must be a whole number >= 0; e.g. 0"),
        (["r", "x.npy", "--se", "-1e3"], "argument --seed: '-1e3' must be a whole number >= 0; e.g. 0"),
        (["r", "x.npy", "--num-samples", "-inf"], "argument --num-samples: '-inf' is not a whole number; e.g. 10000"),
        (["r", "x.npy", "--ode-steps", "-1_0.5"], "argument --ode-steps: '-1_0.5' is not a whole number; e.g. 32"),
    ]:
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and f"sample.py: error: {said}\n" in capsys.readouterr().err, argv
    root = str(tmp_path / "root")
    for argv, said in [
        (["--budgets", "1000", "-1e3"], "argument --budgets: '-1e3' is not one of 1000, 10000, 100000"),
        (["--stop-grace", "-1e2"], "argument --stop-grace: '-1e2' must be an integer >= 1; e.g. 2"),
        (["--margin", "-5e-1"], "argument --margin: -5e-1 must be a finite number >= 0, e.g. --margin 0.5"),
    ]:
        with pytest.raises(SystemExit) as stop:
            sbibm_main(["run", "--root", root, *argv])
        assert stop.value.code == 2 and f" run: error: {said}\n" in capsys.readouterr().err, argv
    assert not (tmp_path / "root").exists()
    # A plain negative number, and the value given with '=', are read as before; an option's value is its own.
    with pytest.raises(SystemExit):
        main(["r", "x.npy", "--seed=-1e3", "--out", "-5"])
    assert "argument --seed: '-1e3' must be a whole number >= 0" in capsys.readouterr().err


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
    ("0", "0 must be >= 1; e.g. 2"),  # was "0 must be >= 1": no value to type
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


@pytest.mark.parametrize("what, typed, flags, said", [
    ("num_samples", 0, True, "--num-samples 0 must be an integer >= 1; e.g. --num-samples 10000"),
    ("seed", -1, False, "seed=-1 must be an integer >= 0 and <= 9,223,372,036,854,775,807 (the .npz stores it as a "
                        "64-bit integer); e.g. seed=0"),
    ("ode_steps", 10**8, True, "--ode-steps 100000000 must be an integer >= 1 and <= 10,000 (as a run's eval.ode_steps; "
                               "flow-matching samplers use 10-1,000); e.g. --ode-steps 32"),
])
def test_an_out_of_range_sample_count_names_a_value_to_type_that_passes(what, typed, flags, said):
    # Was: 'sample.py <run> x.npy --num-samples 0' said "--num-samples 0 must be an integer >= 1", no value to type.
    import re

    from gensbi_sharding.harness.sample_output import count_problems

    assert count_problems({what: typed}, flags) == [said]
    example = re.search(r"; e\.g\. (?:--[\w-]+ |\w+=)(\d+)$", said)[1]
    assert count_problems({what: int(example)}, flags) == []  # the value named passes
