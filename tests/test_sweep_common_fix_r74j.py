"""A refused sweep's one value for every job, where that value lets a job reach a refusal of another setting (r74j).

Was: ``common_fix`` took any job still refused under a fix as that fix failing, so a batch size that every job takes
(each job then refused by a later check, of another setting) ended the sweep's refusal with "no one of the jobs' own
fixes ... fixes every job ...: run the jobs that need different values in sweeps of their own": advice away from the
one value that fixes the setting the jobs' fixes name.
"""

from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.sweep_common_fix import common_fix

JOBS = [["mesh.model_axis=1"], ["mesh.model_axis=2"]]


def _refusal(value: int) -> Refusal:
    return Refusal("ConfigError: data.batch_size=1024 cannot be used", f"data.batch_size={value}")


def test_a_value_that_leaves_only_other_settings_refused_is_named():
    def still_refused(jobs):  # 896 splits over 8 and 4 devices; each job then meets a check of another setting
        return [(n, job, "ConfigError: eval.num_samples=5 is under 10") for n, job in enumerate(jobs)]

    refused = [(0, JOBS[0], _refusal(896)), (1, JOBS[1], _refusal(900))]
    assert common_fix(refused, JOBS, still_refused) == (
        "one value for every job (their own fixes differ: data.batch_size=896, data.batch_size=900; a setting the "
        "sweep does not vary takes one value): set data.batch_size=896; with it, 2 job(s) are refused for other "
        "settings (run it to see them)")


def test_a_value_some_job_still_refuses_is_not_named():
    def still_refused(jobs):  # 900 does not split over 8 devices: job 0 refuses it, naming the batch size again
        value = jobs[0][-1]
        return [(0, jobs[0], f"ConfigError: {value} cannot be used")] if value.endswith("900") else []

    refused = [(1, JOBS[1], _refusal(900)), (0, JOBS[0], _refusal(896))]
    assert common_fix(refused, JOBS, still_refused).endswith("takes one value): set data.batch_size=896")


def test_at_most_three_fixes_are_tried_and_the_rest_named_untried():
    # Was: every offered fix checked the whole sweep again: 8 values on 48 jobs kept the refusal for minutes
    from gensbi_sharding.harness.sweep_common_fix import TRIED_AT_MOST

    jobs = [[f"mesh.model_axis={n}"] for n in range(5)]
    refused = [(n, jobs[n], Refusal("ConfigError: data.batch_size=1024 cannot be used", f"data.batch_size={900 - n}"))
               for n in range(5)]
    tried = []
    line = common_fix(refused, jobs, lambda js: tried.append(js[0][-1]) or [(0, js[0], "data.batch_size no")])
    assert TRIED_AT_MOST == 3 and tried == ["data.batch_size=900", "data.batch_size=899", "data.batch_size=898"]
    assert "takes one value; 2 more not tried: try them in the command): run the jobs" in line, line
