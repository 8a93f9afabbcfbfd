"""``launch.py hydra.job_logging.handlers.file.filename=/tmp/x.log``: the job's log file set by its path, which Hydra's
logging config holds as ``${hydra.runtime.output_dir}/${hydra.job.name}.log``.

Was: a 60-line omegaconf traceback (InterpolationToMissingValueError "Missing mandatory value:
hydra.runtime.output_dir") from the command check's walk of Hydra's config, which resolved the default it was only
asked to find. Now the check passes it and the run writes its log there (measured: a dry run, log in /tmp/x.log).
"""

import pytest


def test_the_job_log_files_name_set_by_its_path_passes_the_command_check():
    from gensbi_sharding.harness.hydra_entries import hydra_entry_problem

    assert hydra_entry_problem(["hydra.job_logging.handlers.file.filename=/tmp/x.log"]) is None


@pytest.mark.slow  # a second composition of Hydra's config (~0.3 s): a guard, the fast one above is the fix
def test_a_key_hydras_logging_config_lacks_is_still_refused():
    from gensbi_sharding.harness.hydra_entries import hydra_entry_problem

    problem = hydra_entry_problem(["hydra.job_logging.handlers.file.nosuch=1"])
    assert problem is not None and "hydra.job_logging.handlers.file.nosuch" in problem and "++" in problem, problem
