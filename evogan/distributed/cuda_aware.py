"""Whether the MPI library under mpi4py can move CUDA device buffers (is "CUDA-aware").

mpi4py exposes no query for it, so the MPI library's own extension is called through ctypes:
Open MPI's ``MPIX_Query_cuda_support()`` and MPICH's ``MPIX_GPU_query_support``. Both answer
at run time, so a CUDA-aware build without CUDA support loaded still says no.
"""

from __future__ import annotations

import ctypes

MPICH_GPU_CUDA = 0  # MPIX_GPU_SUPPORT_CUDA in MPICH's mpi.h


def mpi_cuda_aware() -> bool | None:
    """True or False as the MPI library answers, None when it has no such query."""
    from evogan.distributed.mpi import MPI

    try:
        library = ctypes.CDLL(MPI.__file__)  # symbol lookup also searches its libmpi
    except OSError:
        return None
    query = getattr(library, "MPIX_Query_cuda_support", None)
    if query is not None:
        query.restype = ctypes.c_int
        return bool(query())
    query = getattr(library, "MPIX_GPU_query_support", None)
    if query is not None:
        flag = ctypes.c_int(0)
        query(ctypes.c_int(MPICH_GPU_CUDA), ctypes.byref(flag))
        return bool(flag.value)
    return None
