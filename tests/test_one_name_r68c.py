"""Each name lives in one module and is imported from there: no alias kept only for tests, no re-export kept for an
old import path."""

from gensbi_sharding.harness import console


def test_processes_are_tagged_by_set_process_alone():
    # Was: console.tag_process_records, which only called set_process, used by tests alone.
    assert not hasattr(console, "tag_process_records")
    assert "set_process" in console.__all__
