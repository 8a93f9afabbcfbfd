"""Each name lives in one module and is imported from there: no alias kept only for tests, no re-export kept for an
old import path."""

from gensbi_sharding.harness import console


def test_processes_are_tagged_by_set_process_alone():
    # Was: console.tag_process_records, which only called set_process, used by tests alone.
    assert not hasattr(console, "tag_process_records")
    assert "set_process" in console.__all__


def test_the_ctrl_c_fitting_is_a_module_of_its_own():
    # Was: ~50 lines of SIGINT handling inside evaluate.py, between C2ST and the pair plot.
    from gensbi_sharding.harness import ctrl_c_fit, evaluate

    assert not hasattr(evaluate, "_fit_through_ctrl_c")
    assert evaluate.fit_through_ctrl_c is ctrl_c_fit.fit_through_ctrl_c


def test_names_are_imported_from_where_they_live():
    # Was: posterior re-exported kept_scores' scored_before and samples_name, sweep_check cpu_count's cpu_devices_known.
    from gensbi_sharding.harness import posterior, sweep_check

    assert not hasattr(posterior, "scored_before") and "samples_name" not in posterior.__all__
    assert "cpu_devices_known" not in sweep_check.__all__


def test_modules_say_their_job_not_where_they_were_cut():
    from gensbi_sharding.harness import further_hint, kept_scores

    for module in (further_hint, kept_scores):
        assert "300-line cap" not in module.__doc__
