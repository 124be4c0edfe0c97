"""Open MPI's transports for a process that no launcher started.

A process started without mpirun or srun is a world of one, and evogan takes the same MPI path
as on any rank. Open MPI needs only its ``self`` transport there but opens all it has; the
PyPI Open MPI's libfabric transport (``btl/ofi``) alone spends about a second probing for
networks at every start. Such a process therefore gets ``OMPI_MCA_btl=self`` (other MPI
libraries ignore the variable), unless the user set it. A process that any launcher started
carries the launcher's variables and keeps Open MPI's own choice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

_BTL = "OMPI_MCA_btl"  # Open MPI reads its MCA names case-sensitively
_RANK_VARIABLES = (
    "OMPI_COMM_WORLD_SIZE",  # Open MPI's mpirun, and jsrun
    "PMIX_RANK",  # every PMIx launcher: prterun, srun --mpi=pmix, Flux
    "PMI_RANK",  # PMI-1/2: mpiexec.hydra (MPICH, Intel MPI), srun --mpi=pmi2
    "MPI_LOCALNRANKS",  # mpiexec.hydra
    "PALS_RANKID",  # HPE Cray PALS
)


def started_by_launcher(environment: Mapping[str, str] = os.environ) -> bool:
    """Whether an MPI launcher started this process as a rank: it names the rank. Settings a
    user or a site module exports (``PMIX_MCA_gds``, ``PRTE_MCA_*``, ``PMIX_ROOT``) and the
    batch step of a Slurm job (``SLURM_PROCID=0`` without a PMI) do not make a rank."""
    return any(name in environment for name in _RANK_VARIABLES)


@contextlib.contextmanager
def self_transport_when_alone() -> Iterator[None]:
    """While the block runs (MPI starts in it): only the ``self`` transport for a process no
    launcher started. The variable is removed afterwards, so that a caller that goes on to
    launch ranks (a test, a script) does not hand it to them."""
    if started_by_launcher() or _BTL in os.environ:
        yield
        return
    os.environ[_BTL] = "self"
    try:
        yield
    finally:
        os.environ.pop(_BTL, None)
