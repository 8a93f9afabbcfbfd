"""Review of r71-hosts' refusals: each says what to do when followed literally, in plain words."""

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.processes import CLUSTER_VARIABLES
from gensbi_sharding.harness.distributed_checks import check_distributed, partial_cluster


def test_an_salloc_shell_is_told_to_start_under_the_launcher():
    # An salloc allocation sets SLURM_JOB_ID and SLURM_NTASKS, not the per-task ones: "JAX also needs SLURM_PROCID,
    # ..." alone read as "export them", where srun sets them for each task it starts.
    words = partial_cluster(CLUSTER_VARIABLES, {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"})
    assert words == (" (SLURM_NTASKS, SLURM_JOB_ID set, but JAX also needs SLURM_PROCID, SLURM_STEP_NODELIST, "
                     "SLURM_LOCALID, which the cluster's launcher (srun, mpirun) sets for each process it starts)")


def test_a_negative_rank_without_a_count_reads_must_be_0_or_more():
    # Was "distributed.process_id=-1 is not one of 0 or more". The keys check_distributed reads before the rank (a
    # composed config costs ~0.3 s): distributed.mode=explicit with an address and no num_processes.
    cfg = OmegaConf.create({"distributed": {
        "mode": "explicit", "coordinator_address": "localhost:1234", "local_processes": 1, "timeout_s": 60,
        "heartbeat_s": 10, "run_timeout_s": 60, "num_processes": None, "process_id": -1}})
    with pytest.raises(ConfigError) as caught:
        check_distributed(cfg)
    assert str(caught.value).startswith("distributed.process_id=-1 must be 0 or more; number the processes from 0, "
                                        "e.g. "), str(caught.value)
