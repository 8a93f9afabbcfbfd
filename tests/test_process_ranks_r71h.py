"""A process's rank and count checked before any join; a partial cluster environment named; strays at the coordinator.

A user typing ``distributed.process_id=5 distributed.num_processes=2`` (or a rank off by one) saw process 0 wait out
``distributed.timeout_s`` blaming process 1, while the stray one was told "distributed=auto found no cluster";
``SLURM_PROCID``/``SLURM_NTASKS`` set by hand without the rest of SLURM's variables said only "found no cluster".
"""

import threading

import pytest

from faults_helpers import free_port
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator
from gensbi_sharding.harness.distributed_checks import check_cluster_ranks, check_distributed, partial_cluster
from gensbi_sharding.harness.processes import CLUSTER_VARIABLES

EXPLICIT = ("distributed.mode=explicit", "distributed.coordinator_address=localhost:1234")


@pytest.mark.parametrize("rank, count, words", [
    (5, 2, "distributed.process_id=5 is not one of 0..1 (distributed.num_processes=2); number the processes from 0"),
    (2, 2, "distributed.process_id=2 is not one of 0..1 (distributed.num_processes=2)"),
    (-1, 2, "distributed.process_id=-1 is not one of 0..1"),
    (0, 0, "distributed.num_processes=0 must be >= 1"),
])
@pytest.mark.fast_cases(2)
def test_a_rank_outside_the_count_is_refused_before_joining(compose_config, rank, count, words):
    cfg = compose_config(*EXPLICIT, f"distributed.num_processes={count}", f"distributed.process_id={rank}")
    with pytest.raises(ConfigError) as caught:
        check_distributed(cfg)
    assert words in str(caught.value)


@pytest.mark.parametrize("rank", [0, 1])  # one compose (~0.3 s) per case: the fast suite's 0.5 s per test
def test_ranks_inside_the_count_pass(compose_config, rank):
    check_distributed(compose_config(*EXPLICIT, "distributed.num_processes=2", f"distributed.process_id={rank}"))


def test_a_partial_slurm_environment_names_what_jax_also_needs():
    words = partial_cluster(CLUSTER_VARIABLES, {"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})
    assert words == " (SLURM_PROCID, SLURM_NTASKS set, but JAX also needs SLURM_JOB_ID, SLURM_STEP_NODELIST, " \
                    "SLURM_LOCALID, which the cluster's launcher (srun, mpirun) sets for each process it starts)"
    assert partial_cluster(CLUSTER_VARIABLES, {}) == ""
    full = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1",
            "SLURM_LOCALID": "0"}
    assert partial_cluster(CLUSTER_VARIABLES, full) == ""


SLURM = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "localhost", "SLURM_LOCALID": "0"}


@pytest.mark.parametrize("rank, count", [("3", "2"), ("2", "2"), ("-1", "2"), ("one", "2")])
def test_a_slurm_rank_not_below_its_count_names_both_variables(rank, count):
    with pytest.raises(ConfigError) as caught:
        check_cluster_ranks(CLUSTER_VARIABLES, {**SLURM, "SLURM_PROCID": rank, "SLURM_NTASKS": count})
    assert f"distributed=auto: SLURM_PROCID={rank} with SLURM_NTASKS={count} is not a rank of the job" \
           in str(caught.value)
    assert "found no cluster" not in str(caught.value)


def test_consistent_or_absent_cluster_variables_pass():
    assert check_cluster_ranks(CLUSTER_VARIABLES, {**SLURM, "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}) == {}
    assert check_cluster_ranks(CLUSTER_VARIABLES, {"SLURM_PROCID": "3", "SLURM_NTASKS": "2"}) == {}  # partial: JAX's
    assert check_cluster_ranks(CLUSTER_VARIABLES, {}) == {}


@pytest.mark.slow  # waits out a (short) coordinator timeout
def test_a_stray_rank_at_the_coordinator_is_named_and_never_told_to_go():
    address, told = f"127.0.0.1:{free_port()}", []

    def stray():
        try:
            check_coordinator(address, 5, 2, 2)
            told.append("go")
        except ConfigError as err:
            told.append(str(err))

    thread = threading.Thread(target=stray)
    thread.start()
    with pytest.raises(ConfigError, match=r"process\(es\) \[1\] of 2 did not reach .* \(refused: process_id \[5\], "
                                          r"outside 1\.\.1 or given twice\)"):
        check_coordinator(address, 0, 2, 1)
    thread.join(timeout=10)
    assert not thread.is_alive() and told and told[0] != "go"


def test_an_inconsistent_cluster_rank_tags_no_process():
    from gensbi_sharding.harness.processes import environment_rank

    # was (3, 2): its error was tagged "[process 3/2]", a process the job cannot have
    assert environment_rank({**SLURM, "SLURM_PROCID": "3", "SLURM_NTASKS": "2"}) is None
    assert environment_rank({**SLURM, "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}) == (1, 2)
