"""tests/conftest.py's ``@pytest.mark.fast_cases(n)``: which cases of a family it marks slow depends on their place in
the family only, not on which of them a run selected (``--lf``, a node id).

Was (session 72's first hook, in pytest_collection_modifyitems): the first n cases *among the collected items* stayed
fast, so ``pytest --lf -m "not slow"`` after a failing slow case ran it as if fast, and ``pytest -m slow
tests/f.py::test[case5]`` deselected a case that ``make test-fast`` leaves out.
"""

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__)


@pytest.mark.parametrize("case", [0, 1, 2, 3])
@pytest.mark.fast_cases(2)
def test_family(case):
    assert case in (0, 1, 2, 3)  # the family whose marks the tests below read


@pytest.mark.parametrize("letter", ["a", "b"])
@pytest.mark.parametrize("number", [1, 2])
@pytest.mark.fast_cases(3)
def test_stacked_family(number, letter):
    assert (number, letter) != (0, "")


def test_not_a_family():
    assert HERE.name.endswith("_r72i.py")


def test_a_fresh_collection_marks_the_cases_past_n_slow(request):
    # Collected again here, as any run (--lf, a node id, -k, each xdist worker) collects this file: the marks are on
    # the items as they are made, before anything selects among them. The old hook marked nothing at this point.
    module = pytest.Module.from_parent(request.session, path=HERE)
    slow = {item.name: item.get_closest_marker("slow") is not None
            for item in module.collect() if isinstance(item, pytest.Function)}
    assert slow == {
        "test_family[0]": False, "test_family[1]": False, "test_family[2]": True, "test_family[3]": True,
        # collection order of stacked parametrize: the decorator nearest the function varies slowest
        "test_stacked_family[1-a]": False, "test_stacked_family[1-b]": False, "test_stacked_family[2-a]": False,
        "test_stacked_family[2-b]": True,
        "test_not_a_family": False, "test_a_fresh_collection_marks_the_cases_past_n_slow": False,
        "test_a_case_past_n_selected_alone_is_still_slow": True,
    }


@pytest.mark.slow  # starts a pytest process
def test_a_case_past_n_selected_alone_is_still_slow():
    def collected(*args):
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-p", "no:xdist", *args], capture_output=True, text=True, timeout=300,
                              cwd=HERE.parent.parent)
        return [line for line in done.stdout.splitlines() if "::" in line]

    alone = f"tests/{HERE.name}::test_family[3]"
    assert collected("-m", "slow", alone) == [alone]
    assert collected("-m", "not slow", alone) == []
    assert collected("-m", "not slow", f"tests/{HERE.name}::test_family[1]") == [f"tests/{HERE.name}::test_family[1]"]
