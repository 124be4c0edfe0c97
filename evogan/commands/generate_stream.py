"""How ``evogan generate`` makes and writes its showers: numbered events in batches of a fixed
grid, split over the ranks, streamed to one file per rank, with memory that does not grow with
``--events``.

Event numbers run from ``--first-event``. Batches lie on a grid of ``--batch-size`` events from
event 0 (batch k holds events k*B .. k*B+B-1) and are always run whole, keeping the events asked
for: an event's conditions and noise are a pure function of the seed and its number
(:func:`evogan.gan3d.model.generate.generate_events`), and the grid gives it the same batch size
and place in its batch, where the matrix products round the same way, so its shower comes out
bit for bit the same whichever ranks or ``--first-event`` make it (for one ``--batch-size``,
device, precision, convolution form and thread count). Each rank takes a run of whole grid
batches (:func:`rank_range`).

Before writing, every rank runs its first batch, measures what its showers take on disk
(:func:`~evogan.data.writer.stored_bytes`) and the request is refused in one line on every rank
when that times the events is more than the free disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evogan.errors import EvoganError

Conditions = Callable[[int, int], tuple[np.ndarray, np.ndarray | None]]
"""Energies (GeV) and angles (rad, or None) of the events numbered ``start .. stop - 1``."""


@dataclass(frozen=True)
class Request:
    """Events ``first .. first + events - 1`` from ``seed``, in grid batches of ``batch``."""

    first: int
    events: int
    batch: int
    seed: int
    precision: str = "float32"

    def batches(self) -> int:
        """The grid batches the events touch."""
        return -(-(self.first + self.events) // self.batch) - self.first // self.batch


def rank_range(request: Request, rank: int, ranks: int) -> tuple[int, int]:
    """The events of rank ``rank`` of ``ranks``: whole grid batches (but where the request
    starts or ends inside one), as even a share as whole batches allow."""
    start = request.first // request.batch
    count = request.batches()
    low = (start + count * rank // ranks) * request.batch
    high = (start + count * (rank + 1) // ranks) * request.batch
    end = request.first + request.events
    return max(request.first, low), min(end, high)


def check_ranks(request: Request, ranks: int) -> None:
    """Refuse a request of fewer grid batches than ranks (a rank would write nothing)."""
    if request.batches() < ranks:
        raise EvoganError(
            f"--events {request.events:,} at --batch-size {request.batch} is "
            f"{request.batches()} batch(es) for {ranks} ranks; each rank needs one: lower "
            f"--batch-size to {max(1, request.events // ranks)} or run fewer ranks"
        )


def showers(
    spec, generator, conditions: Conditions, request: Request, span: tuple[int, int]
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]]:
    """(showers GeV, energies, angles, event numbers) of the events in ``span``, a whole grid
    batch run for each piece; the generator keeps no batch while it makes the next. The
    generator's inference form is built once, for every batch."""
    from evogan.gan3d.model.inference import inference_generator

    generator = inference_generator(spec, generator, request.precision)
    size = request.batch
    for start in range(span[0] // size * size, span[1], size):
        yield _batch(spec, generator, conditions, request, start, span)


def _batch(spec, generator, conditions: Conditions, request: Request, start: int, span) -> tuple:
    """The events of ``span`` in the grid batch from event ``start``."""
    from evogan.gan3d.model.generate import generate_events

    numbers = np.arange(start, start + request.batch, dtype=np.int64)
    energy, theta = conditions(start, start + request.batch)
    made = generate_events(spec, generator, energy, theta, request.seed, numbers, request.precision)
    keep = slice(max(span[0], start) - start, min(span[1], start + request.batch) - start)
    return made[keep], energy[keep], None if theta is None else theta[keep], numbers[keep]


def write_showers(
    out: Path,
    comm: Any,
    model: tuple,
    conditions: Conditions,
    request: Request,
    writer_options: dict,
    ready: Callable[[], None] = lambda: None,
) -> float:
    """Generate the request's events on every rank of ``comm`` (None: this process alone) into
    ``out`` (:mod:`evogan.data.rank_files`); returns the seconds the slowest rank took, from
    its first batch until every part was in place. ``ready()`` is called once nothing can
    refuse the request any more (the disk has room, every part is open): hints go there."""
    from evogan.data.rank_files import rank_part
    from evogan.data.writer import stored_bytes
    from evogan.distributed.failure import all_succeeded
    from evogan.progress import progress

    spec, generator = model
    rank, ranks = (0, 1) if comm is None else (comm.rank, comm.size)
    span = rank_range(request, rank, ranks)
    started = time.monotonic()
    made = showers(spec, generator, conditions, request, span)
    first, failure, size = None, None, 0.0
    try:
        first = next(made)
        size = stored_bytes(first[0]) * (span[1] - span[0])
    except BaseException as exc:  # every rank must hear of it before the disk check
        failure = exc
    _require_room(out, request, sum(all_succeeded(failure, size, comm)), comm)
    title = "generate" if ranks == 1 else f"generate (rank 0 of {ranks})"
    with (
        rank_part(out, comm, tuple(spec.output_shape), numbered=True, **writer_options) as append,
        progress(title, total=span[1] - span[0], unit="showers", show=rank == 0) as task,
    ):
        ready()
        batch = first
        del first  # one batch in memory at a time
        while batch is not None:
            append(*batch)
            task.advance(len(batch[3]))
            batch = None  # dropped before the next one is made
            batch = next(made, None)
    seconds = time.monotonic() - started
    if comm is None:
        return seconds
    from evogan.distributed.mpi import MPI

    return comm.allreduce(seconds, op=MPI.MAX)


def _require_room(out: Path, request: Request, need: float, comm: Any) -> None:
    """Refuse (rank 0 decides, every rank raises) a request whose parts need more disk than is
    free where ``out`` goes."""
    from evogan.distributed.failure import rank0_decides
    from evogan.resources import require_disk, size_text

    each = size_text(need / request.events)
    rank0_decides(
        lambda: require_disk(
            need,
            out,
            f"--events {request.events:,} ({each} a shower, as the first batch compresses)",
            "ask for fewer --events, or write to a file system with room",
        ),
        comm,
    )
