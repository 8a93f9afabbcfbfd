"""``dict_override_problem``: a section given as a dict (``train={stepz:5}``, ``mesh={data:2,model:4}``) whose keys
or values the section refuses, named as the dotted overrides it stands for.

Hydra merges ``train={steps:5}`` into the section, key by key; the checks of dotted keys (``override_keys``,
``override_types``) never saw the dict, so a key the section lacks reached Hydra's "Could not override 'train'. To
append to your config use +train={stepz:5}", which is refused in turn, and ``mesh={data:2,model:4}`` (the mesh's
axes written as sizes) got the same, naming no ``mesh.model_axis``. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType

from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.mesh_sizes import mesh_sizes_hint
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.refusal import rephrased

__all__ = ["dict_override_problem"]


def _dotted(prefix: str, value: dict) -> list[str]:
    """``train``, ``{steps: 5}`` -> ``["train.steps=5"]`` (a nested dict as deeper keys)."""
    return [item for key, v in value.items() for item in (
        _dotted(f"{prefix}.{key}", v) if isinstance(v, dict) else [f"{prefix}.{key}={override_literal(v)}"])]


def dict_override_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first section given as a dict that the checks of its dotted overrides refuse.

    Each dict value of a plain ``section=`` override (also each swept one) is checked as the dotted overrides it
    stands for (``train={stepz:5}`` as ``train.stepz=5``), by the checks of ``command_checks`` that read keys and
    values; ``mesh={data:..,model:..}`` also names the ``mesh.model_axis`` those sizes mean.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"train={stepz:5} stands for train.stepz=5: train.stepz is not a setting of train (did you mean
        train.steps?); its settings: ...; set train.steps=5"``.
    """
    from gensbi_sharding.harness.key_checks import model_key_problem, unknown_key_problem
    from gensbi_sharding.harness.override_lists import list_override_problem
    from gensbi_sharding.harness.override_types import override_problem
    from gensbi_sharding.harness.task_fixed import task_fixed_problem

    command = parse(args)
    for o in command.parsed:
        if o.hydra.type != OverrideType.CHANGE or o.hydra.package is not None or "." in o.key or o.key == "hydra":
            continue
        for value in (v for v in o.values() if isinstance(v, dict)):
            dotted = _dotted(o.key, value)
            rest = [a for a in command.args if a != o.arg]
            for check in (task_fixed_problem, model_key_problem, unknown_key_problem, list_override_problem,
                          override_problem):
                if problem := check([*rest, *dotted]):
                    said = next((f"{d}: " for d in dotted if problem.startswith(f"{d}: ")), "")
                    hint = mesh_sizes_hint(value) if o.key == "mesh" and "mesh.model_axis=" not in problem else ""
                    return rephrased(problem, lead=f"{o.arg} stands for {' '.join(dotted)}: ", drop=said, more=hint)
    return None
