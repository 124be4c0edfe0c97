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

_LAUNCHER_PREFIXES = ("PMIX_", "PMI_", "PRTE_", "HYDRA_")
_BTL = "OMPI_MCA_btl"  # Open MPI reads its MCA names case-sensitively
_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "MPI_LOCALNRANKS")


def started_by_launcher(environment: Mapping[str, str] = os.environ) -> bool:
    """Whether an MPI launcher (mpirun, prterun, srun, mpiexec.hydra) started this process."""
    return any(name in environment for name in _LAUNCHER_VARIABLES) or any(
        name.startswith(_LAUNCHER_PREFIXES) for name in environment
    )


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
