"""A list setting given a dict (``mesh.devices={a:1}``, ``{}``): refused in one line, the fix a list that passes.

Was (found by round 67's fuzz of two overrides, ``mesh=none mesh.devices={a:1}``): every check passed, then Hydra's
several-line "Error merging override mesh.devices={a:1}"; list_override_problem skipped a dict as no scalar.
"""

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF


@pytest.mark.slow
@pytest.mark.parametrize("args, fix", [(["mesh.devices={a:1}"], "mesh.devices=[1]"),
                                       (["mesh.devices={}"], "mesh.devices=[1]"),
                                       (["eval.observations={a:1}"], "eval.observations=[1]"),
                                       (["model=flux1", "model.axes_dim={a:1}"], "model.axes_dim=[8,0]"),
                                       (["-m", "eval.observations=[2],{a:1}"], "eval.observations=[2],[1]")])
def test_a_dict_for_a_list_setting_is_refused_and_the_list_offered_passes(args, fix):
    typed = args[-1]
    assert command_problem(args) == f"{typed}: a list is expected, not a dict; write e.g. {fix}"
    pasted = [*args[:-1], fix]
    assert command_problem(pasted) is None  # the advice, pasted
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        if "-m" not in args:
            with pytest.raises(Exception, match="Error merging override"):  # what Hydra said of it
                compose("config", overrides=args)
            compose("config", overrides=pasted)
