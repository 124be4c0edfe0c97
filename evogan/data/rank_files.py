"""One shower file written by every rank of an MPI job: each rank streams its events into a
part of its own, the parts appear all together or not at all, and rank 0 joins them at the path
asked for with HDF5 virtual datasets, which h5py, ``evogan`` and any HDF5 1.10+ tool read as one
file of every event in rank order, without a copy.

One file per rank, not one file through collective I/O: h5py here is built without parallel
HDF5, and separate files need no coordination while they are written. The part of rank 3 of
``OUT`` = ``gen.h5`` is ``gen.rank0003.h5`` beside it; a single process writes ``OUT`` itself.
``OUT`` names its parts by file name (attribute ``parts``), so the folder moves as a whole; a
reader refuses it when a part is missing (:mod:`evogan.data.hdf5`) instead of reading zeros.

Atomic as a set: each part goes to a temporary file (:class:`~evogan.data.writer.ShowerWriter`).
A rank that fails, or receives SIGTERM/SIGINT, stops every rank at its next batch (a stop
agreement, one non-blocking all-reduce in flight); when the ranks' blocks end they tell each
other how (one collective, :func:`~evogan.distributed.failure.all_succeeded`), and the parts
move into place only if every block succeeded; otherwise every rank removes its temporary file
and raises, and the command ends with the failing rank's error (or the stop) in one line. Rank
0 writes ``OUT`` (atomically too) after every part is in place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py

from evogan.data.writer import STREAMING, ShowerWriter, check_writable
from evogan.distributed.failure import all_succeeded, rank0_decides
from evogan.distributed.signals import (
    Interrupted,
    StopAgreement,
    StopFlag,
    catch_stop_signals,
    raise_on_stop_signals,
)
from evogan.errors import DataError
from evogan.store.atomic import atomic_path

Append = Callable[..., None]
"""``append(ecal, energy, theta, event)``: :meth:`ShowerWriter.append` of a rank's part."""


def part_path(out: Path, rank: int, ranks: int) -> Path:
    """The file rank ``rank`` of ``ranks`` writes for ``out`` (``out`` itself on one rank)."""
    if ranks == 1:
        return out
    return out.with_name(f"{out.stem}.rank{rank:04d}{out.suffix}")


def check_parts(out: Path, comm: Any) -> None:
    """Refuse, on every rank alike, an ``out`` whose part for some rank cannot be written (each
    rank checks its own: no rank stats every part of a large job)."""
    ranks = 1 if comm is None else comm.size
    failure = None
    try:
        check_writable(out)
        check_writable(part_path(out, 0 if comm is None else comm.rank, ranks))
    except DataError as exc:
        failure = exc
    all_succeeded(failure, comm=comm)


class _Stopped(Exception):
    """The ranks agreed to stop: another rank failed or was signalled."""


@contextlib.contextmanager
def rank_part(out: Path, comm: Any, shape: tuple[int, ...], **options: Any) -> Iterator[Append]:
    """This rank's ``append(ecal, energy, theta, event)`` into its part of ``out``
    (``options``: :class:`ShowerWriter`'s). The parts are kept only if every rank's block ends
    cleanly (collective over ``comm``, None: one process), then joined at ``out``.

    In the block SIGTERM/SIGINT raise at once on the rank they reach; a failing or signalled
    rank tells the others at their next append through a stop agreement
    (:class:`~evogan.distributed.signals.StopAgreement`), rather than after their whole share.
    While the ranks agree and commit, a signal only sets the agreement's flag, so that no rank
    leaves a collective its peers are in.
    """
    ranks = 1 if comm is None else comm.size
    path = part_path(out, 0 if comm is None else comm.rank, ranks)
    flag = StopFlag()
    with catch_stop_signals(flag), contextlib.ExitStack() as stack:
        agreement = StopAgreement(comm, flag)
        stack.callback(agreement.close)
        failure, events = None, 0
        try:
            writer = stack.enter_context(ShowerWriter(path, shape, **options))

            def append(*columns: Any) -> None:
                writer.append(*columns)
                with catch_stop_signals(flag):
                    stopped = agreement.poll()
                if stopped:
                    raise _Stopped

            with raise_on_stop_signals():
                yield append
            events = writer.events
        except _Stopped:
            pass
        except BaseException as exc:  # every rank must hear of it, whatever it is
            failure = exc
            flag.raised = True
        if agreement.finish() and failure is None and flag.signal_name is not None:
            failure = Interrupted(flag.signal_name)
        counts = all_succeeded(failure, events, comm)  # raises here: the part is removed
        stack.close()  # the part moves into place
        if ranks > 1:
            comm.Barrier()
            parts = [part_path(out, rank, ranks) for rank in range(ranks)]
            rank0_decides(lambda: join_parts(out, parts, counts), comm)


def join_parts(out: Path, parts: list[Path], counts: list[int]) -> None:
    """Write at ``out`` a file whose every dataset is those of ``parts`` (``counts`` events
    each) one after the other, as virtual datasets naming each part by its file name, with the
    first part's attributes and ``parts``; the parts are removed if it cannot be written."""
    with h5py.File(parts[0], "r") as first:
        datasets = {key: (first[key].shape[1:], first[key].dtype) for key in first}
        attrs = dict(first.attrs)
    total = sum(counts)
    try:
        with atomic_path(out) as tmp, h5py.File(tmp, "w", libver=STREAMING) as f:
            for key, (tail, dtype) in datasets.items():
                layout = h5py.VirtualLayout(shape=(total, *tail), dtype=dtype)
                at = 0
                for part, count in zip(parts, counts, strict=True):
                    layout[at : at + count] = h5py.VirtualSource(part.name, key, (count, *tail))
                    at += count
                f.create_virtual_dataset(key, layout)
            f.attrs.update(attrs)
            f.attrs["parts"] = [part.name for part in parts]
    except OSError as exc:
        for part in parts:
            part.unlink(missing_ok=True)
        raise DataError(f"cannot write {out} to join the ranks' files: {exc}") from None
