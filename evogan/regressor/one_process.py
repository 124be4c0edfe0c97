"""The RMSprop baseline runs on one process: under mpirun every rank would write the same run
(or race for one ``--run-dir``). ``evogan train`` asks before torch and MPI load, from the
launcher's environment; :func:`evogan.regressor.rmsprop.train_regressor` asks again, for the
Python API and for a launcher whose environment says nothing (then MPI answers, if a script
started it)."""

from __future__ import annotations

from evogan.distributed.failure import launched_ranks, world
from evogan.errors import EvoganError


def refuse_several_ranks() -> None:
    """Refuse, on every rank alike, before anything is written, a job of several ranks: the
    launcher's environment says how many, else the MPI world when MPI has already started
    (this never starts it)."""
    ranks = launched_ranks()
    if ranks < 2:
        comm = world()
        ranks = 1 if comm is None else comm.size
    if ranks > 1:
        raise EvoganError(
            f"evogan train for the regressor runs on one process (RMSprop), got {ranks} ranks; "
            "run it without mpirun, or use evogan evolve for the island GA"
        )
