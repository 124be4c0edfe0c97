"""mpi4py's ``MPI``, started with the transports a lone process needs.

Importing ``mpi4py.MPI`` starts MPI. Every evogan module takes ``MPI`` from here, so whichever
import comes first (the CLI's, a script's, a user's program through the Python API) starts it
inside :func:`~evogan.distributed.transports.self_transport_when_alone`: a process that no
launcher started skips Open MPI's network probes (a second or more at every start) and its
shared-memory segment, which the PyPI Open MPI leaves in ``/dev/shm`` after a world of one.
"""

from __future__ import annotations

from evogan.distributed.transports import self_transport_when_alone

with self_transport_when_alone():
    from mpi4py import MPI

__all__ = ["MPI"]
