"""Every public function of the library documents its parameters numpy style (the developers' standard).

Checked by name: each parameter of the signature appears in the ``Parameters`` section, and a function
whose body raises lists a ``Raises`` section, so a new argument or error cannot go undocumented.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

import gensbi_sharding as gs
from gensbi_sharding import checkpoint


def _public_callables():
    for module in (gs, checkpoint):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj
            elif inspect.isclass(obj) and obj.__module__.startswith("gensbi_sharding"):
                for attr, member in vars(obj).items():
                    member = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                    if inspect.isfunction(member) and not attr.startswith("_") and _has_source(member):
                        yield f"{module.__name__}.{name}.{attr}", member
                init = vars(obj).get("__init__")
                if inspect.isfunction(init) and _has_source(init):  # numpy style: the class documents these
                    yield f"{module.__name__}.{name}", _ClassInit(obj, init)


class _ClassInit:
    """A class checked by its hand-written ``__init__``'s parameters against the class docstring."""

    def __init__(self, cls, init):
        self.cls, self.init, self.__name__ = cls, init, cls.__name__


def _has_source(fn) -> bool:
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):  # generated (dataclass) methods
        return False
    return True


def _section(doc: str, title: str) -> str | None:
    lines = doc.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == title and set(lines[i + 1].strip()) == {"-"}:
            body = []
            for text in lines[i + 2:]:
                if text.strip() and set(text.strip()) == {"-"}:
                    body.pop()  # the previous line was the next section's title
                    break
                body.append(text)
            return "\n".join(body)
    return None


def _raises(fn) -> bool:
    if isinstance(fn, _ClassInit):
        fn = fn.init
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    return any(isinstance(node, ast.Raise) for node in ast.walk(tree))


CALLABLES = sorted(_public_callables(), key=lambda pair: pair[0])


def test_there_are_public_callables_to_check():
    assert len(CALLABLES) > 40


@pytest.mark.parametrize("name,fn", CALLABLES, ids=[n for n, _ in CALLABLES])
def test_numpy_docstring_names_every_parameter(name, fn):
    doc = inspect.getdoc(fn.cls if isinstance(fn, _ClassInit) else fn)
    assert doc, f"{name} has no docstring"
    signature = inspect.signature(fn.init if isinstance(fn, _ClassInit) else fn)
    params = [p for p in signature.parameters if p not in ("self", "cls")]
    if not params:
        return
    section = _section(doc, "Parameters")
    assert section is not None, f"{name}: no numpy 'Parameters' section"
    documented = {part.strip().lstrip("*") for line in section.splitlines()
                  if line and not line[0].isspace() for part in line.split(":")[0].split(",")}
    missing = [p for p in params if p not in documented]
    assert not missing, f"{name}: parameters {missing} not in its Parameters section"


RAISING = [(n, f) for n, f in CALLABLES if _raises(f)]


@pytest.mark.parametrize("name,fn", RAISING, ids=[n for n, _ in RAISING])
def test_a_function_that_raises_has_a_raises_section(name, fn):
    doc = inspect.getdoc(fn.cls if isinstance(fn, _ClassInit) else fn)
    assert _section(doc, "Raises") is not None, f"{name} raises but has no 'Raises' section"
